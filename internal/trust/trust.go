// Package trust verifies a server's certificate against a CA bundle file
// read at each handshake: the operator's bundle reaches the sidecars in a
// mounted ConfigMap, which the kubelet updates when the CA rotates, and a
// verification with the pool fixed at start would stop trusting the new
// CA's certificates.
package trust

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
)

// maxBundleBytes bounds a bundle file: a few CAs are a few KiB.
const maxBundleBytes = 1 << 20

// Verifier checks a peer's certificate chain against the bundle in
// CAFile, for Name (the name the certificate must carry).
type Verifier struct {
	CAFile, Name string
	// Peer names the server in errors ("the operator", "the node agent").
	Peer string
}

// Config is a client TLS configuration that verifies with v (TLS 1.2 at
// least; the standard verification is replaced by v's, which reads the
// bundle at each handshake).
func (v Verifier) Config() *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         v.Name,
		InsecureSkipVerify: true, //nolint:gosec // VerifyConnection verifies the chain and the name
		VerifyConnection:   v.Verify,
	}
}

// Verify is a tls.Config's VerifyConnection.
func (v Verifier) Verify(cs tls.ConnectionState) error {
	pool, err := v.pool()
	if err != nil {
		return err
	}
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("%s sent no certificate", v.Peer)
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err = cs.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: v.Name, Roots: pool, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		return fmt.Errorf("%s's certificate is not the operator's for %s: %w", v.Peer, v.Name, err)
	}
	return nil
}

func (v Verifier) pool() (*x509.CertPool, error) {
	f, err := os.Open(v.CAFile)
	if err != nil {
		return nil, fmt.Errorf("the operator's CA bundle: %w", err)
	}
	defer func() { _ = f.Close() }()
	pem, err := io.ReadAll(io.LimitReader(f, maxBundleBytes+1))
	if err != nil {
		return nil, fmt.Errorf("the operator's CA bundle: %w", err)
	}
	if len(pem) > maxBundleBytes {
		return nil, fmt.Errorf("the operator's CA bundle %s is over %d bytes", v.CAFile, maxBundleBytes)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("the operator's CA bundle " + v.CAFile + " holds no PEM certificate")
	}
	return pool, nil
}

package trust

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newCA(t *testing.T, name string) ca {
	t.Helper()
	cert, key := sign(t, nil, &x509.Certificate{Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign})
	return ca{cert, key}
}

// sign makes a certificate of tmpl, signed by parent (nil: itself).
func sign(t *testing.T, parent *ca, tmpl *x509.Certificate) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	if tmpl.NotAfter.IsZero() {
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, key.Public(), signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func leaf(names []string, eku ...x509.ExtKeyUsage) *x509.Certificate {
	if eku == nil {
		eku = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	return &x509.Certificate{Subject: pkix.Name{CommonName: "leaf"}, DNSNames: names, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: eku}
}

func writeBundle(t *testing.T, path string, cas ...ca) {
	t.Helper()
	var b []byte
	for _, c := range cas {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.cert.Raw})...)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A peer is believed only with a chain to the bundle as the file holds it
// now, for the name given, for serving; anything else is refused, naming
// the peer.
func TestAPeerIsBelievedOnlyWithTheOperatorsCertificateForItsName(t *testing.T) {
	const name = "shardfeed-node-agent.shardfeed-system.svc"
	operator, other := newCA(t, "operator"), newCA(t, "other")
	bundle := filepath.Join(t.TempDir(), "operator-ca.crt")
	writeBundle(t, bundle, operator)
	good, _ := sign(t, &operator, leaf([]string{name}))
	webhook, _ := sign(t, &operator, leaf([]string{"shardfeed-webhook.shardfeed-system.svc"}))
	wildcard, _ := sign(t, &operator, leaf([]string{"*.shardfeed-system.svc"}))
	clientOnly, _ := sign(t, &operator, leaf([]string{name}, x509.ExtKeyUsageClientAuth))
	foreign, _ := sign(t, &other, leaf([]string{name}))
	self, _ := sign(t, nil, leaf([]string{name}))
	expired, _ := sign(t, &operator, &x509.Certificate{Subject: pkix.Name{CommonName: "leaf"}, DNSNames: []string{name},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	v := Verifier{CAFile: bundle, Name: name, Peer: "the node agent"}
	for _, tt := range []struct {
		name  string
		chain []*x509.Certificate
		want  string // "": believed
	}{
		{"the operator's certificate for the name", []*x509.Certificate{good}, ""},
		{"the operator's certificate for another name (the webhook's)", []*x509.Certificate{webhook}, "not the operator's"},
		{"a wildcard the operator signed", []*x509.Certificate{wildcard}, ""},
		{"a client certificate for the name", []*x509.Certificate{clientOnly}, "not the operator's"},
		{"another CA's certificate for the name", []*x509.Certificate{foreign}, "not the operator's"},
		{"a self-signed certificate for the name", []*x509.Certificate{self}, "not the operator's"},
		{"an expired certificate of the operator's", []*x509.Certificate{expired}, "not the operator's"},
		{"no certificate", nil, "sent no certificate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := v.Verify(tls.ConnectionState{PeerCertificates: tt.chain})
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("%v; want %q", err, tt.want)
			}
			if err != nil && !strings.Contains(err.Error(), "the node agent") && tt.chain != nil {
				t.Errorf("the error does not name the peer: %v", err)
			}
		})
	}

	// The bundle is read at each handshake: a rotated CA is trusted at
	// once, an emptied or missing bundle trusts nothing.
	next := newCA(t, "next")
	rotated, _ := sign(t, &next, leaf([]string{name}))
	if err := v.Verify(tls.ConnectionState{PeerCertificates: []*x509.Certificate{rotated}}); err == nil {
		t.Fatal("a certificate of a CA not yet in the bundle was believed")
	}
	writeBundle(t, bundle, operator, next)
	if err := v.Verify(tls.ConnectionState{PeerCertificates: []*x509.Certificate{rotated}}); err != nil {
		t.Fatalf("after the bundle gained the next CA: %v", err)
	}
	if err := os.WriteFile(bundle, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(tls.ConnectionState{PeerCertificates: []*x509.Certificate{good}}); err == nil || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Fatalf("a bundle of garbage: %v", err)
	}
	if err := os.Remove(bundle); err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(tls.ConnectionState{PeerCertificates: []*x509.Certificate{good}}); err == nil {
		t.Fatal("with no bundle, a certificate was believed")
	}
	if c := v.Config(); !c.InsecureSkipVerify || c.VerifyConnection == nil || c.MinVersion < tls.VersionTLS12 {
		t.Fatalf("Config does not verify with the bundle: %+v", c)
	}
}

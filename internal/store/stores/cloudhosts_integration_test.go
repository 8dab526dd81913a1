//go:build integration

package stores

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/s3"
)

// cloudNames are the names the listener below stands in for, with a
// certificate the test process trusts (SSL_CERT_FILE, set by TestMain
// before any TLS): the clouds' own hosts, and hosts their customers run.
var cloudNames = []string{
	"my-bucket.s3.us-east-1.amazonaws.com", "reports-123456789012.s3-accesspoint.us-west-2.amazonaws.com",
	"bucket.vpce-1a2b3c4d-5e6f.s3.us-east-1.vpce.amazonaws.com", "s3-fips.us-gov-west-1.amazonaws.com",
	"s3.cn-north-1.amazonaws.com.cn", "s3.us-gov-west-1.amazonaws.com", "s3.eu-west-1.amazonaws.com",
	"sts.eu-west-1.amazonaws.com", "sts.cn-north-1.amazonaws.com.cn", "sts.us-gov-west-1.amazonaws.com",
	"abc123defg.execute-api.us-east-1.amazonaws.com", "ec2-203-0-113-5.compute-1.amazonaws.com",
	"s3.dualstack.cn-north-1.amazonaws.com.cn", "s3.dualstack.us-gov-west-1.amazonaws.com",
}

// cloudCert is the listener's certificate for cloudNames.
var cloudCert tls.Certificate

// trustCloudNames makes a CA, a certificate of it for cloudNames, and
// points SSL_CERT_FILE at the CA, so that the SDKs' own TLS (system roots)
// accepts the listener as those hosts.
func trustCloudNames() (cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "cloudnames-")
	if err != nil {
		return nil, err
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "shardfeed test clouds"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return cleanup, err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "clouds"}, DNSNames: cloudNames,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return cleanup, err
	}
	cloudCert = tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		return cleanup, err
	}
	return cleanup, os.Setenv("SSL_CERT_FILE", caFile)
}

// standIn is a TLS listener on loopback that answers as any of
// cloudNames: it forwards each request to MinIO with its Host kept (the
// SDK signed it), and records the hosts it was asked for.
type standIn struct {
	*httptest.Server
	mu    sync.Mutex
	hosts []string
}

func newStandIn(t *testing.T) *standIn {
	target, _ := url.Parse("http://" + minioServer.Endpoint)
	proxy := httputil.NewSingleHostReverseProxy(target)
	s := &standIn{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hosts = append(s.hosts, r.Host)
		s.mu.Unlock()
		proxy.ServeHTTP(w, r) // the Director keeps r.Host: MinIO checks the signature over it
	}))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{cloudCert}}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func (s *standIn) heard() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.hosts...)
}

// policyVia is the chart's default policy, with every name resolved to
// addr and every allowed connection made to the stand-in instead.
func policyVia(s *standIn, addr string) *store.Endpoints {
	p := Policy(nil, true)
	p.LookupNetIP = func(context.Context, string, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr(addr)}, nil
	}
	p.Dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, s.Listener.Addr().String())
	}
	return p
}

// The hosts the clouds run for their storage and token services still
// work under the default policy, through the real SDKs: a bucket host, an
// access point, a VPC endpoint on its private address, a FIPS endpoint,
// and each partition's storage and STS hosts; an object written to the
// store behind them reads back whole.
func TestIntegrationTheCloudsOwnHostsStillWork(t *testing.T) {
	ctx := context.Background()
	bucket := minioServer.Bucket(t)
	want := []byte("bytes behind a cloud's own host")
	if _, err := minioServer.Client.PutObject(ctx, bucket, "web/shard.bin", bytes.NewReader(want), int64(len(want)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	keys := map[string][]byte{s3.AccessKeyFile: []byte(minioServer.AccessKey), s3.SecretKeyFile: []byte(minioServer.SecretKey)}
	retry := store.Retry{MaxElapsed: time.Millisecond, RequestTimeout: 20 * time.Second}
	for _, tc := range []struct {
		name, endpoint, region, addr string
		// reached is the host the SDK asks for ("": the endpoint's): for
		// a regional endpoint minio-go picks the dual-stack host itself,
		// which is why each request is checked, not only the endpoint.
		reached string
	}{
		{"a bucket host", "my-bucket.s3.us-east-1.amazonaws.com", "us-east-1", "52.216.0.10", ""},
		{"an access point", "reports-123456789012.s3-accesspoint.us-west-2.amazonaws.com", "us-west-2", "52.218.0.10", ""},
		{"a VPC endpoint on its private address", "bucket.vpce-1a2b3c4d-5e6f.s3.us-east-1.vpce.amazonaws.com", "us-east-1", "10.0.1.20", ""},
		{"a FIPS endpoint", "s3-fips.us-gov-west-1.amazonaws.com", "us-gov-west-1", "52.222.0.10", ""},
		{"aws-cn's S3", "s3.cn-north-1.amazonaws.com.cn", "cn-north-1", "54.222.0.10", "s3.dualstack.cn-north-1.amazonaws.com.cn"},
		{"aws-us-gov's S3", "s3.us-gov-west-1.amazonaws.com", "us-gov-west-1", "52.222.0.11", "s3.dualstack.us-gov-west-1.amazonaws.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStandIn(t)
			st, err := Open(ctx, store.Source{URI: "s3://" + bucket + "/web/", Endpoint: "https://" + tc.endpoint, Region: tc.region,
				Credentials: keys, Retry: retry, Endpoints: policyVia(s, tc.addr)})
			if err != nil {
				t.Fatal(err)
			}
			body, err := st.Get(ctx, "shard.bin", 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(body)
			_ = body.Close()
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("read %q, %v; want %q", got, err, want)
			}
			reached := tc.reached
			if reached == "" {
				reached = tc.endpoint
			}
			if h := s.heard(); len(h) == 0 || h[0] != reached {
				t.Fatalf("the stand-in was asked for %v, want %s", h, reached)
			}
		})
	}
	// Each partition's STS: the web identity's exchange reaches it (the
	// stand-in's MinIO refuses the token, which is not the point).
	for _, tc := range []struct{ region, sts string }{
		{"eu-west-1", "sts.eu-west-1.amazonaws.com"}, {"cn-north-1", "sts.cn-north-1.amazonaws.com.cn"}, {"us-gov-west-1", "sts.us-gov-west-1.amazonaws.com"},
	} {
		t.Run("STS in "+tc.region, func(t *testing.T) {
			s := newStandIn(t)
			st, err := Open(ctx, store.Source{URI: "s3://" + bucket + "/web/", Region: tc.region, Retry: retry, Endpoints: policyVia(s, "52.94.0.10"),
				Identity: &store.Identity{RoleARN: "arn:aws:iam::123456789012:role/r", Token: func(context.Context) (string, error) { return "header.payload.signature", nil }}})
			if err == nil {
				_, err = st.Stat(ctx, "shard.bin")
			}
			var refused *store.HostError
			if errors.As(err, &refused) {
				t.Fatalf("the policy refused AWS STS: %v", err)
			}
			if h := s.heard(); len(h) == 0 || h[0] != tc.sts {
				t.Fatalf("the stand-in was asked for %v (%v), want %s first", h, err, tc.sts)
			}
		})
	}
}

// The hosts AWS's customers run under amazonaws.com get nothing, however
// they are named: the third security review's finding 1, with a listener
// that would answer as them (the stand-in holds a valid certificate for
// each, as API Gateway's own hosts do).
func TestIntegrationCustomerRunHostsGetNoCredential(t *testing.T) {
	ctx := context.Background()
	token := func(context.Context) (string, error) { return "header.payload.signature", nil }
	retry := store.Retry{MaxElapsed: time.Millisecond, RequestTimeout: 5 * time.Second}
	for _, tc := range []struct {
		name string
		src  store.Source
	}{
		{"a web identity's token to an API Gateway", store.Source{URI: "s3://data/web/", Endpoint: "https://abc123defg.execute-api.us-east-1.amazonaws.com",
			Identity: &store.Identity{RoleARN: "arn:aws:iam::123456789012:role/r", Token: token}}},
		{"S3 keys to an API Gateway", store.Source{URI: "s3://data/web/", Endpoint: "https://abc123defg.execute-api.us-east-1.amazonaws.com",
			Credentials: map[string][]byte{s3.AccessKeyFile: []byte("AKIA"), s3.SecretKeyFile: []byte("secret")}}},
		{"a SAS token to an API Gateway", store.Source{URI: "az://acct/c/web/", Endpoint: "https://abc123defg.execute-api.us-east-1.amazonaws.com",
			Credentials: map[string][]byte{"AZURE_STORAGE_SAS_TOKEN": []byte("sv=2022&sig=x")}}},
		{"a SAS token to an EC2 host over plain HTTP", store.Source{URI: "az://acct/c/web/", Endpoint: "http://ec2-203-0-113-5.compute-1.amazonaws.com", Insecure: true,
			Credentials: map[string][]byte{"AZURE_STORAGE_SAS_TOKEN": []byte("sv=2022&sig=x")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStandIn(t)
			src := tc.src
			src.Retry, src.Endpoints = retry, policyVia(s, "3.5.0.10")
			st, err := Open(ctx, src)
			if err == nil {
				_, err = st.Stat(ctx, "shard.bin")
			}
			var refused *store.HostError
			if !errors.As(err, &refused) || !strings.Contains(err.Error(), "amazonaws.com") {
				t.Fatalf("got %v, want the host refused", err)
			}
			if h := s.heard(); len(h) != 0 {
				t.Fatalf("the customer's host was asked %d times (%v)", len(h), h)
			}
		})
	}
}

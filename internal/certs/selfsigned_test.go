package certs

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestSelfSignedServesTLSThatVerifiesAgainstItself(t *testing.T) {
	cert, err := SelfSigned("shardfeed-sidecar", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Until(cert.Leaf.NotAfter); got > time.Hour || got < 59*time.Minute {
		t.Fatalf("valid for %s, want an hour", got)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()

	// A client that trusts the certificate itself reaches it by address.
	pool := x509.NewCertPool()
	pool.AddCert(cert.Leaf)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if string(body) != "ok" {
		t.Fatalf("body %q", body)
	}
	// Plain HTTP gets no metrics.
	plain := "http" + srv.URL[len("https"):]
	if resp, err := http.Get(plain); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("the TLS port answered plain HTTP with 200")
		}
	}
}

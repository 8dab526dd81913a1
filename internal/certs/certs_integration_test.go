//go:build integration

package certs_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"log"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shardfeed/shardfeed/internal/certs"
	"github.com/shardfeed/shardfeed/internal/testenv"
)

var apiServer *testenv.APIServer

func TestMain(m *testing.M) {
	var err error
	if apiServer, err = testenv.StartAPIServer(); err != nil {
		log.Fatal(err)
	}
	code := m.Run()
	if err := apiServer.Stop(); err != nil {
		log.Print(err)
	}
	os.Exit(code)
}

const dnsName = "shardfeed-webhook.shardfeed-system.svc"

func webhookConfiguration(t *testing.T, name string) {
	t.Helper()
	url := "https://127.0.0.1:1/mutate-v1-pod"
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "pods.shardfeed.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
			SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
			// Only objects with this label: the test's webhook serves nothing.
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"never": "matched"}},
		}},
	}
	if err := apiServer.Client.Create(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = apiServer.Client.Delete(context.Background(), cfg) })
}

// verify checks that the certificate in dir is valid for dnsName at now
// under the CAs of bundle.
func verify(t *testing.T, dir string, bundle []byte, now time.Time) *x509.Certificate {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "tls.crt"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		t.Fatal("tls.crt holds no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		t.Fatal("the caBundle holds no certificate")
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: dnsName, Roots: pool, CurrentTime: now}); err != nil {
		t.Fatalf("the serving certificate does not verify under the caBundle: %v", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "127.0.0.1", Roots: pool, CurrentTime: now}); err != nil {
		t.Fatalf("the serving certificate does not cover 127.0.0.1: %v", err)
	}
	return cert
}

func TestIntegrationKeeperMakesRenewsAndPublishesTheCertificate(t *testing.T) {
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	webhookConfiguration(t, "certs-test-"+ns)
	t0 := time.Now()
	now := t0
	k := &certs.Keeper{Client: apiServer.Client, Options: certs.Options{
		Namespace: ns, SecretName: "webhook-cert", DNSNames: []string{dnsName}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
		CertDir: t.TempDir(), MutatingWebhooks: []string{"certs-test-" + ns, "not-installed"},
		CAValidity: 90 * 24 * time.Hour, CertValidity: 9 * 24 * time.Hour, Now: func() time.Time { return now },
	}}
	state := func() (*corev1.Secret, []byte) {
		var s corev1.Secret
		if err := apiServer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "webhook-cert"}, &s); err != nil {
			t.Fatal(err)
		}
		var cfg admissionregistrationv1.MutatingWebhookConfiguration
		if err := apiServer.Client.Get(ctx, client.ObjectKey{Name: "certs-test-" + ns}, &cfg); err != nil {
			t.Fatal(err)
		}
		return &s, cfg.Webhooks[0].ClientConfig.CABundle
	}

	if err := k.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	secret, bundle := state()
	first := verify(t, k.CertDir, bundle, now)
	if !bytes.Equal(bundle, secret.Data["ca.crt"]) {
		t.Fatal("the caBundle is not the Secret's CA")
	}

	steps := []struct {
		name           string
		at             time.Duration
		spoil          map[string][]byte
		newCert, newCA bool
	}{
		{name: "a second call changes nothing", at: 0},
		{name: "a certificate with more than a third of its life left stays", at: 5 * 24 * time.Hour},
		{name: "a certificate with less than a third left is renewed", at: 7 * 24 * time.Hour, newCert: true},
		{name: "a CA with less than a third left is renewed, with its certificate", at: 70 * 24 * time.Hour, newCert: true, newCA: true},
		{name: "a spoiled certificate is replaced", at: 70 * 24 * time.Hour, spoil: map[string][]byte{"tls.crt": []byte("garbage")}, newCert: true},
		{name: "a key that does not match is replaced", at: 70 * 24 * time.Hour, spoil: map[string][]byte{"ca.key": nil}, newCert: true, newCA: true},
	}
	prev := first
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			now = t0.Add(st.at)
			before, beforeBundle := state()
			if st.spoil != nil {
				for key, v := range st.spoil {
					before.Data[key] = v
				}
				if err := apiServer.Client.Update(ctx, before); err != nil {
					t.Fatal(err)
				}
			}
			if err := k.Ensure(ctx); err != nil {
				t.Fatal(err)
			}
			after, bundle := state()
			cert := verify(t, k.CertDir, bundle, now)
			if gotNew := !cert.Equal(prev); gotNew != st.newCert {
				t.Errorf("new certificate: %v, want %v", gotNew, st.newCert)
			}
			if gotNew := !bytes.Equal(after.Data["ca.crt"], before.Data["ca.crt"]); gotNew != st.newCA {
				t.Errorf("new CA: %v, want %v", gotNew, st.newCA)
			}
			if st.newCA && st.spoil == nil && !bytes.Contains(bundle, beforeBundle) {
				t.Error("after a CA rotation the caBundle no longer trusts the old CA, which clients may still hold")
			}
			if !st.newCert && !st.newCA && after.ResourceVersion != before.ResourceVersion {
				t.Error("the Secret was written although nothing needed renewing")
			}
			prev = cert
		})
	}
}

func TestIntegrationKeepersRacingAgreeOnOneCertificate(t *testing.T) {
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	dirs := make([]string, 4)
	var wg sync.WaitGroup
	errs := make([]error, len(dirs))
	for i := range dirs {
		dirs[i] = t.TempDir()
		k := &certs.Keeper{Client: apiServer.Client, Options: certs.Options{
			Namespace: ns, SecretName: "webhook-cert", DNSNames: []string{dnsName}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, CertDir: dirs[i],
		}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = k.Ensure(ctx)
		}()
	}
	wg.Wait()
	var first []byte
	for i, dir := range dirs {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		got, err := os.ReadFile(filepath.Join(dir, "tls.crt"))
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = got
		} else if !bytes.Equal(got, first) {
			t.Fatalf("replica %d serves another certificate than replica 0", i)
		}
	}
}

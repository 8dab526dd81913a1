//go:build integration

package certs_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
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

	trust := 10 * time.Minute
	k.TrustDelay = trust
	steps := []struct {
		name           string
		at             time.Duration
		spoil          map[string][]byte
		newCert, newCA bool
		nextCA         bool // the bundle trusts a CA that does not sign yet
	}{
		{name: "a second call changes nothing", at: 0},
		{name: "a certificate with more than a third of its life left stays", at: 5 * 24 * time.Hour},
		{name: "a certificate with less than a third left is renewed", at: 7 * 24 * time.Hour, newCert: true},
		{name: "a CA with less than a third left gets a successor, trusted before it signs", at: 70 * 24 * time.Hour, newCert: true, nextCA: true},
		{name: "the successor does not sign before the trust delay", at: 70*24*time.Hour + trust/2, nextCA: true},
		{name: "after the trust delay the successor signs, and the old CA stays trusted", at: 70*24*time.Hour + trust, newCert: true, newCA: true},
		{name: "a spoiled certificate is replaced", at: 71 * 24 * time.Hour, spoil: map[string][]byte{"tls.crt": []byte("garbage")}, newCert: true},
		{name: "a key that does not match is replaced at once", at: 71 * 24 * time.Hour, spoil: map[string][]byte{"ca.key": nil}, newCert: true, newCA: true},
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
			if st.spoil == nil && !bytes.Contains(bundle, before.Data["ca.crt"]) {
				t.Error("the caBundle no longer trusts the CA of the last call, which clients may still hold")
			}
			if _, ok := after.Data["next-ca.crt"]; ok != st.nextCA {
				t.Errorf("a next CA in the Secret: %v, want %v", ok, st.nextCA)
			}
			if st.nextCA && (!bytes.Contains(bundle, after.Data["next-ca.crt"]) || !bytes.Contains(bundle, beforeBundle)) {
				t.Error("the caBundle does not trust both the signing CA and its successor")
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

// replica serves the certificate files of a keeper's CertDir over TLS, as
// the webhook server does (it reloads them when they change).
type replica struct {
	keeper *certs.Keeper
	addr   string
}

func startReplica(t *testing.T, ip net.IP, k *certs.Keeper) *replica {
	t.Helper()
	l, err := tls.Listen("tcp", net.JoinHostPort(ip.String(), "0"), &tls.Config{
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			c, err := tls.LoadX509KeyPair(filepath.Join(k.CertDir, "tls.crt"), filepath.Join(k.CertDir, "tls.key"))
			return &c, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				_ = c.(*tls.Conn).Handshake()
				_ = c.Close()
			}()
		}
	}()
	return &replica{keeper: k, addr: l.Addr().String()}
}

// nodeIP is an address of this machine that an EndpointSlice may hold
// (the API server refuses loopback addresses there).
func nodeIP(t *testing.T) net.IP {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.To4()
		}
	}
	t.Fatal("this machine has no non-loopback IPv4 address to serve the test's replicas on")
	return nil
}

// endpointSlice publishes addr as an endpoint of the Service, as the
// EndpointSlice controller does for a replica's pod.
func endpointSlice(t *testing.T, ns, service, name, addr string, ready bool) {
	t.Helper()
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		t.Fatal(err)
	}
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{host}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if err := apiServer.Client.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

// A CA rotation across replicas that renew at different times: at every
// moment, the API server (the caBundle) and the sidecars (the bundle the
// plan ConfigMaps carry) trust the certificate every replica serves.
func TestIntegrationACARotationNeverLeavesAReplicaUntrusted(t *testing.T) {
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	config := "certs-rotation-" + ns
	webhookConfiguration(t, config)
	ip := nodeIP(t)
	t0 := time.Now()
	var mu sync.Mutex
	now := t0
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	trust := 10 * time.Minute
	published := map[string][][]byte{} // replica → the bundles its OnChange saw
	replicas := make([]*replica, 2)
	for i, name := range []string{"a", "b"} {
		k := &certs.Keeper{Client: apiServer.Client, Options: certs.Options{
			Namespace: ns, SecretName: "webhook-cert", DNSNames: []string{dnsName}, CertDir: t.TempDir(),
			MutatingWebhooks: []string{config}, Service: "webhook",
			// Certificates outlive the test's jumps of the clock: a replica
			// that has not renewed yet still serves a valid one.
			CAValidity: 90 * 24 * time.Hour, CertValidity: 80 * 24 * time.Hour, TrustDelay: trust, Now: clock,
			OnChange: func(b []byte) { published[name] = append(published[name], b) },
		}}
		if err := k.Ensure(ctx); err != nil {
			t.Fatal(err)
		}
		replicas[i] = startReplica(t, ip, k)
		endpointSlice(t, ns, "webhook", "webhook-"+name, replicas[i].addr, true)
	}
	// A replica that is not ready gets no calls: it must not hold the
	// rotation up (nothing listens there).
	closed, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	endpointSlice(t, ns, "webhook", "webhook-starting", closed.Addr().String(), false)
	_ = closed.Close()

	secret := func() *corev1.Secret {
		var s corev1.Secret
		if err := apiServer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "webhook-cert"}, &s); err != nil {
			t.Fatal(err)
		}
		return &s
	}
	// trusted checks a TLS handshake with every replica under the bundle
	// the API server uses and under the one each keeper gives the sidecars.
	trusted := func(step string) []byte {
		t.Helper()
		var cfg admissionregistrationv1.MutatingWebhookConfiguration
		if err := apiServer.Client.Get(ctx, client.ObjectKey{Name: config}, &cfg); err != nil {
			t.Fatal(err)
		}
		bundles := map[string][]byte{"the caBundle": cfg.Webhooks[0].ClientConfig.CABundle}
		for i, r := range replicas {
			bundles[fmt.Sprintf("replica %d's bundle for the sidecars", i)] = r.keeper.CABundle()
		}
		for who, b := range bundles {
			roots := x509.NewCertPool()
			if !roots.AppendCertsFromPEM(b) {
				t.Fatalf("%s: %s holds no certificate", step, who)
			}
			for i, r := range replicas {
				c, err := tls.Dial("tcp", r.addr, &tls.Config{RootCAs: roots, ServerName: dnsName, Time: clock, MinVersion: tls.VersionTLS12})
				if err != nil {
					t.Fatalf("%s: replica %d is not trusted under %s: %v", step, i, who, err)
				}
				_ = c.Close()
			}
		}
		return bundles["the caBundle"]
	}
	ensure := func(i int, at time.Duration) {
		t.Helper()
		mu.Lock()
		now = t0.Add(at)
		mu.Unlock()
		if err := replicas[i].keeper.Ensure(ctx); err != nil {
			t.Fatal(err)
		}
	}

	start := secret().Data["ca.crt"]
	if b := trusted("installed"); !bytes.Equal(b, start) {
		t.Fatal("before any rotation the caBundle is not the one CA")
	}
	ageing := 61 * 24 * time.Hour
	ensure(0, ageing)
	next := secret().Data["next-ca.crt"]
	if next == nil {
		t.Fatal("an ageing CA got no successor")
	}
	trusted("replica 0 made the next CA")
	ensure(1, ageing)
	if b := trusted("replica 1 saw the next CA"); !bytes.Contains(b, next) || !bytes.Contains(b, start) {
		t.Fatal("replica 1 dropped the next CA or the current one from the caBundle")
	}
	rv := secret().ResourceVersion
	ensure(0, ageing+trust/2)
	if secret().ResourceVersion != rv {
		t.Fatal("the next CA signed before the trust delay")
	}
	ensure(0, ageing+trust)
	if !bytes.Equal(secret().Data["ca.crt"], next) || !bytes.Equal(secret().Data["previous-ca.crt"], start) {
		t.Fatal("after the trust delay the next CA does not sign, or the old one is not kept as previous")
	}
	trusted("replica 0 serves a certificate of the new CA, replica 1 one of the old")
	ensure(0, ageing+trust+time.Minute)
	if b := trusted("replica 0 checked again while replica 1 still serves the old CA's certificate"); !bytes.Contains(b, start) {
		t.Fatal("the old CA left the caBundle while replica 1 still serves a certificate it signed")
	}
	ensure(1, ageing+trust+2*time.Minute) // loads the new certificate
	trusted("replica 1 serves a certificate of the new CA")
	ensure(0, ageing+trust+3*time.Minute)
	if b := trusted("both replicas serve the new CA's certificate"); !bytes.Equal(b, next) {
		t.Fatal("the old CA is still trusted once every replica serves the new one")
	}
	if _, ok := secret().Data["previous-ca.crt"]; ok {
		t.Fatal("the previous CA is still in the Secret")
	}
	ensure(1, ageing+trust+4*time.Minute)
	trusted("replica 1 saw the previous CA go")
	for _, name := range []string{"a", "b"} {
		got := published[name]
		if len(got) == 0 || !bytes.Equal(got[len(got)-1], next) {
			t.Errorf("replica %s's OnChange did not see the final bundle (%d changes)", name, len(got))
		}
	}
}

// The node agent's certificate: signed by the webhook's CA, kept in a
// Secret of its own with the bundle, renewed when the CA that signs
// changes, and never written when nothing changed.
func TestIntegrationKeeperSignsTheLeavesWithItsCA(t *testing.T) {
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	const agentName = "shardfeed-node-agent." + "ns.svc"
	t0 := time.Now()
	now := t0
	k := &certs.Keeper{Client: apiServer.Client, Options: certs.Options{
		Namespace: ns, SecretName: "webhook-cert", DNSNames: []string{dnsName}, CertDir: t.TempDir(),
		CAValidity: 90 * 24 * time.Hour, CertValidity: 9 * 24 * time.Hour, TrustDelay: time.Minute, Now: func() time.Time { return now },
		Leaves: []certs.Leaf{{SecretName: "agent-cert", DNSNames: []string{agentName}}},
	}}
	leaf := func() (*corev1.Secret, *x509.Certificate) {
		t.Helper()
		var s corev1.Secret
		if err := apiServer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "agent-cert"}, &s); err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair(s.Data["tls.crt"], s.Data["tls.key"])
		if err != nil {
			t.Fatalf("the leaf's Secret holds no certificate and key: %v", err)
		}
		cert, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(k.CABundle()) {
			t.Fatal("no bundle")
		}
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: agentName, Roots: pool, CurrentTime: now}); err != nil {
			t.Fatalf("the leaf does not verify under the bundle for %s: %v", agentName, err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: dnsName, Roots: pool, CurrentTime: now}); err == nil {
			t.Fatal("the leaf is good for the webhook's name too")
		}
		if !bytes.Equal(s.Data["ca.crt"], k.CABundle()) {
			t.Fatal("the leaf's ca.crt is not the bundle")
		}
		return &s, cert
	}
	steps := []struct {
		name    string
		at      time.Duration
		newLeaf bool
		written bool
	}{
		{name: "the first call makes it", newLeaf: true, written: true},
		{name: "a second call writes nothing", at: time.Hour},
		{name: "ageing, it is renewed", at: 7 * 24 * time.Hour, newLeaf: true, written: true},
		{name: "a next CA enters the bundle: the leaf's ca.crt follows (the leaf has expired meanwhile)", at: 70 * 24 * time.Hour, newLeaf: true, written: true},
		{name: "the next CA signs: a new leaf", at: 70*24*time.Hour + time.Minute, newLeaf: true, written: true},
	}
	var prev *x509.Certificate
	var prevRV string
	for _, st := range steps {
		now = t0.Add(st.at)
		if err := k.Ensure(ctx); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		s, cert := leaf()
		if got := prev == nil || !cert.Equal(prev); got != st.newLeaf {
			t.Errorf("%s: new leaf %v, want %v", st.name, got, st.newLeaf)
		}
		if got := s.ResourceVersion != prevRV; got != st.written {
			t.Errorf("%s: written %v, want %v", st.name, got, st.written)
		}
		prev, prevRV = cert, s.ResourceVersion
	}
}

// Package certs keeps the webhook's serving certificate without manual
// steps: a CA and a serving certificate in a Secret of the operator's
// namespace, the files the webhook server reads, and the CA in the
// caBundle of the operator's webhook configurations. Every replica runs
// it; writes carry the Secret's resourceVersion, so two replicas rotating
// at once agree on one certificate.
//
// A CA is replaced in three steps, so that no client ever meets a
// certificate it does not trust: the next CA is trusted (bundle: current
// + next) for TrustDelay before it signs; then it signs, and the previous
// CA stays in the bundle until every ready endpoint of the webhook Service
// serves a certificate of the new one. The bundle is a function of the
// Secret alone, so no replica drops a CA another replica still needs.
package certs

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
	"fmt"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Keys of the Secret.
const (
	KeyCACert = "ca.crt"
	KeyCAKey  = "ca.key"
	KeyCert   = corev1.TLSCertKey       // tls.crt
	KeyKey    = corev1.TLSPrivateKeyKey // tls.key
	// The CA that will sign once clients trust it, and the CA that signed
	// before, trusted until no replica serves a certificate it signed.
	KeyNextCACert     = "next-ca.crt"
	KeyNextCAKey      = "next-ca.key"
	KeyPreviousCACert = "previous-ca.crt"
	// AnnotationNextCASince: when the next CA entered the bundle (RFC 3339).
	AnnotationNextCASince = "shardfeed.io/next-ca-since"
)

// Options say what to certify and where to put it.
type Options struct {
	// Namespace and SecretName: where the CA and the certificate live.
	Namespace, SecretName string
	// DNSNames and IPs the serving certificate covers (the webhook
	// Service's names: <service>.<namespace>.svc and .svc.cluster.local).
	DNSNames []string
	IPs      []net.IP
	// CertDir receives tls.crt and tls.key for the webhook server.
	CertDir string
	// MutatingWebhooks and ValidatingWebhooks are the configurations whose
	// caBundle is kept equal to the CA (missing ones are skipped: the
	// chart may not install all of them).
	MutatingWebhooks, ValidatingWebhooks []string
	// CAValidity and CertValidity; a certificate is renewed when a third
	// of its validity is left. Defaults: 10 years and 1 year.
	CAValidity, CertValidity time.Duration
	// Interval between checks when running as a manager Runnable (1 min:
	// three GETs; every replica, the leader writing the plans among them,
	// learns of a new CA within it).
	Interval time.Duration
	// TrustDelay: how long a next CA is in the bundle before it signs, so
	// that every replica has published it and the plan ConfigMaps the
	// sidecars read it from reach every node (10 min: the Interval, a
	// reconcile, and the kubelet's refresh of mounted ConfigMaps, about 2).
	TrustDelay time.Duration
	// Service is the webhook Service: the previous CA leaves the bundle
	// once each of its ready endpoints serves a certificate of the current
	// CA. Empty: the previous CA stays trusted until it expires (its key
	// is gone, so that only widens trust to certificates it already signed).
	Service string
	// OnChange is called with the new bundle when it changes after the
	// first Ensure (the plan ConfigMaps carry it to the sidecars).
	OnChange func(caBundle []byte)
	// Leaves are other servers' certificates the CA signs, each kept in a
	// Secret of its own (the node agent's: the sidecars verify it with the
	// same bundle as the progress endpoint).
	Leaves []Leaf
	// Now is the clock (tests move it).
	Now func() time.Time
}

// Leaf is a serving certificate for another server of the operator,
// kept in Secret SecretName of the Keeper's namespace as a TLS Secret
// (tls.crt, tls.key, and ca.crt: the bundle), covering DNSNames.
type Leaf struct {
	SecretName string
	DNSNames   []string
}

// Keeper keeps the certificate. Ensure once before the webhook server
// starts (it needs the files), then Start keeps it fresh.
type Keeper struct {
	// Client reads and writes the Secret and the webhook configurations
	// directly (not from a cache: the first Ensure runs before one).
	Client client.Client
	Options

	mu       sync.Mutex
	caBundle []byte
}

func (k *Keeper) defaults() {
	if k.CAValidity == 0 {
		k.CAValidity = 10 * 365 * 24 * time.Hour
	}
	if k.CertValidity == 0 {
		k.CertValidity = 365 * 24 * time.Hour
	}
	if k.Interval == 0 {
		k.Interval = time.Minute
	}
	if k.TrustDelay == 0 {
		k.TrustDelay = 10 * time.Minute
	}
	if k.Now == nil {
		k.Now = time.Now
	}
}

// NeedLeaderElection is false: every replica serves the webhook.
func (k *Keeper) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable: Ensure every Interval until ctx ends.
func (k *Keeper) Start(ctx context.Context) error {
	k.defaults()
	t := time.NewTicker(k.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := k.Ensure(ctx); err != nil {
				// The current certificate is still valid for a third of
				// its life: log and try again at the next tick.
				log.FromContext(ctx).Error(err, "Could not renew the webhook certificate; retrying", "secret", k.Namespace+"/"+k.SecretName)
			}
		}
	}
}

// Ensure makes the Secret hold a valid CA and serving certificate, writes
// the certificate to CertDir and the CA to the webhook configurations.
func (k *Keeper) Ensure(ctx context.Context) error {
	k.defaults()
	var bundle *bundle
	for range 5 {
		b, err := k.ensureSecret(ctx)
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			continue // another replica wrote first: use its certificate
		}
		if err != nil {
			return err
		}
		bundle = b
		break
	}
	if bundle == nil {
		return fmt.Errorf("secret %s/%s: too many conflicting writes", k.Namespace, k.SecretName)
	}
	if err := writeFiles(k.CertDir, bundle.certPEM, bundle.keyPEM); err != nil {
		return err
	}
	if err := k.injectCABundle(ctx, bundle.caBundle); err != nil {
		return err
	}
	for _, leaf := range k.Leaves {
		if err := k.ensureLeaf(ctx, leaf, bundle); err != nil {
			return err
		}
	}
	k.mu.Lock()
	old := k.caBundle
	k.caBundle = bundle.caBundle
	k.mu.Unlock()
	if old != nil && !bytes.Equal(old, bundle.caBundle) && k.OnChange != nil {
		k.OnChange(bundle.caBundle)
	}
	return nil
}

// CABundle is the CA bundle the serving certificate chains to (PEM), as of
// the last Ensure: what clients other than the API server (the sidecars)
// verify the webhook server with.
func (k *Keeper) CABundle() []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.caBundle
}

type bundle struct {
	certPEM, keyPEM, caBundle []byte
	// ca signs, with caKey.
	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
}

// ensureSecret reads the Secret and renews what is missing or ageing.
func (k *Keeper) ensureSecret(ctx context.Context) (*bundle, error) {
	var secret corev1.Secret
	err := k.Client.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: k.SecretName}, &secret)
	create := apierrors.IsNotFound(err)
	if err != nil && !create {
		return nil, fmt.Errorf("reading Secret %s/%s: %w", k.Namespace, k.SecretName, err)
	}
	logger := log.FromContext(ctx).WithValues("secret", k.Namespace+"/"+k.SecretName)
	now := k.Now()
	data := maps.Clone(secret.Data)
	if data == nil {
		data = map[string][]byte{}
	}
	annotations := maps.Clone(secret.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	changed := false
	note := func(msg, why string) {
		changed = true
		logger.Info(msg, "why", why)
	}

	ca, caKey, caErr := parsePair(data[KeyCACert], data[KeyCAKey])
	if caErr == nil && !now.Before(ca.NotAfter) {
		caErr = fmt.Errorf("it expired on %s", ca.NotAfter.Format(time.RFC3339))
	}
	next, nextKey, nextErr := parsePair(data[KeyNextCACert], data[KeyNextCAKey])
	since, sinceErr := time.Parse(time.RFC3339, annotations[AnnotationNextCASince])
	switch {
	case caErr != nil && nextErr == nil:
		// Nothing valid signs: the next CA, already trusted, takes over.
		ca, caKey = next, nextKey
		data[KeyCACert], data[KeyCAKey] = data[KeyNextCACert], data[KeyNextCAKey]
		clearNext(data, annotations)
		note("The next webhook CA signs from now on", "the current CA is not valid: "+caErr.Error())
	case caErr != nil:
		// Nothing to stage from: a new CA at once.
		if ca, caKey, err = k.newCA(now); err != nil {
			return nil, err
		}
		if data[KeyCACert], data[KeyCAKey], err = encodePair(ca, caKey); err != nil {
			return nil, err
		}
		clearNext(data, annotations)
		note("Made a new webhook CA", "no valid CA: "+caErr.Error())
	case !k.ageing(ca, now):
		if _, ok := data[KeyNextCACert]; ok {
			clearNext(data, annotations)
			note("Dropped a next webhook CA", "the current CA is not ageing")
		}
	case nextErr != nil || sinceErr != nil:
		// Trusted first, signing later: clients learn the new CA before
		// they meet a certificate it signed.
		if next, nextKey, err = k.newCA(now); err != nil {
			return nil, err
		}
		if data[KeyNextCACert], data[KeyNextCAKey], err = encodePair(next, nextKey); err != nil {
			return nil, err
		}
		annotations[AnnotationNextCASince] = now.UTC().Format(time.RFC3339)
		note("Made the next webhook CA; it signs once every client has had time to trust it",
			fmt.Sprintf("the CA expires on %s; trusted for %s first", ca.NotAfter.Format(time.RFC3339), k.TrustDelay))
	case now.Sub(since) >= k.TrustDelay:
		data[KeyPreviousCACert] = data[KeyCACert]
		data[KeyCACert], data[KeyCAKey] = data[KeyNextCACert], data[KeyNextCAKey]
		ca, caKey = next, nextKey
		clearNext(data, annotations)
		note("The next webhook CA signs from now on; the previous one stays trusted until every replica serves a certificate of the new one",
			fmt.Sprintf("trusted since %s", since.Format(time.RFC3339)))
	}

	cert, _, certErr := parsePair(data[KeyCert], data[KeyKey])
	why := ""
	switch {
	case certErr != nil:
		why = "no valid certificate: " + certErr.Error()
	case cert.CheckSignatureFrom(ca) != nil:
		why = "the certificate is not signed by the CA"
	case k.ageing(cert, now):
		why = fmt.Sprintf("the certificate expires on %s", cert.NotAfter.Format(time.RFC3339))
	case !k.covers(cert):
		why = fmt.Sprintf("the certificate covers %v %v, not %v %v", cert.DNSNames, cert.IPAddresses, k.DNSNames, k.IPs)
	}
	if why != "" {
		certPEM, keyPEM, err := k.issue(ca, caKey, now, k.DNSNames, k.IPs)
		if err != nil {
			return nil, err
		}
		data[KeyCert], data[KeyKey] = certPEM, keyPEM
		note("Made a new webhook serving certificate", why)
	}

	if prev, ok := data[KeyPreviousCACert]; ok {
		p, err := parseCert(prev)
		switch {
		case err != nil || !now.Before(p.NotAfter):
			delete(data, KeyPreviousCACert)
			note("Dropped the previous webhook CA", "it is expired or unreadable")
		case changed:
			// This replica has not loaded the new certificate yet.
		case k.Service == "":
			// No replicas to check: it stays until it expires.
		default:
			if err := k.everyReplicaServes(ctx, ca); err != nil {
				logger.Info("Still trusting the previous webhook CA", "why", err.Error())
			} else {
				delete(data, KeyPreviousCACert)
				note("Dropped the previous webhook CA", "every replica serves a certificate of the current CA")
			}
		}
	}

	if changed {
		secret.Data, secret.Annotations = data, annotations
		secret.Type = corev1.SecretTypeOpaque
		if create {
			secret.ObjectMeta = metav1.ObjectMeta{Name: k.SecretName, Namespace: k.Namespace, Annotations: annotations,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "shardfeed", "app.kubernetes.io/component": "webhook-certificate"}}
			err = k.Client.Create(ctx, &secret)
		} else {
			err = k.Client.Update(ctx, &secret) // carries the resourceVersion read
		}
		if err != nil {
			return nil, err
		}
	}
	// The bundle follows from the Secret alone: every replica publishes
	// the same one.
	caBundle := slices.Concat(data[KeyCACert], data[KeyNextCACert], data[KeyPreviousCACert])
	return &bundle{certPEM: data[KeyCert], keyPEM: data[KeyKey], caBundle: caBundle, ca: ca, caKey: caKey}, nil
}

// ensureLeaf makes leaf's Secret hold a certificate the signing CA signed
// that covers its names and is not ageing, and the current bundle. A
// conflict (another replica wrote first) is read again.
func (k *Keeper) ensureLeaf(ctx context.Context, leaf Leaf, b *bundle) error {
	for range 5 {
		err := k.writeLeaf(ctx, leaf, b)
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			continue
		}
		return err
	}
	return fmt.Errorf("secret %s/%s: too many conflicting writes", k.Namespace, leaf.SecretName)
}

func (k *Keeper) writeLeaf(ctx context.Context, leaf Leaf, b *bundle) error {
	var secret corev1.Secret
	err := k.Client.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: leaf.SecretName}, &secret)
	create := apierrors.IsNotFound(err)
	if err != nil && !create {
		return fmt.Errorf("reading Secret %s/%s: %w", k.Namespace, leaf.SecretName, err)
	}
	now := k.Now()
	data := maps.Clone(secret.Data)
	if data == nil {
		data = map[string][]byte{}
	}
	cert, _, certErr := parsePair(data[KeyCert], data[KeyKey])
	why := ""
	switch {
	case certErr != nil:
		why = "no valid certificate: " + certErr.Error()
	case cert.CheckSignatureFrom(b.ca) != nil:
		why = "the certificate is not signed by the signing CA"
	case k.ageing(cert, now):
		why = fmt.Sprintf("the certificate expires on %s", cert.NotAfter.Format(time.RFC3339))
	case !coversNames(cert, leaf.DNSNames):
		why = fmt.Sprintf("the certificate covers %v, not %v", cert.DNSNames, leaf.DNSNames)
	}
	changed := false
	if why != "" {
		certPEM, keyPEM, err := k.issue(b.ca, b.caKey, now, leaf.DNSNames, nil)
		if err != nil {
			return err
		}
		data[KeyCert], data[KeyKey], changed = certPEM, keyPEM, true
		log.FromContext(ctx).Info("Made a new serving certificate", "secret", k.Namespace+"/"+leaf.SecretName, "why", why)
	}
	if !bytes.Equal(data[KeyCACert], b.caBundle) {
		data[KeyCACert], changed = b.caBundle, true
	}
	if !changed {
		return nil
	}
	secret.Data = data
	if create {
		secret.ObjectMeta = metav1.ObjectMeta{Name: leaf.SecretName, Namespace: k.Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "shardfeed", "app.kubernetes.io/component": "serving-certificate"}}
		secret.Type = corev1.SecretTypeTLS
		return k.Client.Create(ctx, &secret)
	}
	return k.Client.Update(ctx, &secret) // carries the resourceVersion read
}

func coversNames(c *x509.Certificate, names []string) bool {
	for _, name := range names {
		if !slices.Contains(c.DNSNames, name) {
			return false
		}
	}
	return true
}

func clearNext(data map[string][]byte, annotations map[string]string) {
	delete(data, KeyNextCACert)
	delete(data, KeyNextCAKey)
	delete(annotations, AnnotationNextCASince)
}

// everyReplicaServes dials each ready endpoint of the webhook Service and
// checks that it presents a certificate of ca.
func (k *Keeper) everyReplicaServes(ctx context.Context, ca *x509.Certificate) error {
	var list discoveryv1.EndpointSliceList
	if err := k.Client.List(ctx, &list, client.InNamespace(k.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: k.Service}); err != nil {
		return fmt.Errorf("listing the endpoints of Service %s/%s: %w", k.Namespace, k.Service, err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	serverName := ""
	if len(k.DNSNames) > 0 {
		serverName = k.DNSNames[0]
	}
	dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second},
		Config: &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12, Time: k.Now}}
	for _, s := range list.Items {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue // the API server does not call it
			}
			for _, port := range s.Ports {
				if port.Port == nil {
					continue
				}
				for _, a := range ep.Addresses {
					addr := net.JoinHostPort(a, strconv.Itoa(int(*port.Port)))
					dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					conn, err := dialer.DialContext(dctx, "tcp", addr)
					cancel()
					if err != nil {
						return fmt.Errorf("the replica at %s does not serve a certificate of the current CA yet: %w", addr, err)
					}
					_ = conn.Close()
				}
			}
		}
	}
	return nil
}

func (k *Keeper) ageing(c *x509.Certificate, now time.Time) bool {
	life := c.NotAfter.Sub(c.NotBefore)
	return c.NotAfter.Sub(now) < life/3
}

func (k *Keeper) covers(c *x509.Certificate) bool {
	if !coversNames(c, k.DNSNames) {
		return false
	}
	for _, ip := range k.IPs {
		if !slices.ContainsFunc(c.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

func (k *Keeper) newCA(now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: "shardfeed-webhook-ca", Organization: []string{"shardfeed"}},
		NotBefore:             now.Add(-time.Hour), // clock skew between nodes
		NotAfter:              now.Add(k.CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("making the webhook CA: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, err
}

// issue makes a serving certificate for names and ips that ca signs.
func (k *Keeper) issue(ca *x509.Certificate, caKey *ecdsa.PrivateKey, now time.Time, names []string, ips []net.IP) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	cn := "shardfeed-webhook"
	if len(names) > 0 {
		cn = names[0]
	}
	notAfter := now.Add(k.CertValidity)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"shardfeed"}},
		DNSNames:     names,
		IPAddresses:  ips,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("making the serving certificate of %v: %w", names, err)
	}
	if keyPEM, err = encodeKey(key); err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// injectCABundle sets caBundle on every webhook of the configurations.
func (k *Keeper) injectCABundle(ctx context.Context, caBundle []byte) error {
	type target struct {
		kind    string
		obj     client.Object
		configs func() []*admissionregistrationv1.WebhookClientConfig
	}
	var targets []target
	for _, name := range k.MutatingWebhooks {
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
		targets = append(targets, target{"MutatingWebhookConfiguration", cfg, func() (out []*admissionregistrationv1.WebhookClientConfig) {
			for i := range cfg.Webhooks {
				out = append(out, &cfg.Webhooks[i].ClientConfig)
			}
			return out
		}})
	}
	for _, name := range k.ValidatingWebhooks {
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
		targets = append(targets, target{"ValidatingWebhookConfiguration", cfg, func() (out []*admissionregistrationv1.WebhookClientConfig) {
			for i := range cfg.Webhooks {
				out = append(out, &cfg.Webhooks[i].ClientConfig)
			}
			return out
		}})
	}
	for _, t := range targets {
		kind := t.kind
		if err := k.Client.Get(ctx, client.ObjectKeyFromObject(t.obj), t.obj); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return fmt.Errorf("reading %s %s: %w", kind, t.obj.GetName(), err)
		}
		changed := false
		for _, c := range t.configs() {
			if !bytes.Equal(c.CABundle, caBundle) {
				c.CABundle, changed = caBundle, true
			}
		}
		if !changed {
			continue
		}
		if err := k.Client.Update(ctx, t.obj); err != nil {
			return fmt.Errorf("setting the caBundle of %s %s: %w", kind, t.obj.GetName(), err)
		}
	}
	return nil
}

// writeFiles replaces tls.crt and tls.key in dir when they differ; the
// webhook server's certificate watcher reloads them.
func writeFiles(dir string, certPEM, keyPEM []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("webhook certificate directory: %w", err)
	}
	// The key first: a watcher that sees a new certificate must find its key.
	for _, f := range []struct {
		name string
		data []byte
	}{{KeyKey, keyPEM}, {KeyCert, certPEM}} {
		path := filepath.Join(dir, f.name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, f.data) {
			continue
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, f.data, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		if err := os.Rename(tmp, path); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return nil
}

func parseCert(certPEM []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

// parsePair reads a certificate and its key, and checks that they match.
func parsePair(certPEM, keyPEM []byte) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cert, err := parseCert(certPEM)
	if err != nil {
		return nil, nil, err
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, nil, errors.New("no PEM key")
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || !pub.Equal(key.Public()) {
		return nil, nil, errors.New("the key does not match the certificate")
	}
	return cert, key, nil
}

func encodeCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func encodePair(c *x509.Certificate, k *ecdsa.PrivateKey) (certPEM, keyPEM []byte, err error) {
	keyPEM, err = encodeKey(k)
	return encodeCert(c), keyPEM, err
}

func encodeKey(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

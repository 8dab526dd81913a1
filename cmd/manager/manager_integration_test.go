//go:build integration

package main_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/inject"
	"github.com/shardfeed/shardfeed/internal/jobkind"
	"github.com/shardfeed/shardfeed/internal/testenv"
)

var (
	apiServer *testenv.APIServer
	binary    string
	// cli is the shardfeed command, whose serve is a sidecar.
	cli string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shardfeed-manager-")
	if err != nil {
		log.Fatal(err)
	}
	binary = filepath.Join(dir, "manager")
	root, err := testenv.RepoRoot()
	if err != nil {
		log.Fatal(err)
	}
	cli = filepath.Join(dir, "shardfeed")
	for out, pkg := range map[string]string{binary: "./cmd/manager", cli: "./cmd/shardfeed"} {
		build := exec.Command("go", "build", "-o", out, pkg)
		build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			log.Fatalf("building %s: %v", pkg, err)
		}
	}
	if apiServer, err = testenv.StartAPIServer(); err != nil {
		log.Fatal(err)
	}
	code := m.Run()
	_ = apiServer.Stop()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// installWebhooks creates the chart's two webhook configurations for a
// manager on port, removed at the test's end.
func installWebhooks(t *testing.T, port int, operatorNS string) {
	t.Helper()
	for _, obj := range webhookConfigurations(port, operatorNS) {
		if err := apiServer.Client.Create(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = apiServer.Client.Delete(context.Background(), obj) })
	}
}

// webhookConfigurations are the chart's two configurations, reaching the
// manager by URL (this API server has no Service network) and without a
// caBundle: the manager fills it in.
func webhookConfigurations(port int, operatorNS string) []client.Object {
	url := func(path string) *string { s := fmt.Sprintf("https://127.0.0.1:%d%s", port, path); return &s }
	notOperator := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{operatorNS}}}}
	return []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "shardfeed-pod-injection"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{
				Name: "pods.shardfeed.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: url("/mutate-v1-pod")},
				Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
				ObjectSelector:    &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: inject.LabelDataset, Operator: metav1.LabelSelectorOpExists}}},
				NamespaceSelector: notOperator, FailurePolicy: ptr.To(admissionregistrationv1.Fail),
				SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun), AdmissionReviewVersions: []string{"v1"},
				ReinvocationPolicy: ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy),
			}},
		},
		&admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "shardfeed-validation"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name: "trainingdatasets.shardfeed.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: url("/validate-data-shardfeed-io-v1alpha1-trainingdataset")},
				Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{"data.shardfeed.io"}, APIVersions: []string{"v1alpha1"}, Resources: []string{"trainingdatasets"}}}},
				FailurePolicy: ptr.To(admissionregistrationv1.Fail), SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1"},
			}},
		},
	}
}

// A leader that stops (an upgrade's rollout) releases its lease as it
// ends: its successor takes over at once, without waiting the lease out.
func TestIntegrationAStoppedLeaderReleasesItsLease(t *testing.T) {
	ctx := context.Background()
	operatorNS := "shardfeed-lease"
	if err := apiServer.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNS}}); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	installWebhooks(t, port, operatorNS)
	m := startManagerProcess(t, operatorNS, port, "--leader-elect")
	key := client.ObjectKey{Namespace: operatorNS, Name: "shardfeed-manager.shardfeed.io"}
	var lease coordinationv1.Lease
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		err := apiServer.Client.Get(ctx, key, &lease)
		if err == nil && ptr.Deref(lease.Spec.HolderIdentity, "") != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the manager holds no lease after 60 s (%v)", err)
		}
	}
	holder := *lease.Spec.HolderIdentity
	if err := m.stop(); err != nil {
		t.Fatalf("the manager did not end cleanly on SIGTERM: %v", err)
	}
	if err := apiServer.Client.Get(ctx, key, &lease); err != nil {
		t.Fatal(err)
	}
	if h := ptr.Deref(lease.Spec.HolderIdentity, ""); h != "" {
		t.Fatalf("the stopped manager's lease is still held by %q (was %q): its successor waits %ds for it", h, holder,
			ptr.Deref(lease.Spec.LeaseDurationSeconds, 0))
	}
}

// The manager binary, on a real API server: it makes its certificate,
// publishes the CA in both webhook configurations, and the API server then
// calls its webhooks over TLS.
func TestIntegrationManagerServesItsWebhooksWithItsOwnCertificate(t *testing.T) {
	ctx := context.Background()
	c := apiServer.Client
	operatorNS := "shardfeed-system"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNS}}); err != nil {
		t.Fatal(err)
	}
	port, metrics := freePort(t), freePort(t)
	installWebhooks(t, port, operatorNS)
	cmd := startManagerProcess(t, operatorNS, port, fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metrics))

	// The CA is published and the certificate stored.
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	if err := c.Get(ctx, client.ObjectKey{Name: "shardfeed-pod-injection"}, &mwc); err != nil || len(mwc.Webhooks[0].ClientConfig.CABundle) == 0 {
		t.Fatalf("the pod webhook has no caBundle (%v)", err)
	}
	var secret corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: "shardfeed-webhook-cert"}, &secret); err != nil || len(secret.Data["tls.crt"]) == 0 {
		t.Fatalf("no certificate Secret (%v)", err)
	}

	// The API server calls the validating webhook over TLS.
	ns := apiServer.Namespace(t)
	bad := &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: ns}, Spec: datav1alpha1.TrainingDatasetSpec{
		Streams: []datav1alpha1.Stream{{Name: "a", Source: datav1alpha1.Source{URI: "s3://data/a/"}}}, NumSplits: 2, GlobalBatchSize: 8,
		Sidecar: datav1alpha1.SidecarSpec{Image: "Not/A/Reference"}}}
	if err := c.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), "spec.sidecar.image") {
		t.Fatalf("got %v, want the validating webhook's rejection", err)
	}
	ds := bad.DeepCopy()
	ds.Name, ds.Spec.Sidecar.Image = "web", ""
	ds.Spec.Streams[0].Source.CredentialsSecretRef = &datav1alpha1.SecretReference{Name: "s3"}
	if err := c.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}

	// ... and the pod webhook: an Indexed Job's pod gets the sidecar.
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns}, Spec: batchv1.JobSpec{
		Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2), CompletionMode: ptr.To(batchv1.IndexedCompletion),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer", Image: "pytorch"}}, RestartPolicy: corev1.RestartPolicyNever}}}}
	if err := c.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	pod := func(ns string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "train-0-", Namespace: ns,
				Labels:          map[string]string{inject.LabelDataset: "web"},
				Annotations:     map[string]string{jobkind.JobCompletionIndex: "0"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer", Image: "pytorch"}}, RestartPolicy: corev1.RestartPolicyNever},
		}
	}
	p := pod(ns)
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	if !inject.Injected(p) || p.Spec.InitContainers[0].Image != "registry.local/shardfeed:e2e" {
		t.Fatalf("the pod was not injected with the manager's sidecar image: %+v", p.Spec.InitContainers)
	}
	// Finding 1: only the operator picks the image of a container that
	// gets the dataset's credentials. A dataset naming another image is
	// refused, naming the policy; a state ConfigMap written by someone
	// else than the operator, pinning such an image for a job, does not
	// change what its pods run.
	evil := ds.DeepCopy()
	evil.ResourceVersion, evil.UID, evil.Name, evil.Spec.Sidecar.Image = "", "", "evil", "evil.example/steal:1"
	if err := c.Create(ctx, evil); err == nil || !strings.Contains(err.Error(), "not an image the platform team allows") {
		t.Fatalf("a dataset naming sidecar image evil.example/steal:1: %v, want the policy's refusal", err)
	}
	forged, _ := configmaps.StateData(&configmaps.State{Dataset: "web", Job: "forged", SidecarImage: "evil.example/steal:1"})
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: configmaps.StateName("web", "forged"), Namespace: ns,
		Labels: configmaps.JobLabels("web", "forged"), OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, datav1alpha1.GroupVersion.WithKind("TrainingDataset"))}},
		Data: forged}); err != nil {
		t.Fatal(err)
	}
	fp := pod(ns)
	fp.Annotations[inject.AnnotationJob] = "forged"
	if err := c.Create(ctx, fp); err != nil {
		t.Fatal(err)
	}
	if !inject.Injected(fp) {
		t.Fatal("the pod of job forged was not injected")
	}
	if img := fp.Spec.InitContainers[0].Image; img != "registry.local/shardfeed:e2e" {
		t.Fatalf("a pod of a job whose state someone else pinned to evil.example/steal:1 runs sidecar %s", img)
	}

	// Never in the operator's namespace.
	own := pod(operatorNS)
	own.OwnerReferences = nil
	if err := c.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	if inject.Injected(own) {
		t.Fatal("a pod in the operator's namespace was injected")
	}

	// HTTP/2 is off on the webhook and metrics servers (finding 8): a
	// client offering h2 first gets HTTP/1.1.
	for what, addr := range map[string]string{"webhook": fmt.Sprintf("127.0.0.1:%d", port), "metrics": fmt.Sprintf("127.0.0.1:%d", metrics)} {
		var conn *tls.Conn
		var err error
		// The metrics server starts beside the webhooks, maybe a moment later.
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			conn, err = tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}) //nolint:gosec // only the protocol is checked
			if err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if p := conn.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
			t.Errorf("the %s server negotiated %q with a client offering h2: want http/1.1 (HTTP/2 off)", what, p)
		}
		_ = conn.Close()
	}

	// Metrics: over TLS, only to a token allowed to get /metrics.
	checkMetrics(t, operatorNS, fmt.Sprintf("https://127.0.0.1:%d/metrics", metrics))

	// SIGTERM stops it cleanly.
	if err := cmd.stop(); err != nil {
		t.Errorf("the manager exited with %v after SIGTERM", err)
	}
}

// managerProcess is a running manager binary.
type managerProcess struct {
	*exec.Cmd
	logs    string
	stopped bool
}

// stop sends SIGTERM and waits.
func (m *managerProcess) stop() error {
	if err := m.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	m.stopped = true
	return m.Wait()
}

// log returns what the manager logged so far.
func (m *managerProcess) log() string {
	b, _ := os.ReadFile(m.logs)
	return string(b)
}

// startManagerProcess runs the manager binary with its webhooks on
// webhookPort (a certificate of its own) and extra flags, and waits until
// it is ready. It is killed at the test's end, its log shown if it failed.
func startManagerProcess(t *testing.T, operatorNS string, webhookPort int, extra ...string) *managerProcess {
	t.Helper()
	probes := freePort(t)
	args := append([]string{"--namespace=" + operatorNS, "--cert-mode=self", "--webhook-hosts=127.0.0.1",
		fmt.Sprintf("--webhook-port=%d", webhookPort), "--cert-dir=" + t.TempDir(), "--metrics-bind-address=0",
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probes), "--sidecar-image=registry.local/shardfeed:e2e"}, extra...)
	m := &managerProcess{Cmd: exec.Command(binary, args...), logs: filepath.Join(t.TempDir(), "manager.log")}
	m.Env = append(os.Environ(), "KUBECONFIG="+apiServer.Kubeconfig(t))
	logs, err := os.Create(m.logs)
	if err != nil {
		t.Fatal(err)
	}
	m.Stdout, m.Stderr = logs, logs
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !m.stopped {
			_ = m.Process.Kill()
			_ = m.Wait()
		}
		_ = logs.Close()
		if t.Failed() {
			t.Logf("manager log:\n%s", m.log())
		}
	})
	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", probes)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get(ready) //nolint:gosec,noctx // a local probe
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the manager is not ready after 60 s: %v", err)
		}
	}
}

// checkMetrics reads the manager's metrics at url: refused without a token
// (401) and with the token of a ServiceAccount that may not get /metrics
// (403), served to one bound to the metrics-reader ClusterRole.
func checkMetrics(t *testing.T, ns, url string) {
	t.Helper()
	ctx := context.Background()
	c := apiServer.Client
	reader := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "shardfeed-test-metrics-reader"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	if err := c.Create(ctx, reader); err != nil {
		t.Fatal(err)
	}
	token := func(name string) string {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		if err := c.Create(ctx, sa); err != nil {
			t.Fatal(err)
		}
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
		if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	allowed, other := token("prometheus"), token("someone")
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "shardfeed-test-metrics-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: reader.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus", Namespace: ns}}}
	if err := c.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the manager's certificate is self-signed
	get := func(token string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get(""); code != http.StatusUnauthorized {
		t.Errorf("metrics without a token: %d, want 401", code)
	}
	if code, _ := get(other); code != http.StatusForbidden {
		t.Errorf("metrics with a token that may not get /metrics: %d, want 403", code)
	}
	// RBAC takes a moment to see the new binding.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		code, body := get(allowed)
		if code == http.StatusOK && strings.Contains(body, "controller_runtime_") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics with the reader's token: %d %.200s", code, body)
		}
	}
	// Plain HTTP to the TLS port gets no metrics.
	if resp, err := http.Get(strings.Replace(url, "https://", "http://", 1)); err == nil { //nolint:gosec,noctx // a local check
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if strings.Contains(string(body), "controller_runtime_") {
			t.Errorf("metrics served over plain HTTP (%d)", resp.StatusCode)
		}
	}
}

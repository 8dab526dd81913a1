//go:build integration

package main_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
	"github.com/shardfeed/shardfeed/internal/certs"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/inject"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/sampledata"
)

// metricName matches the metrics the dashboard and the alerts read: ours,
// controller-runtime's and the process collector's.
var metricName = regexp.MustCompile(`\b(?:shardfeed|controller_runtime|workqueue|process)_[a-z0-9_]+\b`)

// referencedMetrics is every metric the chart's dashboard and alert rules
// name, with the files that name it.
func referencedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string][]string{}
	add := func(file, expr string) {
		for _, n := range metricName.FindAllString(expr, -1) {
			if !slices.Contains(names[n], file) {
				names[n] = append(names[n], file)
			}
		}
	}
	raw, err := os.ReadFile(filepath.Join(root, "charts/shardfeed/files/dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			add("dashboard.json", tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		add("dashboard.json", v.Definition)
	}
	raw, err = os.ReadFile(filepath.Join(root, "charts/shardfeed/files/alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			add("alerts.yaml", r.Expr)
		}
	}
	if len(names) < 20 {
		t.Fatalf("only %d metrics named by the dashboard and the alerts: is the extraction broken? %v", len(names), names)
	}
	return names
}

// scrape reads a Prometheus text exposition into its family names.
// agentCertificate writes a certificate and key for the node agent to dir.
func agentCertificate(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	pair, err := certs.SelfSigned("shardfeed-node-agent.shardfeed-system.svc", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(pair.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: pair.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func scrape(t *testing.T, url string) map[string]bool {
	t.Helper()
	var body []byte
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get(url) //nolint:gosec,noctx // a local scrape
		if err == nil {
			body, err = io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("scraping %s: %v", url, err)
		}
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("%s is not a Prometheus exposition: %v", url, err)
	}
	out := map[string]bool{}
	for name, f := range families {
		if len(f.GetMetric()) > 0 {
			out[name] = true
		}
	}
	return out
}

// TestIntegrationEveryMetricTheDashboardAndAlertsNameIsInARealScrape runs
// the manager binary with a Ready dataset, a job with committed progress
// and an admitted pod, and a sidecar (shardfeed serve) that served a batch,
// took a commit and a report of waits; every metric the chart's dashboard
// and alerts read must be in one of their scrapes, with a sample.
func TestIntegrationEveryMetricTheDashboardAndAlertsNameIsInARealScrape(t *testing.T) {
	ctx := context.Background()
	c := apiServer.Client
	names := referencedMetrics(t)

	// The manager, with a Ready dataset on MinIO.
	operatorNS := "shardfeed-monitoring"
	mio := operatorWithMinIO(t, operatorNS)
	port, metricsPort := freePort(t), freePort(t)
	installWebhooks(t, port, operatorNS)
	startManagerProcess(t, operatorNS, port, fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort), "--metrics-secure=false",
		"--allowed-endpoints="+mio.Endpoint)
	ns := apiServer.Namespace(t)
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "minio", Namespace: ns},
		Data: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte(mio.AccessKey), "AWS_SECRET_ACCESS_KEY": []byte(mio.SecretKey)}}); err != nil {
		t.Fatal(err)
	}
	bucket, dir := mdsInMinIO(t, mio)
	ds := &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: "feed", Namespace: ns}, Spec: datav1alpha1.TrainingDatasetSpec{
		Streams: []datav1alpha1.Stream{{Name: "m", Source: datav1alpha1.Source{URI: "s3://" + bucket + "/m/", Endpoint: mio.URL(), Insecure: true,
			Region: "us-east-1", CredentialsSecretRef: &datav1alpha1.SecretReference{Name: "minio"}}}},
		NumSplits: 2, GlobalBatchSize: 8}}
	if err := c.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	// A job with committed progress and a skipped shard, as its sidecars
	// record it in its state ConfigMap.
	committed := time.Now().UTC().Truncate(time.Second)
	state, err := configmaps.StateData(&configmaps.State{Dataset: "feed", Job: "train", Epoch: 1, Step: 3, Committed: &committed, Pods: 2,
		SkippedShards: 1, SkippedSamples: 64})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: configmaps.StateName("feed", "train"), Namespace: ns,
		Labels: configmaps.JobLabels("feed", "train"), OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, datav1alpha1.GroupVersion.WithKind("TrainingDataset"))}},
		Data: state}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(ds), ds); err != nil {
			t.Fatal(err)
		}
		if meta.IsStatusConditionTrue(ds.Status.Conditions, datav1alpha1.ConditionReady) && len(ds.Status.Jobs) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dataset is not Ready with one job after 30 s: %+v", ds.Status)
		}
	}
	// A dataset the operator indexes (spec.index) over a prefix with no
	// index: its listing Job is created (no Job controller runs it here),
	// and status.indexing has the stream the indexing gauges report.
	indexing := &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: "indexing", Namespace: ns}, Spec: datav1alpha1.TrainingDatasetSpec{
		Streams: []datav1alpha1.Stream{{Name: "j", Format: datav1alpha1.FormatJSONL, Source: datav1alpha1.Source{URI: "s3://" + bucket + "/none/", Endpoint: mio.URL(),
			Insecure: true, Region: "us-east-1", CredentialsSecretRef: &datav1alpha1.SecretReference{Name: "minio"}}}},
		Index:     &datav1alpha1.IndexJob{WriteCredentialsSecretRef: datav1alpha1.SecretReference{Name: "minio"}},
		NumSplits: 2, GlobalBatchSize: 8}}
	if err := c.Create(ctx, indexing); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(indexing), indexing); err != nil {
			t.Fatal(err)
		}
		if len(indexing.Status.Indexing) == 1 && indexing.Status.Indexed == "0/1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dataset indexed by the operator shows no indexing after 30 s: %+v", indexing.Status)
		}
	}

	// An admission of a labelled pod (of no Job: a job of its own).
	_ = c.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "lonely", Namespace: ns, Labels: map[string]string{inject.LabelDataset: "feed"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer", Image: "pytorch"}}}})

	// A sidecar: shardfeed serve on the same data, read, committed to and
	// told of a trainer's waits.
	work := t.TempDir()
	manifest := filepath.Join(work, "dataset.yaml")
	if err := os.WriteFile(manifest, []byte(sampledata.Manifest("feed", []sampledata.Stream{{Name: "m", Format: "mds", URI: "file://" + dir + "/"}},
		"  numSplits: 2\n  globalBatchSize: 8\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	sidecarMetrics := freePort(t)
	socket := filepath.Join(work, "feed.sock")
	serve := exec.Command(cli, "serve", "-f", manifest, "--socket", socket, "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", sidecarMetrics))
	serve.Dir = work
	logs, _ := os.Create(filepath.Join(work, "serve.log"))
	serve.Stdout, serve.Stderr = logs, logs
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = serve.Process.Kill()
		_ = serve.Wait()
		if t.Failed() {
			out, _ := os.ReadFile(filepath.Join(work, "serve.log"))
			t.Logf("serve log:\n%s", out)
		}
	})
	sock := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := sock.Get("http://sidecar/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("shardfeed serve is not ready after 30 s: %v", err)
		}
	}
	for _, r := range []struct{ method, path, body string }{
		{http.MethodGet, "/v1/batches?rank=0&world=1", ""},
		{http.MethodPost, "/v1/commit", `{"epoch": 0, "step": 2}`},
		{http.MethodPost, "/v1/commit", `{"epoch": 0, "step": 1}`}, // refused: behind
	} {
		req, _ := http.NewRequestWithContext(ctx, r.method, "http://sidecar"+r.path, strings.NewReader(r.body))
		resp, err := sock.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", r.method, r.path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}

	// The trainer's waits, as the Go client reports them.
	if err := shardfeed.New(socket).ReportWaits(ctx, 0, []float64{0.001, 0.2}); err != nil {
		t.Fatalf("reporting waits: %v", err)
	}

	// A node agent (the chart's nodeCache), reviewing tokens with the
	// same API server.
	agentMetrics := freePort(t)
	certFile, keyFile := agentCertificate(t, work)
	agent := exec.Command(cli, "agent", "--kubeconfig", apiServer.Kubeconfig(t), "--cache-dir", filepath.Join(work, "node-cache"),
		"--listen", fmt.Sprintf("127.0.0.1:%d", freePort(t)), "--tls-cert-file", certFile, "--tls-key-file", keyFile,
		// The names are what matter here; the secure port is the e2e's.
		"--metrics-addr", fmt.Sprintf("127.0.0.1:%d", agentMetrics), "--metrics-secure=false", "--node", "node-a",
		"--allowed-endpoints", mio.Endpoint)
	agentLogs, _ := os.Create(filepath.Join(work, "agent.log"))
	agent.Stdout, agent.Stderr = agentLogs, agentLogs
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = agent.Process.Kill()
		_ = agent.Wait()
		if t.Failed() {
			out, _ := os.ReadFile(filepath.Join(work, "agent.log"))
			t.Logf("agent log:\n%s", out)
		}
	})

	scrapes := map[string]map[string]bool{
		"manager": scrape(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)),
		"sidecar": scrape(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", sidecarMetrics)),
		"agent":   scrape(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", agentMetrics)),
	}
	scraped := func(name string) bool {
		for _, m := range scrapes {
			if m[name] {
				return true
			}
		}
		return false
	}
	for name, files := range names {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && scraped(b) {
				base = b
			}
		}
		if !scraped(base) {
			t.Errorf("%s names %s, which neither the manager's, the sidecar's nor the node agent's scrape has", strings.Join(files, " and "), name)
		}
	}
	t.Logf("%d metrics named by the dashboard and the alerts, all scraped", len(names))
}

//go:build integration

package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/internal/workloadidentity"
	"github.com/shardfeed/shardfeed/sidecar/sampledata"
)

const leakedSecret = "db_password=hunter2"

// hostileEndpoint answers as a dataset author's endpoint may: bucket
// "endless" sends an index.json that never ends, "tarpit" one byte a
// second, "leaky" a 400 whose body holds a secret of the endpoint's
// network. It counts the bytes it sent.
func hostileEndpoint(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bucket, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
		switch bucket {
		case "leaky":
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte("internal-admin: " + leakedSecret))
			return
		case "endless":
			w.Header().Set("Content-Length", strconv.FormatInt(1<<40, 10))
		case "tarpit":
			w.Header().Set("Content-Length", "100000")
		}
		if r.Method == http.MethodHead {
			return
		}
		w.WriteHeader(http.StatusOK)
		chunk := []byte(strings.Repeat(`{"name":"s","samples":1,"bytes":1,"hash":"xxh64:00"},`, 64))
		for r.Context().Err() == nil && sent.Load() < 4<<30 { // at most 4 GiB, should the cap fail
			if bucket == "tarpit" {
				chunk = []byte("{")
			}
			n, err := w.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
			if bucket == "tarpit" {
				w.(http.Flusher).Flush()
				time.Sleep(time.Second)
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &sent
}

// TestIntegrationAHostileStoreNeitherStarvesTheManagerNorLeaksIntoStatus is
// finding 2 and 4 of the hardening issue, on the manager binary: an
// endless index, a 1 byte/s tarpit and a response body holding a secret,
// with a good dataset reconciled meanwhile; and sources the platform has
// not allowed refused at apply time.
func TestIntegrationAHostileStoreNeitherStarvesTheManagerNorLeaksIntoStatus(t *testing.T) {
	ctx := context.Background()
	c := apiServer.Client
	operatorNS := "shardfeed-hostile"
	mio := operatorWithMinIO(t, operatorNS)
	hostile, sent := hostileEndpoint(t)
	port := freePort(t)
	installWebhooks(t, port, operatorNS)
	mgr := startManagerProcess(t, operatorNS, port, "--max-index-bytes=16Mi", "--store-request-timeout=3s", "--index-read-timeout=8s",
		"--allowed-endpoints="+strings.TrimPrefix(hostile.URL, "http://")+","+mio.Endpoint)

	ns := apiServer.Namespace(t)
	for name, creds := range map[string][2]string{"dummy": {"key", "secret"}, "minio": {mio.AccessKey, mio.SecretKey}} {
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Data: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte(creds[0]), "AWS_SECRET_ACCESS_KEY": []byte(creds[1])}}); err != nil {
			t.Fatal(err)
		}
	}
	dataset := func(name, uri, endpoint, secret string) *datav1alpha1.TrainingDataset {
		src := datav1alpha1.Source{URI: uri, Endpoint: endpoint, Insecure: endpoint != ""}
		if strings.HasPrefix(uri, "s3://") {
			src.Region = "us-east-1"
		}
		if secret != "" {
			src.CredentialsSecretRef = &datav1alpha1.SecretReference{Name: secret}
		}
		return &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: datav1alpha1.TrainingDatasetSpec{Streams: []datav1alpha1.Stream{{Name: "s", Source: src}}, NumSplits: 2, GlobalBatchSize: 8}}
	}

	// Refused at apply time, naming the rule and the fix.
	catalog := dataset("catalog", "s3://data/.shardfeed/t/", mio.URL(), "dummy")
	catalog.Spec.Streams[0].Format = datav1alpha1.FormatIceberg
	catalog.Spec.Streams[0].Iceberg = &datav1alpha1.IcebergTable{Table: "ml.t",
		Catalog: datav1alpha1.IcebergCatalog{Type: datav1alpha1.IcebergCatalogREST, URI: "http://169.254.169.254/iceberg"}}
	for _, tt := range []struct {
		ds   *datav1alpha1.TrainingDataset
		says string
	}{
		{dataset("no-secret", "s3://data/a/", hostile.URL, ""), "may not use the operator's own cloud identity"},
		{dataset("local", "file:///etc/", "", "dummy"), "file:// URI, which the operator refuses"},
		{dataset("metadata", "s3://data/a/", "http://169.254.169.254", "dummy"), `endpoint "169.254.169.254" is a link-local address`},
		{catalog, `the Iceberg catalog's endpoint "169.254.169.254" is a link-local address`},
	} {
		if err := c.Create(ctx, tt.ds); err == nil || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("dataset %s: got %v, want a refusal saying %q", tt.ds.Name, err, tt.says)
		}
	}

	// The hostile datasets first, then a good one.
	for _, name := range []string{"endless", "tarpit", "leaky"} {
		if err := c.Create(ctx, dataset(name, "s3://"+name+"/web/", hostile.URL, "dummy")); err != nil {
			t.Fatal(err)
		}
	}
	bucket, _ := mdsInMinIO(t, mio)
	created := time.Now()
	if err := c.Create(ctx, dataset("good", "s3://"+bucket+"/m/", mio.URL(), "minio")); err != nil {
		t.Fatal(err)
	}

	wait := func(name, typ string, status metav1.ConditionStatus, within time.Duration) *metav1.Condition {
		t.Helper()
		var ds datav1alpha1.TrainingDataset
		for deadline := time.Now().Add(within); ; time.Sleep(200 * time.Millisecond) {
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &ds); err != nil {
				t.Fatal(err)
			}
			if cond := meta.FindStatusCondition(ds.Status.Conditions, typ); cond != nil && cond.Status == status {
				return cond
			}
			if time.Now().After(deadline) {
				t.Fatalf("dataset %s: no %s=%s within %s: %+v", name, typ, status, within, ds.Status.Conditions)
			}
		}
	}
	wait("good", datav1alpha1.ConditionReady, metav1.ConditionTrue, 20*time.Second)
	t.Logf("the good dataset was Ready %s after its creation, beside the hostile ones", time.Since(created).Round(time.Millisecond))

	endless := wait("endless", datav1alpha1.ConditionIndexResolved, metav1.ConditionFalse, 30*time.Second)
	if endless.Reason != datav1alpha1.ReasonIndexTooLarge || !strings.Contains(endless.Message, "cap of 16777216 bytes (16 MiB)") {
		t.Errorf("endless index: %s: %s", endless.Reason, endless.Message)
	}
	tarpit := wait("tarpit", datav1alpha1.ConditionIndexResolved, metav1.ConditionFalse, 30*time.Second)
	if tarpit.Reason != datav1alpha1.ReasonIndexUnreachable || !strings.Contains(tarpit.Message, "timeout") {
		t.Errorf("tarpit: %s: %s", tarpit.Reason, tarpit.Message)
	}
	leaky := wait("leaky", datav1alpha1.ConditionIndexResolved, metav1.ConditionFalse, 30*time.Second)
	if !strings.Contains(leaky.Message, "HTTP 400") {
		t.Errorf("leaky: the condition does not give the status: %s", leaky.Message)
	}

	// Nothing of the body in status, events or logs.
	var all datav1alpha1.TrainingDatasetList
	if err := c.List(ctx, &all, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var events eventsv1.EventList
	if err := c.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{"status": fmt.Sprint(all.Items), "events": fmt.Sprint(events.Items), "logs": mgr.log()} {
		if strings.Contains(text, "hunter2") || strings.Contains(text, "internal-admin") {
			t.Errorf("the endpoint's response body reached the %s", what)
		}
	}

	// The manager's memory stayed bounded: the chart's limit is chartMemoryLimit.
	checkPeakRSS(t, mgr, fmt.Sprintf("the endless endpoint sent %d MiB", sent.Load()>>20))
}

// checkPeakRSS fails unless the manager's peak RSS (VmHWM) is under the
// chart's limit, and logs it with what.
func checkPeakRSS(t *testing.T, mgr *managerProcess, what string) {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", mgr.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	var peakKiB int64
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			peakKiB, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	t.Logf("manager peak RSS %d MiB; %s", peakKiB>>10, what)
	if peakKiB == 0 || peakKiB<<10 > chartMemoryLimit {
		t.Errorf("the manager's peak RSS is %d KiB, over the chart's %d MiB limit (or unreadable)", peakKiB, chartMemoryLimit>>20)
	}
}

// operatorWithMinIO makes the operator's namespace and starts a MinIO for
// one test.
func operatorWithMinIO(t *testing.T, operatorNS string) *testenv.MinIO {
	t.Helper()
	if err := apiServer.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNS}}); err != nil {
		t.Fatal(err)
	}
	mio, err := testenv.StartMinIO(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mio.Stop() })
	return mio
}

// mdsInMinIO writes a small MDS stream (64 samples) to a local directory
// and to m/ in a fresh bucket: the bucket and the directory.
func mdsInMinIO(t *testing.T, mio *testenv.MinIO) (string, string) {
	t.Helper()
	bucket := mio.Bucket(t)
	dir := filepath.Join(t.TempDir(), "m")
	if err := sampledata.MDS(dir, "m", 64, 2000, ""); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if _, err := mio.Client.FPutObject(context.Background(), bucket, "m/"+e.Name(), filepath.Join(dir, e.Name()), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return bucket, dir
}

// TestIntegrationHostileBodiesKeepTheManagerUnderItsLimit: the second
// security review's finding 2 on the manager binary. An endpoint of the
// author's answers every request with a 1 GiB error body, to each SDK the
// manager reads with (s3, gs, az with a made-up key in the author's own
// Secret) and to the AWS STS exchange of a workload identity; the SDKs
// once read such bodies whole (peak heaps of 2.6–6.1 GiB against the
// chart's limit). Each dataset reports the failure, nothing of the
// body reaches status or logs, and the peak RSS stays under the limit.
func TestIntegrationHostileBodiesKeepTheManagerUnderItsLimit(t *testing.T) {
	ctx := context.Background()
	c := apiServer.Client
	operatorNS := "shardfeed-bodies"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNS}}); err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusInternalServerError)
		chunk := []byte(strings.Repeat("<Error><Code>x</Code><Message>internal-admin: "+leakedSecret+"</Message></Error>", 256))
		for r.Method != http.MethodHead && r.Context().Err() == nil && sent.Load() < 8<<30 {
			n, err := w.Write(chunk)
			sent.Add(int64(n))
			if err != nil || sent.Load()%(1<<30) < int64(n) && sent.Load() >= 1<<30 { // 1 GiB a request at most
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	ns := apiServer.Namespace(t)
	port := freePort(t)
	installWebhooks(t, port, operatorNS)
	mgr := startManagerProcess(t, operatorNS, port, "--store-request-timeout=3s", "--index-read-timeout=30s",
		"--allowed-endpoints="+strings.TrimPrefix(srv.URL, "http://"), "--ambient-credentials-namespaces="+ns)
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3", Namespace: ns},
		Data: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("key"), "AWS_SECRET_ACCESS_KEY": []byte("secret")}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "az", Namespace: ns},
		Data: map[string][]byte{"AZURE_STORAGE_KEY": []byte("bm90LWEta2V5")}}); err != nil { // base64 of "not-a-key"
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: ns,
		Annotations: map[string]string{workloadidentity.AnnotationAWSRoleARN: "arn:aws:iam::123456789012:role/r"}}}); err != nil {
		t.Fatal(err)
	}
	sources := map[string]datav1alpha1.Source{
		"s3":  {URI: "s3://data/web/", Region: "us-east-1", CredentialsSecretRef: &datav1alpha1.SecretReference{Name: "s3"}},
		"gs":  {URI: "gs://data/web/"},
		"az":  {URI: "az://acct/data/web/", CredentialsSecretRef: &datav1alpha1.SecretReference{Name: "az"}},
		"sts": {URI: "s3://data/web/", Region: "us-east-1", WorkloadIdentity: &datav1alpha1.WorkloadIdentity{ServiceAccountName: "trainer"}},
	}
	for name, src := range sources {
		src.Endpoint, src.Insecure = srv.URL, true
		if err := c.Create(ctx, &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: datav1alpha1.TrainingDatasetSpec{Streams: []datav1alpha1.Stream{{Name: "s", Source: src}}, NumSplits: 2, GlobalBatchSize: 8}}); err != nil {
			t.Fatal(err)
		}
	}
	for name := range sources {
		var ds datav1alpha1.TrainingDataset
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &ds); err != nil {
				t.Fatal(err)
			}
			if cond := meta.FindStatusCondition(ds.Status.Conditions, datav1alpha1.ConditionIndexResolved); cond != nil && cond.Status == metav1.ConditionFalse {
				t.Logf("%s: %s: %.300s", name, cond.Reason, cond.Message)
				if !strings.Contains(cond.Message, "500") && !strings.Contains(cond.Message, "refused the ServiceAccount token") {
					t.Errorf("dataset %s: the condition does not say what the endpoint answered: %s", name, cond.Message)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("dataset %s: not refused within 60 s: %+v", name, ds.Status.Conditions)
			}
		}
		if text := fmt.Sprint(ds.Status); strings.Contains(text, "hunter2") || strings.Contains(text, "internal-admin") {
			t.Errorf("dataset %s: the body reached its status", name)
		}
	}
	if strings.Contains(mgr.log(), "hunter2") {
		t.Error("the body reached the manager's log")
	}
	checkPeakRSS(t, mgr, fmt.Sprintf("s3, gs, az and STS answered 1 GiB error bodies; the endpoint sent %d MiB", sent.Load()>>20))
}

// TestIntegrationADatasetsIndexesShareOneBudget: the cap on index reads
// was per read, so 64 streams of 16 MiB indexes took 783 MiB; a dataset's
// reads now share one budget (streams and filters), and a dataset over it
// is refused naming it while a smaller one beside it is Ready.
func TestIntegrationADatasetsIndexesShareOneBudget(t *testing.T) {
	ctx := context.Background()
	c := apiServer.Client
	operatorNS := "shardfeed-budget"
	mio := operatorWithMinIO(t, operatorNS)
	bucket, dir := mdsInMinIO(t, mio)
	fi, err := os.Stat(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 { // four streams of the same data, each with its index
		for _, e := range must(os.ReadDir(dir)) {
			if _, err := mio.Client.FPutObject(ctx, bucket, fmt.Sprintf("s%d/%s", i, e.Name()), filepath.Join(dir, e.Name()), minio.PutObjectOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	budget := fi.Size()*5/2 + 1 // two indexes fit, three do not
	port := freePort(t)
	installWebhooks(t, port, operatorNS)
	startManagerProcess(t, operatorNS, port, fmt.Sprintf("--max-dataset-index-bytes=%d", budget), "--allowed-endpoints="+mio.Endpoint)
	ns := apiServer.Namespace(t)
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "minio", Namespace: ns},
		Data: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte(mio.AccessKey), "AWS_SECRET_ACCESS_KEY": []byte(mio.SecretKey)}}); err != nil {
		t.Fatal(err)
	}
	dataset := func(name string, n int) {
		var streams []datav1alpha1.Stream
		for i := range n {
			streams = append(streams, datav1alpha1.Stream{Name: fmt.Sprint("s", i), Source: datav1alpha1.Source{URI: fmt.Sprintf("s3://%s/s%d/", bucket, i),
				Endpoint: mio.URL(), Insecure: true, Region: "us-east-1", CredentialsSecretRef: &datav1alpha1.SecretReference{Name: "minio"}}})
		}
		if err := c.Create(ctx, &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: datav1alpha1.TrainingDatasetSpec{Streams: streams, NumSplits: 2, GlobalBatchSize: 8}}); err != nil {
			t.Fatal(err)
		}
	}
	dataset("two", 2)
	dataset("four", 4)
	wait := func(name, typ string, status metav1.ConditionStatus) *metav1.Condition {
		t.Helper()
		var ds datav1alpha1.TrainingDataset
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &ds); err != nil {
				t.Fatal(err)
			}
			if cond := meta.FindStatusCondition(ds.Status.Conditions, typ); cond != nil && cond.Status == status {
				return cond
			}
			if time.Now().After(deadline) {
				t.Fatalf("dataset %s: no %s=%s within 30 s: %+v", name, typ, status, ds.Status.Conditions)
			}
		}
	}
	wait("two", datav1alpha1.ConditionReady, metav1.ConditionTrue)
	four := wait("four", datav1alpha1.ConditionIndexResolved, metav1.ConditionFalse)
	if four.Reason != datav1alpha1.ReasonIndexTooLarge || !strings.Contains(four.Message, fmt.Sprintf("pass its budget of %d bytes at stream \"s2\"", budget)) ||
		!strings.Contains(four.Message, "datasets.maxDatasetIndexBytes") {
		t.Errorf("four streams over the budget: %s: %s", four.Reason, four.Message)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// bigMDSIndex writes to bucket/prefix/ an MDS index.json of about size
// bytes: the shard entries of a small real stream's index, repeated under
// new names (the planner reads the index only; no shard is fetched).
func bigMDSIndex(t *testing.T, mio *testenv.MinIO, dir, bucket, prefix string, size int) int {
	t.Helper()
	var idx map[string]any
	if err := json.Unmarshal(must(os.ReadFile(filepath.Join(dir, "index.json"))), &idx); err != nil {
		t.Fatal(err)
	}
	shard := idx["shards"].([]any)[0].(map[string]any)
	one := len(must(json.Marshal(shard))) + 1
	var shards []any
	for i := range max(1, size/one) {
		s := maps.Clone(shard)
		raw := maps.Clone(s["raw_data"].(map[string]any))
		raw["basename"] = fmt.Sprintf("shard.%06d.mds", i)
		s["raw_data"] = raw
		shards = append(shards, s)
	}
	idx["shards"] = shards
	body := must(json.Marshal(idx))
	if _, err := mio.Client.PutObject(context.Background(), bucket, prefix+"/index.json", bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	return len(body)
}

// TestIntegrationFourDatasetsOfSixtyFourStreamsAtTheBudget: the second
// review's finding 4 measured on the manager binary, at the chart's
// defaults (16 MiB a read, 64 MiB a dataset, 128 MiB in flight, 4
// workers). Four datasets of 64 streams reconcile at once: two whose 64
// indexes of ~1 MiB fill the budget (planned: 64 streams, ~220 000
// shards each), two whose indexes of ~16 MiB pass it at the fifth
// stream (refused). Before the budgets, 64 streams of 16 MiB indexes
// peaked at 783 MiB; the peak RSS must stay under the chart's limit.
func TestIntegrationFourDatasetsOfSixtyFourStreamsAtTheBudget(t *testing.T) {
	ctx := context.Background()
	c := apiServer.Client
	operatorNS := "shardfeed-budget4"
	// The chart's container: its limit, of which the manager gives the Go
	// runtime 90% (internal/memlimit, from the cgroup); and the
	// collector's trace, for the live heap.
	t.Setenv("GOMEMLIMIT", strconv.Itoa(goMemoryLimit))
	t.Setenv("GODEBUG", "gctrace=1")
	mio := operatorWithMinIO(t, operatorNS)
	bucket, dir := mdsInMinIO(t, mio)
	const streams, budget = 64, 64 << 20
	small := 0
	for i := range streams {
		small = bigMDSIndex(t, mio, dir, bucket, fmt.Sprint("small", i), budget/streams-8<<10)
	}
	large := 0
	for i := range 5 {
		large = bigMDSIndex(t, mio, dir, bucket, fmt.Sprint("large", i), 16<<20-64<<10)
	}
	port := freePort(t)
	installWebhooks(t, port, operatorNS)
	mgr := startManagerProcess(t, operatorNS, port, "--allowed-endpoints="+mio.Endpoint)
	ns := apiServer.Namespace(t)
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "minio", Namespace: ns},
		Data: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte(mio.AccessKey), "AWS_SECRET_ACCESS_KEY": []byte(mio.SecretKey)}}); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{"small-a": "small", "small-b": "small", "large-a": "large", "large-b": "large"}
	for name, kind := range names {
		var ss []datav1alpha1.Stream
		for i := range streams {
			prefix := fmt.Sprint(kind, i)
			if kind == "large" {
				prefix = fmt.Sprint(kind, i%5)
			}
			ss = append(ss, datav1alpha1.Stream{Name: fmt.Sprint("s", i), Source: datav1alpha1.Source{URI: fmt.Sprintf("s3://%s/%s/", bucket, prefix),
				Endpoint: mio.URL(), Insecure: true, Region: "us-east-1", CredentialsSecretRef: &datav1alpha1.SecretReference{Name: "minio"}}})
		}
		if err := c.Create(ctx, &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: datav1alpha1.TrainingDatasetSpec{Streams: ss, NumSplits: 8, GlobalBatchSize: 64}}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	anonPeak := sampleAnonRSS(t, mgr)
	for name, kind := range names {
		var ds datav1alpha1.TrainingDataset
		for deadline := time.Now().Add(120 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &ds); err != nil {
				t.Fatal(err)
			}
			ready := meta.FindStatusCondition(ds.Status.Conditions, datav1alpha1.ConditionReady)
			resolved := meta.FindStatusCondition(ds.Status.Conditions, datav1alpha1.ConditionIndexResolved)
			if kind == "small" && ready != nil && ready.Status == metav1.ConditionTrue {
				break
			}
			if kind == "large" && resolved != nil && resolved.Status == metav1.ConditionFalse {
				if resolved.Reason != datav1alpha1.ReasonIndexTooLarge {
					t.Errorf("dataset %s: %s: %s, want IndexTooLarge", name, resolved.Reason, resolved.Message)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("dataset %s: not settled within 120 s: %+v", name, ds.Status.Conditions)
			}
		}
	}
	anon, live := anonPeak(), liveHeapPeak(mgr.log())
	t.Logf("manager: peak anonymous RSS %d MiB, largest live heap %d MiB; 4 datasets of %d streams at the budget (two of %d-byte indexes planned, two of %d-byte indexes refused) settled in %s",
		anon>>20, live>>20, streams, small, large, time.Since(start).Round(100*time.Millisecond))
	if anon == 0 || anon >= chartMemoryLimit {
		t.Errorf("the manager's anonymous memory peaked at %d MiB, not under the chart's %d MiB limit", anon>>20, chartMemoryLimit>>20)
	}
	// The collector needs room above what is live, or it runs without
	// pause near its limit.
	if live == 0 || live > goMemoryLimit*3/4 {
		t.Errorf("the manager's live heap reached %d MiB, over 3/4 of the Go limit of %d MiB the chart's container gives it", live>>20, goMemoryLimit>>20)
	}
}

// The chart's memory limit for the manager (values.yaml
// resources.limits.memory), and the soft limit internal/memlimit gives the
// Go runtime in that container (90%).
const (
	chartMemoryLimit = 384 << 20
	goMemoryLimit    = chartMemoryLimit / 10 * 9
)

// sampleAnonRSS samples the manager's anonymous resident memory (its heap
// and stacks: what a container's limit cannot reclaim, unlike the
// binary's pages) until the returned function is called, which returns
// the peak in bytes.
func sampleAnonRSS(t *testing.T, mgr *managerProcess) func() int64 {
	t.Helper()
	stop, done := make(chan struct{}), make(chan int64)
	go func() {
		var peakKiB int64
		for {
			status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", mgr.Process.Pid))
			for _, line := range strings.Split(string(status), "\n") {
				if f := strings.Fields(line); len(f) >= 2 && f[0] == "RssAnon:" {
					v, _ := strconv.ParseInt(f[1], 10, 64)
					peakKiB = max(peakKiB, v)
				}
			}
			select {
			case <-stop:
				done <- peakKiB << 10
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return func() int64 { close(stop); return <-done }
}

// gcLine is a GODEBUG=gctrace=1 line's heap sizes: at the start of the
// collection, at its end, and live after it (MiB).
var gcLine = regexp.MustCompile(`(?m)^gc \d+ @.* (\d+)->(\d+)->(\d+) MB`)

// liveHeapPeak is the largest live heap after a collection in a manager's
// log written with GODEBUG=gctrace=1, in bytes.
func liveHeapPeak(log string) int64 {
	var peak int64
	for _, m := range gcLine.FindAllStringSubmatch(log, -1) {
		v, _ := strconv.ParseInt(m[3], 10, 64)
		peak = max(peak, v<<20)
	}
	return peak
}

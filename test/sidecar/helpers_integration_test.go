//go:build integration

// Package sidecar_test runs `shardfeed serve` as a real process on datasets
// in a real MinIO and reads its socket through the Go client.
package sidecar_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/minio/minio-go/v7"
	"sigs.k8s.io/yaml"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/pipeline"
	"github.com/shardfeed/shardfeed/sidecar/sampledata"
)

var (
	minioServer *testenv.MinIO
	binary      string
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(rawWriterEnv); spec != "" {
		if err := rawWriter(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "shardfeed-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "shardfeed")
	root, err := testenv.RepoRoot()
	if err == nil {
		args := []string{"build", "-o", binary}
		if os.Getenv("SHARDFEED_TEST_RACE") != "" {
			args = append(args, "-race") // the processes under test run with the race detector
		}
		cmd := exec.Command("go", append(args, "./cmd/shardfeed")...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
		if os.Getenv("SHARDFEED_TEST_RACE") != "" {
			cmd.Env = append(os.Environ(), "CGO_ENABLED=1") // the race detector needs cgo (make exports CGO_ENABLED=0)
		}
		err = cmd.Run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "building shardfeed:", err)
		os.Exit(1)
	}
	code := testenv.RunWithMinIO(m, &minioServer)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// dataset is a dataset uploaded to a fresh bucket.
type dataset struct {
	bucket, manifest, credentials string
}

// upload writes every file under dir to bucket/prefix/.
func upload(t testing.TB, bucket, prefix, dir string) {
	t.Helper()
	ctx := context.Background()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		_, err = minioServer.Client.FPutObject(ctx, bucket, prefix+"/"+filepath.ToSlash(rel), path, minio.PutObjectOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// newDataset writes an MDS stream "m" (samples mdsN) and a Parquet stream
// "p" (samples parquetN, 0 for none) to MinIO and returns a manifest.
func newDataset(t testing.TB, mdsN, parquetN int, spec string) dataset {
	t.Helper()
	ctx := context.Background()
	bucket, dir := mdsInMinIO(t, mdsN)
	streams := []sampledata.Stream{{Name: "m", Format: "mds", URI: "s3://" + bucket + "/m/", Endpoint: minioServer.URL()}}
	if parquetN > 0 {
		if err := sampledata.Parquet(ctx, filepath.Join(dir, "p"), "p", parquetN, 300, 50); err != nil {
			t.Fatal(err)
		}
		upload(t, bucket, "p", filepath.Join(dir, "p"))
		streams = append(streams, sampledata.Stream{Name: "p", Format: "parquet", URI: "s3://" + bucket + "/p/", Endpoint: minioServer.URL()})
	}
	manifest := filepath.Join(dir, "dataset.yaml")
	if err := os.WriteFile(manifest, []byte(sampledata.Manifest("feed", streams, spec)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dataset{bucket: bucket, manifest: manifest, credentials: minioServer.CredentialsDir(t)}
}

// mdsInMinIO writes the MDS stream "m" of n samples into a fresh bucket,
// under m/, and returns the bucket and the test directory it wrote in.
func mdsInMinIO(t testing.TB, n int) (bucket, dir string) {
	t.Helper()
	bucket, dir = minioServer.Bucket(t), t.TempDir()
	if err := sampledata.MDS(filepath.Join(dir, "m"), "m", n, 2000, "zstd"); err != nil {
		t.Fatal(err)
	}
	upload(t, bucket, "m", filepath.Join(dir, "m"))
	return bucket, dir
}

// newTokenDataset writes an MDS stream "t" of n samples of 2048 int32
// tokens (8 KiB each) to MinIO: an epoch larger than the socket buffers.
func newTokenDataset(t testing.TB, n int, spec string) dataset {
	t.Helper()
	bucket := minioServer.Bucket(t)
	dir := t.TempDir()
	if err := sampledata.Tokens(filepath.Join(dir, "t"), n, 2048, 1<<20); err != nil {
		t.Fatal(err)
	}
	upload(t, bucket, "t", filepath.Join(dir, "t"))
	manifest := filepath.Join(dir, "dataset.yaml")
	streams := []sampledata.Stream{{Name: "t", Format: "mds", URI: "s3://" + bucket + "/t/", Endpoint: minioServer.URL()}}
	if err := os.WriteFile(manifest, []byte(sampledata.Manifest("feed", streams, spec)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dataset{bucket: bucket, manifest: manifest, credentials: minioServer.CredentialsDir(t)}
}

// server is a running `shardfeed serve`.
type server struct {
	t      testing.TB
	cmd    *exec.Cmd
	socket string
	client *shardfeed.Client
	mu     sync.Mutex
	log    bytes.Buffer
	exited chan struct{}
	err    error
}

func (s *server) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.Write(p)
}

func (s *server) logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// serve starts `shardfeed serve` on ds with its state and cache in dir,
// and waits until it is ready.
func serve(t testing.TB, ds dataset, dir string, extra ...string) *server {
	t.Helper()
	return start(t, dir, append([]string{"serve", "-f", ds.manifest, "--socket", filepath.Join(dir, "run", "feed.sock"), "--cache-dir", filepath.Join(dir, "cache"),
		"--state", filepath.Join(dir, "state.json"), "--credentials-dir", ds.credentials, "--metrics-addr", "127.0.0.1:0"}, extra...)...)
}

// start runs shardfeed with args (which serve on dir/run/feed.sock) and
// waits until it is ready.
func start(t testing.TB, dir string, args ...string) *server {
	t.Helper()
	return startEnv(t, dir, nil, args...)
}

// startEnv is start with variables added to the environment.
func startEnv(t testing.TB, dir string, env []string, args ...string) *server {
	t.Helper()
	socket := filepath.Join(dir, "run", "feed.sock")
	s := &server{t: t, socket: socket, client: shardfeed.New(socket), exited: make(chan struct{})}
	s.cmd = exec.Command(binary, args...)
	s.cmd.Stdout, s.cmd.Stderr = s, s
	s.cmd.Env = append(os.Environ(), env...)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.err = s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() { s.kill() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ready := make(chan error, 1)
	go func() { ready <- s.client.WaitReady(ctx) }()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("serve is not ready: %v\n%s", err, s.logs())
		}
	case <-s.exited:
		t.Fatalf("serve exited: %v\n%s", s.err, s.logs())
	}
	return s
}

// kill sends SIGKILL and waits for the process to end.
func (s *server) kill() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-s.exited
}

// batch is one received batch: its step, ids and pad flags, and each
// row's stream and value of the data's "id" column.
type batch struct {
	step    int64
	ids     []int64
	pads    []bool
	streams []int16
	rowIDs  []int64
}

// readStream reads a worker's stream to its end (or its first error),
// parsing each record and calling each for every batch (false stops it);
// it returns the batches and the stream's error.
func readStream[T any](ctx context.Context, c *shardfeed.Client, req shardfeed.Request, parse func(arrow.RecordBatch) (T, error), each func(T) bool) ([]T, error) {
	st, err := c.Batches(ctx, req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = st.Close() }()
	var out []T
	for {
		rec, err := st.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		b, err := parse(rec)
		if err != nil {
			return out, err
		}
		out = append(out, b)
		if each != nil && !each(b) {
			return out, nil
		}
	}
}

// readAll reads a worker's stream of the test datasets' rows, checking
// every row's values.
func readAll(ctx context.Context, c *shardfeed.Client, req shardfeed.Request, each func(batch) bool) ([]batch, error) {
	return readStream(ctx, c, req, func(rec arrow.RecordBatch) (batch, error) {
		col := func(name string) any { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		b := batch{
			step: col(pipeline.ColumnStep).(*array.Int64).Value(0),
			ids:  append([]int64(nil), col(pipeline.ColumnIndex).(*array.Int64).Int64Values()...),
		}
		pads := col(pipeline.ColumnPad).(*array.Boolean)
		for i := range b.ids {
			b.pads = append(b.pads, pads.Value(i))
		}
		if err := checkValues(rec); err != nil {
			return b, fmt.Errorf("step %d: %w", b.step, err)
		}
		b.streams = append([]int16(nil), col(pipeline.ColumnStream).(*array.Int16).Int16Values()...)
		b.rowIDs = append([]int64(nil), col("id").(*array.Int64).Int64Values()...)
		return b, nil
	}, each)
}

// streamNames are the streams of the test datasets, in manifest order.
var streamNames = []string{"m", "p", "h", "o", "converted"}

// checkValues checks that every row's values are those testdata wrote for
// the sample the row's id column names.
func checkValues(rec arrow.RecordBatch) error {
	col := func(name string) arrow.Array {
		if idx := rec.Schema().FieldIndices(name); len(idx) > 0 {
			return rec.Column(idx[0])
		}
		return nil
	}
	ids, _ := col("id").(*array.Int64)
	if ids == nil {
		return fmt.Errorf("no id column")
	}
	streams := col(pipeline.ColumnStream).(*array.Int16)
	text, _ := col("text").(*array.String)
	tokens := col("tokens")
	for i := range ids.Len() {
		id := ids.Value(i)
		if text != nil {
			if want := sampledata.Text(streamNames[streams.Value(i)], id); text.Value(i) != want {
				return fmt.Errorf("row %d: text %q, want %q", i, text.Value(i), want)
			}
		}
		var vals []int32
		switch a := tokens.(type) {
		case nil:
			continue
		case *array.FixedSizeList:
			n := int(a.DataType().(*arrow.FixedSizeListType).Len())
			vals = a.ListValues().(*array.Int32).Int32Values()[(a.Offset()+i)*n : (a.Offset()+i+1)*n]
		case *array.List:
			lo, hi := a.ValueOffsets(i)
			vals = a.ListValues().(*array.Int32).Int32Values()[lo:hi]
		default:
			return fmt.Errorf("tokens column is %s", tokens.DataType())
		}
		for j, v := range vals {
			want := sampledata.Token(id, j) // sampledata.MDS and Parquet
			if len(vals) > 4 {
				want = int32(uint32(id) + uint32(j)) //nolint:gosec // sampledata.Tokens' bit pattern
			}
			if v != want {
				return fmt.Errorf("row %d (sample %d): token %d is %d, want %d", i, id, j, v, want)
			}
		}
	}
	return nil
}

// openAfterFirst opens rank 0's stream of a world of 1 and reads its first
// batch, so that the sidecar is mid-stream when the caller breaks something.
func openAfterFirst(ctx context.Context, t *testing.T, c *shardfeed.Client) *shardfeed.Stream {
	t.Helper()
	st, err := c.Batches(ctx, shardfeed.Request{Rank: 0, World: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if _, err := st.Next(); err != nil {
		t.Fatal(err)
	}
	return st
}

// endOf reads a stream to its end and returns how it ended (io.EOF for a
// whole epoch).
func endOf(st *shardfeed.Stream) error {
	for {
		if _, err := st.Next(); err != nil {
			return err
		}
	}
}

// planLine is one line of `shardfeed plan --ids`.
type planLine struct {
	Epoch  int64 `json:"epoch"`
	Step   int64 `json:"step"`
	Rank   int   `json:"rank"`
	DPRank *int  `json:"dpRank"`
	// With a schedule: the phase, and repeated steps; skipped data's
	// lines are left out of planIDs's map.
	Phase    *int    `json:"phase"`
	Repeated bool    `json:"repeated"`
	Skipped  bool    `json:"skipped"`
	Worker   int64   `json:"worker"`
	IDs      []int64 `json:"ids"`
	Pad      []int   `json:"pad"`
	// Docs are each pack's documents, in a packed dataset.
	Docs [][]int64 `json:"docs"`
	// Bucket is the step's bucket, in a bucketed dataset.
	Bucket *int `json:"bucket"`
}

// planIDs runs `shardfeed plan --ids` and maps (step, rank) to its line.
func planIDs(t testing.TB, ds dataset, epoch int64, world, workers int, extra ...string) map[[2]int64]planLine {
	t.Helper()
	args := []string{"plan", "-f", ds.manifest, "--credentials-dir", ds.credentials, "--ids", "--workers", fmt.Sprint(workers), "--epoch", fmt.Sprint(epoch)}
	if world > 0 {
		args = append(args, "--world-size", fmt.Sprint(world))
	}
	out, err := exec.Command(binary, append(args, extra...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("plan --ids: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	lines := map[[2]int64]planLine{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var l planLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if l.Skipped {
			continue
		}
		lines[[2]int64{l.Step, int64(l.Rank)}] = l
	}
	return lines
}

// sameBatch reports how a received batch differs from the plan's line.
func sameBatch(b batch, l planLine) error {
	if len(b.ids) != len(l.IDs) {
		return fmt.Errorf("step %d: %d ids, the plan has %d", b.step, len(b.ids), len(l.IDs))
	}
	pad := map[int]bool{}
	for _, p := range l.Pad {
		pad[p] = true
	}
	for i := range b.ids {
		if b.ids[i] != l.IDs[i] || b.pads[i] != pad[i] {
			return fmt.Errorf("step %d row %d: (%d, pad %v), the plan has (%d, pad %v)", b.step, i, b.ids[i], b.pads[i], l.IDs[i], pad[i])
		}
	}
	return nil
}

// post sends body to path on the socket and returns the status and the
// body (its "error" when it has one).
func post(t testing.TB, socket, path, body string) (int, string) {
	t.Helper()
	resp, err := socketClient(socket).Post("http://shardfeed"+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(resp.Body)
	var e struct{ Error string }
	if json.Unmarshal(data, &e) == nil && e.Error != "" {
		return resp.StatusCode, e.Error
	}
	return resp.StatusCode, string(data)
}

// getStatus returns the status and the body of GET path on the socket.
func getStatus(t testing.TB, socket, path string) (int, string) {
	t.Helper()
	resp, err := socketClient(socket).Get("http://shardfeed" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// get returns the body of GET path on the socket, which must answer 200.
func get(t testing.TB, socket, path string) string {
	t.Helper()
	status, body := getStatus(t, socket, path)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, status, body)
	}
	return body
}

func socketClient(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
}

// credentialsEnv returns ds's credentials as the AWS variables of the
// default chain.
func credentialsEnv(t testing.TB, ds dataset) []string {
	t.Helper()
	var env []string
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		v, err := os.ReadFile(filepath.Join(ds.credentials, k))
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, k+"="+strings.TrimSpace(string(v)))
	}
	return env
}

// runShardfeed runs the CLI to its end and returns its output.
func runShardfeed(args ...string) (string, error) {
	out, err := exec.Command(binary, args...).CombinedOutput()
	return string(out), err
}

// podSummary is what `plan --summary` says of a pod count.
type podSummary struct {
	shards int
	bytes  int64
	// samples and dropped are the epoch's, and what it drops to even
	// its splits.
	samples, dropped int64
}

// planSummary returns the shards and bytes one pod of pods fetches, and
// the epoch's samples and drops.
func planSummary(t testing.TB, ds dataset, pods int) podSummary {
	t.Helper()
	out, err := exec.Command(binary, "plan", "-f", ds.manifest, "--credentials-dir", ds.credentials, "-o", "json", "--pods", fmt.Sprint(pods)).Output()
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Samples int64 `json:"samples"`
		Dropped int64 `json:"dropped"`
		Pods    []struct {
			Pods            int   `json:"pods"`
			MaxShardsPerPod int   `json:"maxShardsPerPod"`
			PodBytes        int64 `json:"maxBytesPerPod"`
		} `json:"pods"`
	}
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatal(err)
	}
	return podSummary{shards: s.Pods[0].MaxShardsPerPod, bytes: s.Pods[0].PodBytes, samples: s.Samples, dropped: s.Dropped}
}

func ptr[T any](v T) *T { return &v }

func mustContain(t testing.TB, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%q does not say %q", s, sub)
		}
	}
}

// tallyPlanned checks that each of rank's batches is its step's in the plan
// and counts the delivered (non-pad) samples into seen.
func tallyPlanned(plan map[[2]int64]planLine, rank int, got []batch, seen map[int64]int) error {
	for _, b := range got {
		line, ok := plan[[2]int64{b.step, int64(rank)}]
		if !ok {
			return fmt.Errorf("rank %d: step %d is not in the plan", rank, b.step)
		}
		if err := sameBatch(b, line); err != nil {
			return fmt.Errorf("rank %d: %w", rank, err)
		}
		for j, id := range b.ids {
			if !b.pads[j] {
				seen[id]++
			}
		}
	}
	return nil
}

// checkExactlyOnce checks that seen holds every sample of the plan once.
func checkExactlyOnce(plan map[[2]int64]planLine, seen map[int64]int) error {
	want := 0
	for _, line := range plan {
		want += len(line.IDs) - len(line.Pad)
	}
	if len(seen) != want {
		return fmt.Errorf("%d distinct samples delivered, the plan has %d", len(seen), want)
	}
	for id, n := range seen {
		if n != 1 {
			return fmt.Errorf("sample %d delivered %d times", id, n)
		}
	}
	return nil
}

// plannedDataset returns ds's manifest as an object and the fingerprint
// `shardfeed plan` computes for it: what the operator would mount.
func plannedDataset(t testing.TB, ds dataset) (datav1alpha1.TrainingDataset, string) {
	t.Helper()
	var obj datav1alpha1.TrainingDataset
	manifest, err := os.ReadFile(ds.manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(manifest, &obj); err != nil {
		t.Fatal(err)
	}
	out, err := runShardfeed("plan", "-f", ds.manifest, "--credentials-dir", ds.credentials, "-o", "json", "--pods", "1")
	if err != nil {
		t.Fatal(err, out)
	}
	var summary struct{ Fingerprint string }
	if err := json.Unmarshal([]byte(out), &summary); err != nil {
		t.Fatal(err)
	}
	return obj, summary.Fingerprint
}

// writePlanDir writes the plan ConfigMap of spec with fingerprint sum into
// dir, as the kubelet mounts it.
func writePlanDir(t testing.TB, dir string, spec datav1alpha1.TrainingDatasetSpec, sum string) {
	t.Helper()
	data, err := (&configmaps.Plan{Spec: spec, Fingerprint: planner.Fingerprint{Sum: sum}}).Data()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

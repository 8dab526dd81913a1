//go:build integration

package scale_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"golang.org/x/sync/errgroup"

	"github.com/shardfeed/shardfeed/internal/bytesize"
	"github.com/shardfeed/shardfeed/internal/testenv/latencyproxy"
)

// latencyCurve is the benchmark of indexing at a real store's latency: how
// many objects, the delay per request, and the --concurrency values.
type latencyCurve struct {
	objects      int
	delay        time.Duration
	concurrency  []int
	listParallel int
	// parts are runs in parts, as the operator's Jobs index: P processes
	// at once (a pod each), each at --concurrency C, written "PxC".
	parts []string
}

// shortLatency is make test's one small point; the full curve
// (SHARDFEED_LISTING=full, make test-listing) is sized by
// SHARDFEED_LATENCY_OBJECTS, SHARDFEED_LATENCY_DELAY and
// SHARDFEED_LATENCY_CONCURRENCY.
var (
	shortLatency = latencyCurve{objects: 100, delay: 30 * time.Millisecond, concurrency: []int{16}, listParallel: 16, parts: []string{"2x8"}}
	fullLatency  = latencyCurve{objects: 10_000, delay: 30 * time.Millisecond, concurrency: []int{1, 4, 16, 64, 256}, listParallel: 16, parts: []string{"4x16", "4x64"}}
)

func latencyCurveFromEnv(t *testing.T) latencyCurve {
	c := shortLatency
	if os.Getenv("SHARDFEED_LISTING") == "full" {
		c = fullLatency
	}
	if v := os.Getenv("SHARDFEED_LATENCY_OBJECTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 100 || n%100 != 0 {
			t.Fatalf("SHARDFEED_LATENCY_OBJECTS=%q: want a multiple of 100", v)
		}
		c.objects = n
	}
	if v := os.Getenv("SHARDFEED_LATENCY_DELAY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("SHARDFEED_LATENCY_DELAY=%q: %v", v, err)
		}
		c.delay = d
	}
	if v := os.Getenv("SHARDFEED_LATENCY_CONCURRENCY"); v != "" {
		c.concurrency = nil
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				t.Fatalf("SHARDFEED_LATENCY_CONCURRENCY=%q: want numbers like 1,4,16", v)
			}
			c.concurrency = append(c.concurrency, n)
		}
	}
	if v, ok := os.LookupEnv("SHARDFEED_LATENCY_PARTS"); ok {
		c.parts = nil
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			if _, _, err := partsOf(f); err != nil {
				t.Fatalf("SHARDFEED_LATENCY_PARTS=%q: %v", v, err)
			}
			c.parts = append(c.parts, f)
		}
	}
	return c
}

// partsOf reads "PxC": P processes at --concurrency C each.
func partsOf(s string) (processes, concurrency int, err error) {
	p, c, ok := strings.Cut(s, "x")
	processes, perr := strconv.Atoi(p)
	concurrency, cerr := strconv.Atoi(c)
	if !ok || perr != nil || cerr != nil || processes < 1 || concurrency < 1 {
		return 0, 0, fmt.Errorf("%q is not PxC (processes x concurrency, like 4x16)", s)
	}
	return processes, concurrency, nil
}

// TestIntegrationIndexesThroughAStoresLatency indexes a stream of Parquet
// objects on MinIO with `shardfeed index` through the latency proxy (a
// request's round trip as a cloud store's, 30 ms by default), at each
// --concurrency of the curve, and reports each run's time, requests by
// kind and objects a second. It asserts that the proxy saw every request
// the CLI counted and a footer read per object; never a time.
func TestIntegrationIndexesThroughAStoresLatency(t *testing.T) {
	c := latencyCurveFromEnv(t)
	const perDir = 100
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	bucket := minioServer.Bucket(t)
	body, _ := parquetShard(ctx, t, 10)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range c.objects {
		key := fmt.Sprintf("lat/d%04d/part-%04d.parquet", i/perDir, i%perDir)
		g.Go(func() error {
			_, err := minioServer.Client.PutObject(gctx, bucket, key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	proxy := latencyproxy.Start(t, latencyproxy.Options{Upstream: minioServer.Endpoint, Delay: c.delay})
	creds := minioServer.CredentialsDir(t)
	cost := regexp.MustCompile(`in (\d+) requests \((\d+) of them lists\)`)
	// A request the store retried, as its log says (with its cause).
	retried := regexp.MustCompile(`A store request failed; retrying.*`)
	var rows []string
	for _, conc := range c.concurrency {
		// Each row indexes from nothing: the index the row before wrote
		// would be listed too (its _shardfeed/ a directory more) and read
		// (a list and a GET of the index store, which the CLI does not
		// count): the proxy then saw more lists than the CLI said.
		removePrefix(ctx, t, bucket, "lat/_shardfeed/")
		proxy.Reset()
		args := []string{"index", "s3://" + bucket + "/lat/", "--endpoint", proxy.URL(), "--insecure", "--credentials-dir", creds,
			"--index-form", "compact", "--concurrency", strconv.Itoa(conc), "--list-parallel", strconv.Itoa(c.listParallel)}
		began := time.Now()
		out, err := exec.CommandContext(ctx, shardfeedBinary, args...).CombinedOutput()
		took := time.Since(began)
		if err != nil {
			t.Fatalf("index --concurrency %d: %v\n%s", conc, err, out)
		}
		if !strings.Contains(string(out), fmt.Sprintf("%d shards", c.objects)) {
			t.Fatalf("--concurrency %d: not %d shards:\n%s", conc, c.objects, out)
		}
		m := cost.FindStringSubmatch(string(out))
		if m == nil {
			t.Fatalf("--concurrency %d: no cost line:\n%s", conc, out)
		}
		retries := retried.FindAllString(string(out), -1)
		requests, _ := strconv.ParseInt(m[1], 10, 64)
		lists, _ := strconv.ParseInt(m[2], 10, 64)
		n := proxy.Counts()
		reads := n.Get + n.GetRanged
		// The top directory's listing is a page a thousand directories.
		pages := int64(max(c.objects/perDir-1, 0) / 1000)
		switch {
		case n.Requests() < requests:
			t.Errorf("--concurrency %d: the proxy saw %d requests, fewer than the CLI's %d", conc, n.Requests(), requests)
		case n.List < lists || n.List > lists+int64(len(retries))+pages:
			// The CLI counts a list once however often its store retried it
			// (store.Retry, below store.Counted), and however many pages
			// it took; the proxy counts each try and each page.
			t.Errorf("--concurrency %d: the proxy saw %d lists, the CLI %d, with %d pages past the first and %d requests retried: %q", conc, n.List, lists, pages, len(retries), retries)
		case reads < int64(c.objects):
			t.Errorf("--concurrency %d: %d reads of %d objects' footers", conc, reads, c.objects)
		case n.Put == 0:
			t.Errorf("--concurrency %d: the index was not written through the proxy: %s", conc, n)
		case n.Throttled != 0:
			t.Errorf("--concurrency %d: %d requests throttled with no rate limit", conc, n.Throttled)
		}
		t.Logf("--concurrency %d: %s, %s", conc, took.Round(10*time.Millisecond), n)
		rows = append(rows, fmt.Sprintf("| %d | %s | %d | %d | %d | %d | %d | %.0f | %.0f |\n", conc, took.Round(10*time.Millisecond),
			n.Requests(), n.List, n.GetRanged, n.Get+n.Head, n.Put+n.Other, float64(n.Requests())/took.Seconds(), float64(c.objects)/took.Seconds()))
	}
	// In parts, as the operator's Jobs index: one listing, P processes at
	// once, one merge; the index the one a single run wrote.
	single := objectBytes(ctx, t, bucket, "lat/_shardfeed/index.sfi")
	for _, shape := range c.parts {
		processes, conc, _ := partsOf(shape)
		removePrefix(ctx, t, bucket, "lat/_shardfeed/")
		proxy.Reset()
		base := []string{"index", "s3://" + bucket + "/lat/", "--endpoint", proxy.URL(), "--insecure", "--credentials-dir", creds,
			"--index-form", "compact", "--list-parallel", strconv.Itoa(c.listParallel)}
		began := time.Now()
		out, err := exec.CommandContext(ctx, shardfeedBinary, append(base, "--list-parts", strconv.Itoa(processes))...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: --list-parts: %v\n%s", shape, err, out)
		}
		m := regexp.MustCompile(`run ([0-9a-f]{16}) under`).FindSubmatch(out)
		if m == nil {
			t.Fatalf("%s: --list-parts named no run:\n%s", shape, out)
		}
		run := string(m[1])
		listed := time.Since(began)
		pg, pctx := errgroup.WithContext(ctx)
		for k := range processes {
			pg.Go(func() error {
				out, err := exec.CommandContext(pctx, shardfeedBinary, append(base, "--part", strconv.Itoa(k), "--run", run, "--concurrency", strconv.Itoa(conc))...).CombinedOutput()
				if err != nil {
					return fmt.Errorf("--part %d: %w\n%s", k, err, out)
				}
				return nil
			})
		}
		if err := pg.Wait(); err != nil {
			t.Fatalf("%s: %v", shape, err)
		}
		if out, err := exec.CommandContext(ctx, shardfeedBinary, append(base, "--merge-parts", "--run", run)...).CombinedOutput(); err != nil {
			t.Fatalf("%s: --merge-parts: %v\n%s", shape, err, out)
		}
		took := time.Since(began)
		if got := objectBytes(ctx, t, bucket, "lat/_shardfeed/index.sfi"); !bytes.Equal(got, single) {
			t.Fatalf("%s: the index merged from parts differs from the one run's", shape)
		}
		n := proxy.Counts()
		t.Logf("%s in parts: %s (listing %s), %s", shape, took.Round(10*time.Millisecond), listed.Round(10*time.Millisecond), n)
		rows = append(rows, fmt.Sprintf("| %d processes × %d (in parts: list, parts, merge) | %s | %d | %d | %d | %d | %d | %.0f | %.0f |\n", processes, conc,
			took.Round(10*time.Millisecond), n.Requests(), n.List, n.GetRanged, n.Get+n.Head, n.Put+n.Other, float64(n.Requests())/took.Seconds(), float64(c.objects)/took.Seconds()))
	}
	report := fmt.Sprintf("\n`shardfeed index` of %d Parquet objects (%s each) in %d directories on MinIO through the latency proxy "+
		"(%s before each request, no rate limit; --list-parallel %d), at each --concurrency:\n\n"+
		"| --concurrency | took | requests | lists | ranged GETs | whole GETs and HEADs | PUTs and other | requests a second | objects a second |\n"+
		"| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n%s",
		c.objects, bytesize.Human(int64(len(body))), c.objects/perDir, c.delay, c.listParallel, strings.Join(rows, ""))
	t.Logf("listing at a store's latency:\n%s", report)
	appendReport(t, report)
}

// appendReport adds a section to the listing report (SCALE_LISTING_REPORT,
// which make test-listing removes before its run).
func appendReport(t *testing.T, section string) {
	path := os.Getenv("SCALE_LISTING_REPORT")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644) //nolint:gosec // a report
	if err != nil {
		t.Error(err)
		return
	}
	if _, err := f.WriteString(section); err != nil {
		t.Error(err)
	}
	if err := f.Close(); err != nil {
		t.Error(err)
	}
}

// objectBytes reads an object of bucket.
func objectBytes(ctx context.Context, t *testing.T, bucket, key string) []byte {
	t.Helper()
	obj, err := minioServer.Client.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = obj.Close() }()
	var b bytes.Buffer
	if _, err := b.ReadFrom(obj); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return b.Bytes()
}

// removePrefix deletes bucket's objects under prefix.
func removePrefix(ctx context.Context, t *testing.T, bucket, prefix string) {
	t.Helper()
	for o := range minioServer.Client.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		if err := minioServer.Client.RemoveObject(ctx, bucket, o.Key, minio.RemoveObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

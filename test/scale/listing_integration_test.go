//go:build integration

package scale_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"golang.org/x/sync/errgroup"

	"github.com/shardfeed/shardfeed/internal/bytesize"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
)

// listing is a stream of many small Parquet objects in a tree of dirs
// directories on MinIO, indexed by listing it and from an inventory.
type listing struct{ dirs, perDir int }

var (
	shortListing = listing{dirs: 20, perDir: 100}
	// The million objects.
	fullListing = listing{dirs: 1000, perDir: 1000}
)

// TestIntegrationIndexesAStreamOfManyObjects indexes d's objects with
// `shardfeed index` twice: listing the tree (its directories listed at
// once) and from an S3 Inventory CSV of its keys (no listing). It reports
// each run's time, requests and requests a second; both indexes are the
// same, of every object.
func TestIntegrationIndexesAStreamOfManyObjects(t *testing.T) {
	d := shortListing
	if os.Getenv("SHARDFEED_LISTING") == "full" { // make test-listing: about 30 minutes
		d = fullListing
	}
	objects := d.dirs * d.perDir
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	bucket := minioServer.Bucket(t)
	body, _ := parquetShard(ctx, t, 10)
	var inventory bytes.Buffer
	keys := make([]string, 0, objects)
	for dir := range d.dirs {
		for i := range d.perDir {
			key := fmt.Sprintf("web/d%04d/part-%04d.parquet", dir, i)
			keys = append(keys, key)
			fmt.Fprintf(&inventory, "%q,%q,\"%d\"\n", bucket, key, len(body))
		}
	}
	began := time.Now()
	var put atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for _, k := range keys {
		g.Go(func() error {
			_, err := minioServer.Client.PutObject(gctx, bucket, k, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{})
			if n := put.Add(1); n%100_000 == 0 {
				t.Logf("%d objects written in %s", n, time.Since(began).Round(time.Second))
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d objects of %d bytes written in %s", objects, len(body), time.Since(began).Round(time.Millisecond))
	list := filepath.Join(t.TempDir(), "inventory.csv")
	if err := os.WriteFile(list, inventory.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	creds := minioServer.CredentialsDir(t)
	uri := "s3://" + bucket + "/web/"
	run := func(args ...string) (time.Duration, string) {
		began := time.Now()
		cmd := exec.CommandContext(ctx, shardfeedBinary, append([]string{"index", uri, "--endpoint", minioServer.URL(), "--insecure", "--credentials-dir", creds, "--index-form", "compact"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("index %v: %v\n%s", args, err, out)
		}
		return time.Since(began), string(out)
	}
	cost := regexp.MustCompile(`in (\d+) requests \((\d+) of them lists\)`)
	var rows []string
	var indexes [][]byte
	for _, how := range []struct {
		name string
		args []string
	}{
		{"listing the tree, 16 directories at once", nil},
		{"from an S3 Inventory CSV, no listing", []string{"--object-list", list, "--object-list-form", "s3-inventory-csv"}},
	} {
		took, out := run(how.args...)
		if !strings.Contains(out, fmt.Sprintf("%d shards", objects)) {
			t.Fatalf("%s: not %d shards:\n%s", how.name, objects, out)
		}
		m := cost.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("%s: no cost line:\n%s", how.name, out)
		}
		requests, _ := strconv.ParseInt(m[1], 10, 64)
		lists, _ := strconv.ParseInt(m[2], 10, 64)
		if how.args != nil && lists != 0 {
			t.Errorf("%s: %d lists", how.name, lists)
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %d (%d lists) | %.0f | %.0f |\n", how.name, took.Round(100*time.Millisecond), requests, lists,
			float64(requests)/took.Seconds(), float64(objects)/took.Seconds()))
		obj, err := minioServer.Client.GetObject(ctx, bucket, "web/_shardfeed/index.sfi", minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if _, err := b.ReadFrom(obj); err != nil {
			t.Fatal(err)
		}
		indexes = append(indexes, b.Bytes())
	}
	// The same index but its listing's record, which says the inventory's
	// came from an object list (of keys and sizes, with no ETags).
	var files [2]*indexfile.File
	for i, b := range indexes {
		l, err := index.ReadLayout(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		files[i] = l.File
	}
	if files[0].Listing == nil || files[0].Listing.ObjectList || files[1].Listing == nil || !files[1].Listing.ObjectList {
		t.Errorf("listings %+v and %+v: the second is the object list's", files[0].Listing, files[1].Listing)
	}
	files[0].Listing, files[1].Listing = nil, nil
	if !reflect.DeepEqual(files[0], files[1]) {
		t.Error("the index from the inventory differs from the listing's")
	}
	report := fmt.Sprintf("`shardfeed index` of %d Parquet objects (%s each) in %d directories on MinIO, the index compact (%s):\n\n"+
		"| how | took | requests | requests a second | objects a second |\n| --- | --- | --- | --- | --- |\n%s",
		objects, bytesize.Human(int64(len(body))), d.dirs, bytesize.Human(int64(len(indexes[0]))), strings.Join(rows, ""))
	t.Logf("listing:\n%s", report)
	appendReport(t, report)
}

package lance_test

// Lance tables written by pylance and what pylance reads of them (the
// recording in lancetable/testdata/golden: lance_oracle.py record; make
// golden), indexed by shardfeed index and read shard by shard as a pod
// reads them (its parts only, through format.StoreRead): every live row
// equals pylance's read of the pinned version, and no deleted row is
// served.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
)

// recording is the Lance tables' recorded oracle, the table reader's
// (lancetable), or the folder SHARDFEED_GOLDEN names.
func recording(t *testing.T) string {
	t.Helper()
	return testenv.GoldenAt(t, filepath.Join("lancetable", "testdata", "golden"))
}

// open opens a table folder as the local store a pod's sidecar would.
func open(t *testing.T, dir string) store.Store {
	t.Helper()
	st, err := stores.Open(context.Background(), store.Source{URI: "file://" + dir + "/"})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestLanceStreamsServePylanceRows(t *testing.T) {
	golden := recording(t)
	var manifest struct {
		Cases map[string]struct {
			Tags   map[string]uint64 `json:"tags"`
			Latest uint64            `json:"latest"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(testenv.GoldenFile(t, golden, "manifest.json"), &manifest); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		kase, version string
		v1Names       bool // the older manifest naming, _versions/N.manifest
	}{{"tab", "2.2", false}, {"evolve", "2.1", false}, {"nested", "2.0", false}, {"dels", "2.2", true}, {"blobs", "2.1", false}, {"blobs", "2.2", false}} { // the encodings matrix is lancetable's
		t.Run(c.kase+"-"+c.version, func(t *testing.T) {
			t.Parallel()
			name := c.version + "/" + c.kase
			w, ok := manifest.Cases[name]
			if !ok {
				t.Fatalf("the recording has no case %s (make golden)", name)
			}
			dir := testenv.GoldenCopy(t, golden, name)
			if _, err := os.Stat(filepath.Join(dir, "_versions", "1.manifest")); (err == nil) != c.v1Names {
				t.Fatalf("the table's manifests are not named as the case asks (v1 names: %v): %v", c.v1Names, err)
			}
			st := open(t, dir)
			// Small shards: fragments are cut into several.
			f, got, _ := served(t, st, nil, 4<<10)
			if f.Lance.Version != w.Latest {
				t.Fatalf("indexed version %d, the latest is %d", f.Lance.Version, w.Latest)
			}
			fragments := map[int]bool{}
			for _, e := range f.Shards {
				fragments[e.Part] = true
			}
			if len(f.Shards) < 2*len(fragments) {
				t.Fatalf("%d shards of %d fragments: the case's fragments should be cut into several", len(f.Shards), len(fragments))
			}
			answers := fmt.Sprintf("%s/%s.v%d.jsonl", c.version, c.kase, w.Latest)
			testenv.CompareHashed(t, "latest", got, testenv.GoldenFile(t, golden, answers))
			for tag, v := range w.Tags {
				f, got, _ := served(t, st, &format.TableOptions{Lance: datav1alpha1.LanceTable{Tag: tag}}, 4<<10)
				if f.Lance.Version != v || f.Lance.Tag != tag {
					t.Fatalf("tag %s: indexed version %d (tag %q), want %d", tag, f.Lance.Version, f.Lance.Tag, v)
				}
				answers := fmt.Sprintf("%s/%s.v%d.jsonl", c.version, c.kase, v)
				testenv.CompareHashed(t, "tag "+tag, got, testenv.GoldenFile(t, golden, answers))
			}
		})
	}
}

// served indexes the dataset and reads every shard from its parts alone,
// returning the rows (with their row addresses, in their order) and the
// bytes fetched.
func served(t *testing.T, st store.Store, table *format.TableOptions, shardBytes int64) (*indexfile.File, []string, int64) {
	t.Helper()
	ctx := context.Background()
	f, err := formats.Default().Index(ctx, st, datav1alpha1.FormatLance, format.IndexOptions{Table: table, ShardBytes: shardBytes, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// The index round-trips through its JSON and its strict reader.
	raw, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	l, err := index.ReadLayout(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("the index does not read back: %v", err)
	}
	r, err := formats.Default().Open(l)
	if err != nil {
		t.Fatal(err)
	}
	type addressed struct {
		addr uint64
		line string
	}
	var rows []addressed
	var fetched int64
	for i, e := range f.Shards {
		var parts [][]byte
		for _, p := range r.Parts(i) {
			b, err := format.StoreRead(st)(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			fetched += int64(len(b))
			parts = append(parts, b)
		}
		rr, err := r.Records(ctx, i, parts, nil)
		if err != nil {
			t.Fatalf("shard %s: %v", e.Name, err)
		}
		live := e.LiveRows()
		k := 0
		for rr.Next() {
			rec := rr.RecordBatch()
			for j := range int(rec.NumRows()) {
				row := testenv.Row(rec, j, nil)
				addr := uint64(e.Part)<<32 | uint64(live[k])
				row["_rowaddr"] = addr
				k++
				rows = append(rows, addressed{addr, testenv.Canonical(t, row)})
			}
		}
		rr.Release()
		if int64(k) != e.Samples {
			t.Fatalf("shard %s served %d rows, its index says %d", e.Name, k, e.Samples)
		}
	}
	slices.SortFunc(rows, func(a, b addressed) int { return cmp.Compare(a.addr, b.addr) })
	out := make([]string, len(rows))
	for i, r := range rows {
		if i > 0 && r.addr == rows[i-1].addr {
			t.Fatalf("row address %#x served twice", r.addr)
		}
		out[i] = r.line
	}
	return f, out, fetched
}

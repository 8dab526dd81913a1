//go:build integration

package lance_test

// Lance tables pylance writes at test time (golden_test.go reads the
// recorded ones): the tables shardfeed refuses, the raw columns, and
// tables that move on after they were indexed.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
	"github.com/shardfeed/shardfeed/sidecar/format/formattest"
)

func oracle(t *testing.T, args ...string) []byte {
	t.Helper()
	return testenv.PythonScript(t, "venv-oracle", "test/oracle/lance_oracle.py", args...)
}

// A projection's shards fetch its columns' bytes and nothing of the
// others': the media table's images and tensors are never read for its
// captions.
func TestLanceProjectionFetchesOnlyItsColumns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "media.lance")
	oracle(t, "write", dir, "--case", "media", "--version", "2.2")
	st, err := stores.Open(context.Background(), store.Source{URI: "file://" + dir + "/"})
	if err != nil {
		t.Fatal(err)
	}
	_, all, allBytes := served(t, st, nil, 1<<20)
	cols := []string{"id", "caption"}
	f, got, projBytes := served(t, st, &format.TableOptions{Columns: cols}, 1<<20)
	compare(t, "projected", sorted(got), sorted(formattest.Lines(t, oracle(t, "read", dir, "--columns", "id,caption"))))
	if len(got) != len(all) {
		t.Fatalf("%d rows projected, %d in all", len(got), len(all))
	}
	var sizes int64
	for _, o := range listSizes(t, st) {
		sizes += o
	}
	if projBytes*20 > allBytes {
		t.Fatalf("the projection fetched %d bytes of the %d all columns take: more than 5%%", projBytes, allBytes)
	}
	t.Logf("all columns: %d bytes fetched (the dataset: %d); id and caption: %d (%.1f%%), in %d shards", allBytes, sizes, projBytes,
		100*float64(projBytes)/float64(allBytes), len(f.Shards))
}

// Each table this reader does not decode is refused with a message that
// names what was found and how to rewrite the table, before a row is
// served; a projection that leaves the refused column out is read.
func TestLanceRefusals(t *testing.T) {
	for _, c := range []struct {
		kase, version string
		want          []string
		columns       []string // a projection that is read
	}{
		{"small", "legacy", []string{"file version legacy 0.2", "legacy files predate the 2.x format", `data_storage_version="2.2"`}, nil},
		{"small", "2.3", []string{"file version 2.3", "unstable", `data_storage_version="2.2"`}, nil},
		{"blob-external", "2.2", []string{`column "payload"`, "row 1", "outside the dataset", "select other columns"}, []string{"id"}},
		{"deep", "2.2", []string{`column "points"`, "nested two levels deep", "flatten it"}, []string{"id"}},
		{"bases", "2.2", []string{"several base paths", "copy it into one location"}, nil},
	} {
		t.Run(c.kase+"-"+c.version, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), c.kase+".lance")
			oracle(t, "write", dir, "--case", c.kase, "--version", c.version)
			st, err := stores.Open(context.Background(), store.Source{URI: "file://" + dir + "/"})
			if err != nil {
				t.Fatal(err)
			}
			opts := format.IndexOptions{ShardBytes: 1 << 20, TempDir: t.TempDir()}
			_, err = formats.Default().Index(context.Background(), st, datav1alpha1.FormatLance, opts)
			if err == nil {
				t.Fatal("indexed a table shardfeed does not read")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the refusal %q does not say %q", err, w)
				}
			}
			if c.columns != nil {
				_, got, _ := served(t, st, &format.TableOptions{Columns: c.columns}, 1<<20)
				compare(t, "projected", sorted(got), sorted(formattest.Lines(t, oracle(t, "read", dir, "--columns", strings.Join(c.columns, ",")))))
			}
		})
	}
}

// An index pinned to a version that is neither the latest nor held by a
// tag warns that Lance's cleanup may delete its files.
func TestLanceUntaggedOldVersionWarns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p.lance")
	oracle(t, "write", dir, "--case", "train", "--version", "2.2") // versions 1–4, tag "pinned" at 4
	oracle(t, "write", dir, "--case", "train-append")              // version 5
	st, err := stores.Open(context.Background(), store.Source{URI: "file://" + dir + "/"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		version int64
		want    string
	}{
		{3, "version 3 is not the latest (5) and no tag holds it: Lance's cleanup_old_versions may delete its files"},
		{4, ""}, // the tag holds it
		{5, ""}, // the latest
	} {
		var warned []string
		opts := format.IndexOptions{ShardBytes: 1 << 20, TempDir: t.TempDir(), Warn: func(m string) { warned = append(warned, m) },
			Table: &format.TableOptions{Lance: datav1alpha1.LanceTable{Version: &c.version}}}
		if _, err := formats.Default().Index(context.Background(), st, datav1alpha1.FormatLance, opts); err != nil {
			t.Fatal(err)
		}
		switch got := strings.Join(warned, "\n"); {
		case c.want == "" && got != "":
			t.Errorf("version %d: warned %q", c.version, got)
		case !strings.Contains(got, c.want):
			t.Errorf("version %d: warned %q, want %q", c.version, got, c.want)
		}
	}
}

// The columns a shard serves in place are, row for row, the bytes of the
// values decoding gives; and the raw path is taken where the layout
// allows: 2.0's flat columns, 2.2's full-zip tensors.
func TestLanceRawColumnsAreTheDecodedValues(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		kase, version string
		mustRaw       []string // columns every shard serves in place
	}{
		{"tab", "2.0", []string{"id", "label", "score", "emb16"}},
		{"media", "2.2", []string{"emb768"}},
		{"media", "2.0", []string{"id", "emb768"}},
	} {
		t.Run(c.kase+"-"+c.version, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "ds.lance")
			oracle(t, "write", dir, "--case", c.kase, "--version", c.version)
			st, err := stores.Open(ctx, store.Source{URI: "file://" + dir + "/"})
			if err != nil {
				t.Fatal(err)
			}
			f, err := formats.Default().Index(ctx, st, datav1alpha1.FormatLance, format.IndexOptions{ShardBytes: 256 << 10, TempDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			l := &index.Layout{Format: datav1alpha1.FormatLance, Index: f.StreamIndex(), File: f}
			r, err := formats.Default().Open(l)
			if err != nil {
				t.Fatal(err)
			}
			rr := r.(format.RawReader)
			var names []string
			for _, fl := range f.Lance.Fields {
				if fl.Parent == -1 {
					names = append(names, fl.Name)
				}
			}
			checked := 0
			for i := range f.Shards {
				var parts [][]byte
				for _, p := range r.Parts(i) {
					b, err := format.StoreRead(st)(ctx, p)
					if err != nil {
						t.Fatal(err)
					}
					parts = append(parts, b)
				}
				raw, err := rr.RawShard(i, parts, names)
				if err != nil {
					t.Fatal(err)
				}
				var rawCols []string
				if raw != nil {
					rawCols = raw.Columns()
				}
				for _, want := range c.mustRaw {
					if !slices.Contains(rawCols, want) {
						t.Fatalf("shard %s: %s is not served in place (raw: %v)", f.Shards[i].Name, want, rawCols)
					}
				}
				recs, err := r.Records(ctx, i, parts, rawCols)
				if err != nil {
					t.Fatal(err)
				}
				vals := make([][]byte, len(rawCols))
				row := 0
				for recs.Next() {
					rec := recs.RecordBatch()
					for j := range int(rec.NumRows()) {
						if !raw.Row(row, vals) {
							t.Fatalf("shard %s: raw row %d is not there", f.Shards[i].Name, row)
						}
						for k, name := range rawCols {
							want := valueBytes(t, rec.Column(rec.Schema().FieldIndices(name)[0]), j)
							if !bytes.Equal(vals[k], want) {
								t.Fatalf("shard %s row %d column %s: raw %x, decoded %x", f.Shards[i].Name, row, name, vals[k], want)
							}
							checked++
						}
						row++
					}
				}
				recs.Release()
				if int64(row) != f.Shards[i].Samples || raw != nil && raw.Row(row, vals) {
					t.Fatalf("shard %s: %d rows decoded, %d served, and raw row %d exists: %v", f.Shards[i].Name, row, f.Shards[i].Samples, row, raw != nil && raw.Row(row, vals))
				}
			}
			t.Logf("%d values served in place, each equal to its decoded bytes", checked)
		})
	}
}

// valueBytes is the bytes Arrow stores for value j of a fixed-width array
// (a fixed-size list's: its items').
func valueBytes(t *testing.T, a arrow.Array, j int) []byte {
	t.Helper()
	d := a.Data()
	switch typ := a.DataType().(type) {
	case *arrow.FixedSizeListType:
		child := d.Children()[0]
		w := typ.Elem().(arrow.FixedWidthDataType).BitWidth() / 8 * int(typ.Len())
		at := (d.Offset()+j)*w + child.Offset()*(w/int(typ.Len()))
		return child.Buffers()[1].Bytes()[at : at+w]
	case arrow.FixedWidthDataType:
		w := typ.BitWidth() / 8
		at := (d.Offset() + j) * w
		return d.Buffers()[1].Bytes()[at : at+w]
	}
	t.Fatalf("%s is not fixed-width", a.DataType())
	return nil
}

func listSizes(t *testing.T, st store.Store) []int64 {
	objs, err := st.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, o := range objs {
		out = append(out, o.Size)
	}
	return out
}

func sorted(rs []string) []string { slices.Sort(rs); return rs }

func compare(t *testing.T, what string, got, want []string) {
	t.Helper()
	formattest.Compare(t, what, "pylance", got, want)
}

// A Lance dataset that moved on since it was indexed is a changed source
// for an index of its latest version, and not for one pinned by number or
// by a tag that did not move.
func TestLanceANewerVersionIsAChangedSource(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "p.lance")
	oracle(t, "write", dir, "--case", "train", "--version", "2.2") // versions 1–4, tag "pinned" at 4
	st, err := stores.Open(ctx, store.Source{URI: "file://" + dir + "/"})
	if err != nil {
		t.Fatal(err)
	}
	four := int64(4)
	pins := []datav1alpha1.LanceTable{{}, {Tag: "pinned"}, {Version: &four}}
	indexes := make([]*indexfile.File, len(pins))
	for i, pin := range pins {
		opts := format.IndexOptions{ShardBytes: 1 << 20, TempDir: t.TempDir(), Table: &format.TableOptions{Lance: pin}}
		if indexes[i], err = formats.Default().Index(ctx, st, datav1alpha1.FormatLance, opts); err != nil {
			t.Fatal(err)
		}
		if c, err := formats.Default().Changes(ctx, st, indexes[i], format.TableOptions{Lance: pin}); err != nil || !c.None() {
			t.Fatalf("pin %+v, as indexed: %v, %v", pin, c, err)
		}
	}
	oracle(t, "write", dir, "--case", "train-append") // version 5
	for i, want := range []string{"the dataset's latest version is 5, and the index is of version 4", "", ""} {
		c, err := formats.Default().Changes(ctx, st, indexes[i], format.TableOptions{Lance: pins[i]})
		if err != nil || c.String() != want {
			t.Fatalf("pin %+v: %q, %v; want %q", pins[i], c, err, want)
		}
	}
}

// Blob columns serve the bytes Lance's blob reader (take_blobs) gives:
// v1's, in the data file (2.1), and v2's inline, packed and dedicated
// (2.2), across fragments, deletions and a later append, and after
// compaction rewrote them.
func TestLanceBlobsAreWhatTakeBlobsReads(t *testing.T) {
	for _, c := range []struct{ kase, version string }{{"blobs", "2.1"}, {"blobs", "2.2"}, {"blobs-compacted", "2.1"}, {"blobs-compacted", "2.2"}, {"blob-images", "2.2"}} {
		t.Run(c.kase+"-"+c.version, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "blobs.lance")
			oracle(t, "write", dir, "--case", c.kase, "--version", c.version)
			st := open(t, dir)
			f, got, fetched := served(t, st, nil, 64<<10)
			compare(t, "blobs", got, formattest.Lines(t, oracle(t, "read", dir)))
			t.Logf("%d shards, %d rows, %d bytes fetched", len(f.Shards), len(got), fetched)
		})
	}
}

// rangeCounted counts a store's ranged reads by object.
type rangeCounted struct {
	store.Store
	mu    sync.Mutex
	bytes map[string]int64
	gets  map[string]int
}

func (s *rangeCounted) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	s.mu.Lock()
	s.bytes[key] += n
	s.gets[key]++
	s.mu.Unlock()
	return s.Store.Get(ctx, key, off, n)
}

// A blob is fetched by range, its bytes alone: a projection's shards
// fetch from the blob files exactly the live rows' packed and dedicated
// blobs (no deleted row's, no gap, never a whole file for one blob), and
// from the data files the inline blobs, their descriptors and the files'
// tails; counted at the store, per sample.
func TestLanceBlobsAreFetchedByTheirRanges(t *testing.T) {
	ctx := context.Background()
	for _, version := range []string{"2.1", "2.2"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "blobs.lance")
			oracle(t, "write", dir, "--case", "blobs", "--version", version)
			var inline, outside int64 // the live payload blobs' bytes, in the data files and in blob files
			for _, l := range formattest.Lines(t, oracle(t, "blob-descriptors", dir)) {
				var d struct {
					Column     string
					Kind, Size int64
				}
				if err := json.Unmarshal([]byte(l), &d); err != nil {
					t.Fatal(err)
				}
				switch {
				case d.Column != "payload":
				case d.Kind == 0:
					inline += d.Size
				default:
					outside += d.Size
				}
			}
			cols := []string{"id", "payload"}
			f, err := formats.Default().Index(ctx, open(t, dir), datav1alpha1.FormatLance,
				format.IndexOptions{Table: &format.TableOptions{Columns: cols}, ShardBytes: 64 << 10, TempDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			r, err := formats.Default().Open(&index.Layout{Format: datav1alpha1.FormatLance, Index: f.StreamIndex(), File: f})
			if err != nil {
				t.Fatal(err)
			}
			st := &rangeCounted{Store: open(t, dir), bytes: map[string]int64{}, gets: map[string]int{}}
			var got []string
			samples := int64(0)
			for i, e := range f.Shards {
				var parts [][]byte
				for _, p := range r.Parts(i) {
					b, err := format.StoreRead(st)(ctx, p)
					if err != nil {
						t.Fatal(err)
					}
					parts = append(parts, b)
				}
				rr, err := r.Records(ctx, i, parts, nil)
				if err != nil {
					t.Fatalf("shard %s: %v", e.Name, err)
				}
				for rr.Next() {
					rec := rr.RecordBatch()
					for j := range int(rec.NumRows()) {
						got = append(got, testenv.Canonical(t, testenv.Row(rec, j, nil)))
					}
				}
				rr.Release()
				samples += e.Samples
			}
			want := formattest.Lines(t, oracle(t, "read", dir, "--columns", strings.Join(cols, ",")))
			for i, l := range want { // without the row address the served rows do not carry
				var row map[string]any
				if err := json.Unmarshal([]byte(l), &row); err != nil {
					t.Fatal(err)
				}
				delete(row, "_rowaddr")
				want[i] = testenv.Canonical(t, row)
			}
			compare(t, "id, payload", sorted(got), sorted(want))
			sizes := map[string]int64{}
			for _, o := range mustList(t, st) {
				sizes[o.Key] = o.Size
			}
			var blobFiles, dataFiles int64
			for key, n := range st.bytes {
				if !strings.HasSuffix(key, ".blob") {
					dataFiles += n
					continue
				}
				blobFiles += n
				if n > sizes[key] {
					t.Errorf("%s: %d bytes fetched of its %d", key, n, sizes[key])
				}
			}
			if blobFiles != outside {
				t.Errorf("%d bytes fetched from blob files; the live rows' packed and dedicated blobs are %d", blobFiles, outside)
			}
			if version == "2.2" && outside == 0 || inline == 0 {
				t.Fatalf("the case's blobs: %d inline, %d in blob files: it should have both (2.2)", inline, outside)
			}
			var tails int64
			for _, e := range f.Shards {
				for _, lf := range e.Files {
					tails += lf.Tail.Length
				}
			}
			overhead := dataFiles - inline
			t.Logf("%d samples in %d shards: %.0f bytes fetched per sample, of which %.0f the blob's own (%d inline, %d in blob files); %.0f descriptors, tails and coalesced gaps",
				samples, len(f.Shards), float64(dataFiles+blobFiles)/float64(samples), float64(inline+outside)/float64(samples), inline, outside, float64(overhead)/float64(samples))
			// Beyond the inline blobs: the tails, the pages of ids and
			// descriptors, and what coalescing a shard's ranges of a data
			// file (gaps under 64 KiB) adds: a deleted row's inline blob,
			// another column's pages between.
			if limit := tails + int64(len(f.Shards))*2*64<<10; overhead < 0 || overhead > limit {
				t.Errorf("%d bytes fetched from the data files beyond the %d of the inline blobs: more than the tails (%d) and two coalesced gaps a shard", overhead, inline, tails)
			}
		})
	}
}

func mustList(t *testing.T, st store.Store) []store.Object {
	t.Helper()
	objs, err := st.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

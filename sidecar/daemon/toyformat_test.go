package daemon_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"k8s.io/utils/ptr"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/planspec"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/daemon/daemontest"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
)

// toy is a format written for this test alone, to show that a format is
// one type and one registry row: objects named *.toy hold one integer per
// line; each object is a shard; its one column is "value".
type toy struct{}

func (toy) Kind() datav1alpha1.ShardFormat { return "toy" }
func (toy) Suffixes() []string             { return []string{".toy"} }

func (toy) Open(l *index.Layout) (format.Reader, error) {
	f, err := format.FileOf(l)
	if err != nil {
		return nil, err
	}
	return toyReader{f}, nil
}

func (toy) IndexObject(ctx context.Context, st store.Store, o store.Object, f *indexfile.File, opts format.IndexOptions) error {
	r, err := st.Get(ctx, o.Key, 0, -1)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(r)
	_ = r.Close()
	if err != nil {
		return err
	}
	sum, err := checksum.Of(opts.Hash, data)
	if err != nil {
		return err
	}
	f.Shards = append(f.Shards, indexfile.Entry{Name: o.Key, Object: o.Key, Length: int64(len(data)),
		Samples: int64(bytes.Count(data, []byte("\n"))), Hash: sum.String(), ObjectSize: o.Size})
	return nil
}

type toyReader struct{ f *indexfile.File }

var toySchema = arrow.NewSchema([]arrow.Field{{Name: "value", Type: arrow.PrimitiveTypes.Int64}}, nil)

func (r toyReader) Parts(i int) []format.Part { return format.FileParts(r.f, i, false) }

func (toyReader) Schema(context.Context, format.ReadFunc) (*arrow.Schema, error) {
	return toySchema, nil
}

func (toyReader) Records(_ context.Context, _ int, parts [][]byte, _ []string) (array.RecordReader, error) {
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	sc := bufio.NewScanner(bytes.NewReader(parts[0]))
	for sc.Scan() {
		v, err := strconv.ParseInt(sc.Text(), 10, 64)
		if err != nil {
			return nil, err
		}
		b.Append(v)
	}
	col := b.NewArray()
	defer col.Release()
	return format.RecordsOf([]arrow.RecordBatch{array.NewRecordBatch(toySchema, []arrow.Array{col}, int64(col.Len()))})
}

// toyStream writes objects of sizes samples under dir/data, the value of
// each sample 1000 + its id, and indexes them with a registry that has the
// toy format: the data's directory, the registry, its store and its index.
func toyStream(ctx context.Context, t *testing.T, dir string, sizes []int) (string, format.Registry, store.Store, *indexfile.File) {
	t.Helper()
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	next := int64(0)
	for i, n := range sizes {
		var b bytes.Buffer
		for range n {
			fmt.Fprintf(&b, "%d\n", 1000+next) // value = 1000 + the sample's id
			next++
		}
		if err := os.WriteFile(filepath.Join(data, fmt.Sprintf("part-%05d.toy", i)), b.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	reg := formats.Default()
	reg.Register(toy{})
	st, err := stores.Open(ctx, store.Source{URI: "file://" + data + "/"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := reg.Index(ctx, st, "toy", format.IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return data, reg, st, f
}

// TestAFormatRegisteredFromATestIsIndexedPlannedAndServed registers the toy
// format in a registry of its own and takes a stream of it through the
// steps of a real one: indexed (as shardfeed index does), planned from its
// index, and served by the sidecar to two ranks, every batch the plan's.
func TestAFormatRegisteredFromATestIsIndexedPlannedAndServed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	data, reg, st, f := toyStream(ctx, t, dir, []int{10, 7, 5})
	if err := index.Write(ctx, st, f); err != nil {
		t.Fatal(err)
	}

	// Planned.
	spec := datav1alpha1.TrainingDatasetSpec{
		Streams:   []datav1alpha1.Stream{{Name: "t", Format: "toy", Source: datav1alpha1.Source{URI: "file://" + data + "/"}}},
		NumSplits: 2, GlobalBatchSize: 4, Shuffle: datav1alpha1.Shuffle{BlockSize: ptr.To[int64](4)},
	}
	x, err := index.ReadStore(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if x.Samples() != 22 || len(x.Shards) != 3 {
		t.Fatalf("index: %d samples in %d shards, want 22 in 3", x.Samples(), len(x.Shards))
	}
	params, err := planspec.Params(&spec, []planner.StreamIndex{x})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := planner.New(params)
	if err != nil {
		t.Fatal(err)
	}

	// Served.
	c := daemontest.Serve(ctx, t, spec, reg, dir)
	ep, err := pl.Epoch(0)
	if err != nil {
		t.Fatal(err)
	}
	got := make([][]int64, pl.Steps())
	for rank := range 2 {
		for _, r := range daemontest.Rows(ctx, t, c, rank, 2) {
			if r.Value != 1000+r.Index {
				t.Fatalf("sample %d has value %d, want %d", r.Index, r.Value, 1000+r.Index)
			}
			got[r.Step] = append(got[r.Step], r.Index)
		}
	}
	if pl.Steps() != 5 {
		t.Fatalf("%d steps, want 5 (2 splits of 11 samples, 2 a step each)", pl.Steps())
	}
	for k := range pl.Steps() {
		batch, err := ep.GlobalBatch(nil, k)
		if err != nil {
			t.Fatal(err)
		}
		var want []int64
		for _, s := range batch {
			want = append(want, s.ID)
		}
		slices.Sort(want)
		slices.Sort(got[k])
		if len(want) != 4 || !slices.Equal(got[k], want) {
			t.Errorf("step %d served %v, the plan says %v", k, got[k], want)
		}
	}
}

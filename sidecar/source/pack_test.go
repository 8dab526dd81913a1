package source

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
	"github.com/shardfeed/shardfeed/internal/index/sidefile"
	"github.com/shardfeed/shardfeed/internal/streams"
	"github.com/shardfeed/shardfeed/planner"
)

// documentsOf builds a one-column record of documents of type t from
// JSON, as a decoded shard holds them.
func documentsOf(t *testing.T, typ arrow.DataType, js string) arrow.RecordBatch {
	t.Helper()
	col, _, err := array.FromJSON(memory.DefaultAllocator, typ, strings.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	defer col.Release()
	return array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "tokens", Type: typ, Nullable: true}}, nil), []arrow.Array{col}, int64(col.Len()))
}

// packedStream is a stream whose shard 0 has docs, packed as p says and
// counted as the index would have counted them.
func packedStream(t testing.TB, typ arrow.DataType, lengths []uint32, p planner.Packing) *Stream {
	t.Helper()
	packs, st := planner.PackShard(lengths, p)
	schema, err := packedSchema(arrow.Field{Name: "tokens", Type: typ}, p.SeqLength)
	if err != nil {
		t.Fatal(err)
	}
	return &Stream{Name: "web", packed: schema, docBase: []int64{100},
		packs: &streams.Packs{Packing: p, Column: "tokens", PadToken: 9, Index: &sidefile.PacksIndex{Shards: []sidefile.PacksShard{sidefile.ShardPacks(len(lengths), st, len(packs))}}}}
}

// A shard's documents of any list type come out as packed rows: tokens
// padded with the pad id, positions restarting at each piece, a loss mask
// over the tokens, the pieces' boundaries and their documents' global ids;
// null and empty documents in no row.
func TestPackShardBuildsPackedRows(t *testing.T) {
	for _, tc := range []struct {
		name    string
		typ     arrow.DataType
		docs    string
		lengths []uint32
		p       planner.Packing
		want    string
	}{
		{"best fit of list<int32>", arrow.ListOf(arrow.PrimitiveTypes.Int32), `[[1,2,3],null,[4,5,6,7,8],[],[9,10]]`, []uint32{3, 0, 5, 0, 2},
			planner.Packing{SeqLength: 8, Method: planner.BestFit, Window: 8}, `
[1 2 3 4 5 6 7 8] [0 1 2 0 1 2 3 4] [1 1 1 1 1 1 1 1] [0 3 8] [100 102]
[9 10 9 9 9 9 9 9] [0 1 0 0 0 0 0 0] [1 1 0 0 0 0 0 0] [0 2] [104]`},
		{"an overlong document of large_list<int64> cut", arrow.LargeListOf(arrow.PrimitiveTypes.Int64), `[[1,2,3,4,5,6,7,8,9,10],[11]]`, []uint32{10, 1},
			planner.Packing{SeqLength: 4, Method: planner.FirstFit, Window: 2}, `
[1 2 3 4] [0 1 2 3] [1 1 1 1] [0 4] [100]
[5 6 7 8] [0 1 2 3] [1 1 1 1] [0 4] [100]
[9 10 11 9] [0 1 0 0] [1 1 1 0] [0 2 3] [100 101]`},
		{"fixed_size_list<uint16> concatenated", arrow.FixedSizeListOf(3, arrow.PrimitiveTypes.Uint16), `[[1,2,3],[4,5,6],[7,8,9]]`, []uint32{3, 3, 3},
			planner.Packing{SeqLength: 4, Method: planner.Concatenate}, `
[1 2 3 4] [0 1 2 0] [1 1 1 1] [0 3 4] [100 101]
[5 6 7 8] [0 1 0 1] [1 1 1 1] [0 2 4] [101 102]
[9 9 9 9] [0 0 0 0] [1 0 0 0] [0 1] [102]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := packedStream(t, tc.typ, tc.lengths, tc.p)
			rec := documentsOf(t, tc.typ, tc.docs)
			defer rec.Release()
			got, err := s.packShard(0, rec)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			if !got.Schema().Equal(s.packed) {
				t.Fatalf("schema %s, want %s", got.Schema(), s.packed)
			}
			if rows := rowsOf(got); strings.TrimSpace(rows) != strings.TrimSpace(tc.want) {
				t.Fatalf("packed rows:\n%s\nwant:%s", rows, tc.want)
			}
		})
	}
}

// Documents the index did not count so, null token ids, and columns that
// are not lists of integers (or take a name packing adds) are refused,
// saying what to do.
func TestPackShardRefuses(t *testing.T) {
	typ := arrow.ListOf(arrow.PrimitiveTypes.Int32)
	p := planner.Packing{SeqLength: 4, Method: planner.BestFit, Window: 4}
	for _, tc := range []struct {
		name, docs string
		lengths    []uint32
		want       string
	}{
		{"a document grown since the index", `[[1,2],[3,4,5]]`, []uint32{2, 2}, "re-run shardfeed index --lengths --pack-length"},
		{"a null token id", `[[1,null],[3,4]]`, []uint32{2, 2}, "null token ids"},
	} {
		s := packedStream(t, typ, tc.lengths, p)
		rec := documentsOf(t, typ, tc.docs)
		_, err := s.packShard(0, rec)
		rec.Release()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	for _, f := range []arrow.Field{
		{Name: "tokens", Type: arrow.ListOf(arrow.PrimitiveTypes.Float32)},
		{Name: "tokens", Type: arrow.BinaryTypes.String},
		{Name: "position_ids", Type: typ},
	} {
		if _, err := packedSchema(f, 8); err == nil || !strings.Contains(err.Error(), "spec.packing.column") {
			t.Errorf("%s %s: %v", f.Name, f.Type, err)
		}
	}
}

func rowsOf(rec arrow.RecordBatch) string {
	var b strings.Builder
	for r := range int(rec.NumRows()) {
		for c := range int(rec.NumCols()) {
			col := rec.Column(c)
			var vals arrow.Array
			switch a := col.(type) {
			case *array.FixedSizeList:
				n := int64(a.DataType().(*arrow.FixedSizeListType).Len())
				vals = array.NewSlice(a.ListValues(), int64(r)*n, int64(r+1)*n)
			case *array.List:
				s, e := a.ValueOffsets(r)
				vals = array.NewSlice(a.ListValues(), s, e)
			}
			if c > 0 {
				b.WriteString(" ")
			}
			fmt.Fprint(&b, vals)
			vals.Release()
		}
		b.WriteString("\n")
	}
	return b.String()
}

// BenchmarkPackShard is a sidecar's packing of a decoded shard of 8192
// documents of lognormal lengths (mean about 400 tokens) into sequences of
// 4096 (best fit, windows of 1024): the packs and the packed record, per
// pack (a batch of B packs costs B times as much).
func BenchmarkPackShard(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 4))
	lengths := make([]uint32, 8192)
	var offsets []int32
	offsets = append(offsets, 0)
	for i := range lengths {
		lengths[i] = uint32(min(math.Exp(5.5+r.NormFloat64()), 4096)) + 1
		offsets = append(offsets, offsets[i]+int32(lengths[i]))
	}
	values := make([]int32, offsets[len(offsets)-1])
	for i := range values {
		values[i] = int32(i % 50000)
	}
	typ := arrow.ListOf(arrow.PrimitiveTypes.Int32)
	data := array.NewData(typ, len(lengths), []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offsets))},
		[]arrow.ArrayData{array.NewData(arrow.PrimitiveTypes.Int32, len(values), []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(values))}, nil, 0, 0)}, 0, 0)
	col := array.MakeFromData(data)
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "tokens", Type: typ}}, nil), []arrow.Array{col}, int64(len(lengths)))
	p := planner.Packing{SeqLength: 4096, Method: planner.BestFit, Window: 1024}
	s := packedStream(b, typ, lengths, p)
	b.SetBytes(int64(len(values)) * 4)
	b.ReportAllocs()
	var packs int64
	for b.Loop() {
		out, err := s.packShard(0, rec)
		if err != nil {
			b.Fatal(err)
		}
		packs = out.NumRows()
		out.Release()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*packs), "ns/pack")
}

// The streams of a packed dataset may hold their documents in any list
// type, of one integer type: their packs are then of one schema, and
// their documents numbered one stream after the other.
func TestPackAllNumbersDocumentsAndRefusesMixedTokenTypes(t *testing.T) {
	p := planner.Packing{SeqLength: 8, Method: planner.BestFit, Window: 4}
	stream := func(name string, typ arrow.DataType, docs ...int64) *Stream {
		var shards []sidefile.PacksShard
		for _, d := range docs {
			shards = append(shards, sidefile.PacksShard{Docs: d})
		}
		return &Stream{Name: name, native: arrow.NewSchema([]arrow.Field{{Name: "tokens", Type: typ}}, nil),
			packs: &streams.Packs{Packing: p, Column: "tokens", Index: &sidefile.PacksIndex{Shards: shards}}}
	}
	a := stream("a", arrow.ListOf(arrow.PrimitiveTypes.Int32), 3, 5)
	b := stream("b", arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Int32), 7)
	if err := packAll([]*Stream{a, b}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(a.docBase, b.docBase) != "[0 3] [8]" || !a.packed.Equal(b.packed) {
		t.Fatalf("document bases %v %v, schemas %s and %s", a.docBase, b.docBase, a.packed, b.packed)
	}
	c := stream("c", arrow.LargeListOf(arrow.PrimitiveTypes.Int64), 2)
	err := packAll([]*Stream{a, c})
	if err == nil || !strings.Contains(err.Error(), "not of one integer type") || !strings.Contains(err.Error(), `stream "c"`) {
		t.Fatalf("int32 and int64 token ids: %v", err)
	}
}

// A corrupt shard skipped (onCorruptShard: skip) in a packed stream
// delivers its packs as zeros: all padding, a loss mask of zeros, no
// piece and no document, in the packed schema.
func TestASkippedPackedShardIsPacksOfPadding(t *testing.T) {
	s := packedStream(t, arrow.ListOf(arrow.PrimitiveTypes.Int32), []uint32{3, 4}, planner.Packing{SeqLength: 4, Method: planner.BestFit, Window: 2})
	rec := s.Zero(2)
	defer rec.Release()
	if !rec.Schema().Equal(s.packed) {
		t.Fatalf("schema %s, want %s", rec.Schema(), s.packed)
	}
	if got := rowsOf(rec); got != "[0 0 0 0] [0 0 0 0] [0 0 0 0] [] []\n[0 0 0 0] [0 0 0 0] [0 0 0 0] [] []\n" {
		t.Fatalf("zero packs:\n%s", got)
	}
}

// The packed columns are the names the Go client reads them by.
func TestPackedColumnsAreTheClients(t *testing.T) {
	want := []string{shardfeed.ColumnPositionIDs, shardfeed.ColumnLossMask, shardfeed.ColumnCuSeqlens, shardfeed.ColumnDocIDs}
	if fmt.Sprint(PackedColumns) != fmt.Sprint(want) {
		t.Fatalf("the sidecar adds %v, the Go client reads %v", PackedColumns, want)
	}
}

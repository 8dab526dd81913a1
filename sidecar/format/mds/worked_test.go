package mds

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shardfeed/shardfeed/internal/index/mdsindex"
)

// A raw shard written byte by byte (the layout in the package doc): two
// samples of columns id (int, 8 bytes) and s (str, its size in the
// sample's header): {7, "hi"} and {-1, ""}.
var workedShard = []byte{
	2, 0, 0, 0, // 2 samples
	16, 0, 0, 0, // sample 0 at byte 16 (after the 4+3·4 bytes of header)
	30, 0, 0, 0, // sample 1 at byte 30
	42, 0, 0, 0, // the end
	2, 0, 0, 0, // sample 0: s is 2 bytes
	7, 0, 0, 0, 0, 0, 0, 0, // id 7
	'h', 'i', // s
	0, 0, 0, 0, // sample 1: s is empty
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // id -1
}

func workedEntry() *mdsindex.ShardEntry {
	eight := int64(8)
	return &mdsindex.ShardEntry{
		ColumnNames: []string{"id", "s"}, ColumnEncodings: []string{"int", "str"}, ColumnSizes: []*int64{&eight, nil},
		Format: "mds", Version: 2, Samples: 2,
		RawData: &mdsindex.FileInfo{Basename: "shard.00000.mds", Bytes: int64(len(workedShard))},
	}
}

func TestAWorkedShardDecodes(t *testing.T) {
	sh, err := ReadShard(workedShard, workedEntry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sh.Schema())
	defer b.Release()
	for i := range sh.Len() {
		if err := sh.Append(b, i); err != nil {
			t.Fatal(err)
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	ids, strs := rec.Column(0).(*array.Int64), rec.Column(1).(*array.String)
	if rec.NumRows() != 2 || ids.Value(0) != 7 || strs.Value(0) != "hi" || ids.Value(1) != -1 || strs.Value(1) != "" {
		t.Fatalf("decoded %v", rec)
	}
}

// What the header's checks refuse, each from one byte changed.
func TestAWorkedShardRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		at   int
		to   byte
		want string
	}{
		{"a count the index does not say", 0, 3, "shard holds 3 samples, the index says 2"},
		{"offsets out of order", 8, 10, "sample 1 offset 10 is outside"},
		{"a size past the sample", 16, 9, `column "s" ends past the sample's 14 bytes`},
		{"a size short of the sample", 16, 1, "columns fill 13 of its 14 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := append([]byte(nil), workedShard...)
			b[c.at] = c.to
			sh, err := ReadShard(b, workedEntry(), nil)
			if err == nil {
				bld := array.NewRecordBuilder(memory.DefaultAllocator, sh.Schema())
				defer bld.Release()
				err = sh.Append(bld, 0)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}

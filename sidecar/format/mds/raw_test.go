package mds

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/mdsindex"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// writeShards writes n samples of allColumns in shards of about sizeLimit
// bytes and returns the index and the stored files.
func writeShards(t *testing.T, comp string, sizeLimit int64, n int, hashes ...string) (*mdsindex.Index, memFiles) {
	t.Helper()
	files := memFiles{}
	w, err := NewWriter(WriterOptions{Columns: allColumns, Compression: comp, Hashes: hashes, SizeLimit: sizeLimit, Put: files.put})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := w.Write(sampleFor(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	x, err := mdsindex.Read(bytes.NewReader(files["index.json"]))
	if err != nil {
		t.Fatal(err)
	}
	return x, files
}

func rawReader(t *testing.T, x *mdsindex.Index) format.RawReader {
	t.Helper()
	r, err := Format{}.Open(&index.Layout{MDS: x, Index: x.StreamIndex()})
	if err != nil {
		t.Fatal(err)
	}
	return r.(format.RawReader)
}

// valueBytes is a decoded value's bytes as Arrow stores them.
func valueBytes(a arrow.Array, row int) []byte {
	switch v := a.(type) {
	case *array.Binary:
		return v.Value(row)
	case *array.String:
		return []byte(v.Value(row))
	case *array.FixedSizeList:
		n := int(v.DataType().(*arrow.FixedSizeListType).Len())
		child := v.ListValues()
		w := child.DataType().(arrow.FixedWidthDataType).BitWidth() / 8
		return child.Data().Buffers()[1].Bytes()[row*n*w : (row+1)*n*w]
	}
	w := a.DataType().(arrow.FixedWidthDataType).BitWidth() / 8
	return a.Data().Buffers()[1].Bytes()[(a.Data().Offset()+row)*w : (a.Data().Offset()+row+1)*w]
}

func TestRawShardServesTheDecodedBytesOfEveryInPlaceEncoding(t *testing.T) {
	x, files := writeShards(t, "", 4000, 40, "xxh64")
	r := rawReader(t, x)
	// In the shard's column order (the writer sorts them by name).
	wantRaw := []string{"b", "f16", "f32", "f64", "i", "i16", "i32", "i64", "i8", "img", "j", "m", "s", "sd", "tok", "u16", "u32", "u64", "u8"}
	for i, e := range x.Shards {
		stored := files[e.Stored().Basename]
		rs, err := r.RawShard(i, [][]byte{stored}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := rs.Columns(); !slices.Equal(got, wantRaw) {
			t.Fatalf("raw columns %v, want %v (the others need decoding)", got, wantRaw)
		}
		rec := decodeStored(t, stored, &x.Shards[i])
		vals := make([][]byte, len(wantRaw))
		for row := range int(rec.NumRows()) {
			if !rs.Row(row, vals) {
				t.Fatalf("shard %d row %d not found", i, row)
			}
			for k, name := range wantRaw {
				if want := valueBytes(col(rec, name), row); !bytes.Equal(vals[k], want) {
					t.Fatalf("shard %d row %d column %s: raw %x, decoded %x", i, row, name, vals[k], want)
				}
			}
		}
		if rs.Row(int(rec.NumRows()), vals) || rs.Row(-1, vals) {
			t.Fatal("a row outside the shard was found")
		}
		rec.Release()
	}
}

func TestRawShardOnlyForWhatItIsAskedAndWhatIsStoredPlain(t *testing.T) {
	x, files := writeShards(t, "", 4000, 10, "xxh64")
	r := rawReader(t, x)
	stored := [][]byte{files[x.Shards[0].Stored().Basename]}
	rs, err := r.RawShard(0, stored, []string{"si", "tok", "dyn", "s"})
	if err != nil {
		t.Fatal(err)
	}
	if got := rs.Columns(); !slices.Equal(got, []string{"tok", "s"}) {
		t.Fatalf("raw columns %v, want [tok s]: in the order asked, the decoded ones left out", got)
	}
	if rs, err := r.RawShard(0, stored, []string{"si", "dyn"}); err != nil || rs != nil {
		t.Fatalf("no raw column asked: got %v, %v; want nil, nil", rs, err)
	}
	zx, zfiles := writeShards(t, "zstd", 4000, 10, "xxh64")
	if rs, err := rawReader(t, zx).RawShard(0, [][]byte{zfiles[zx.Shards[0].Stored().Basename]}, nil); err != nil || rs != nil {
		t.Fatalf("a compressed shard: got %v, %v; want nil, nil (it is decoded)", rs, err)
	}
}

func TestRawShardRefusesBytesThatDoNotHoldTheirValues(t *testing.T) {
	x, files := writeShards(t, "", 4000, 10, "xxh64")
	r := rawReader(t, x)
	e := x.Shards[0]
	stored := files[e.Stored().Basename]
	first := int(binary.LittleEndian.Uint32(stored[4:])) // sample 0's offset
	for _, tc := range []struct {
		name    string
		corrupt func(b []byte)
		want    string
	}{
		{"a str value that is not UTF-8", func(b []byte) {
			b[first+bytes.Index(b[first:], []byte("text 0"))] = 0xff
		}, "not UTF-8"},
		{"a sample's sizes that overrun it", func(b []byte) {
			binary.LittleEndian.PutUint32(b[first:], 1<<30)
		}, "ends past"},
		{"an offset past the shard", func(b []byte) {
			binary.LittleEndian.PutUint32(b[4:], uint32(len(b)+1))
		}, "outside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := bytes.Clone(stored)
			tc.corrupt(bad)
			_, err := r.RawShard(0, [][]byte{bad}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

func TestRawShardRowsOfBytesChangedAfterTheCheckAreNotFound(t *testing.T) {
	x, files := writeShards(t, "", 4000, 10, "xxh64")
	r := rawReader(t, x)
	stored := bytes.Clone(files[x.Shards[0].Stored().Basename])
	rs, err := r.RawShard(0, [][]byte{stored}, nil)
	if err != nil {
		t.Fatal(err)
	}
	vals := make([][]byte, len(rs.Columns()))
	if !rs.Row(1, vals) {
		t.Fatal("row 1 not found before the change")
	}
	// What a mapped file changed under the sidecar looks like: an offset
	// past the end, then a size past the sample. No panic, no bytes.
	binary.LittleEndian.PutUint32(stored[4+4*2:], uint32(len(stored)+100))
	if rs.Row(1, vals) {
		t.Fatal("row 1 found after its end moved past the shard")
	}
	binary.LittleEndian.PutUint32(stored[4+4*2:], binary.LittleEndian.Uint32(stored[4+4*3:]))
	lo := binary.LittleEndian.Uint32(stored[4+4*1:])
	binary.LittleEndian.PutUint32(stored[lo:], 1<<31)
	if rs.Row(1, vals) {
		t.Fatal("row 1 found after a size moved past its sample")
	}
}

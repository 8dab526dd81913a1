package litdata

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
)

// A chunk written byte by byte (the layout in the package doc): two items
// of leaves id (int) and name (str), {7, "hi"} and {-1, ""}.
var workedChunk = []byte{
	2, 0, 0, 0, // 2 items
	16, 0, 0, 0, // item 0 at byte 16 (after the 4+3·4 bytes of header)
	34, 0, 0, 0, // item 1 at byte 34
	50, 0, 0, 0, // the end
	8, 0, 0, 0, 2, 0, 0, 0, // item 0: id is 8 bytes, name 2
	7, 0, 0, 0, 0, 0, 0, 0, // id 7
	'h', 'i', // name
	8, 0, 0, 0, 0, 0, 0, 0, // item 1: id is 8 bytes, name 0
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // id -1
}

var workedLayout = &indexfile.LitData{Columns: []string{"id", "name"}, DataFormats: []string{"int", "str"}}

func TestAWorkedChunkDecodes(t *testing.T) {
	rec, err := Decode(workedLayout, workedChunk, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	ids, names := rec.Column(0).(*array.Int64), rec.Column(1).(*array.String)
	if rec.NumRows() != 2 || ids.Value(0) != 7 || names.Value(0) != "hi" || ids.Value(1) != -1 || names.Value(1) != "" {
		t.Fatalf("decoded %v", rec)
	}
}

// What the chunk's checks refuse, each from one byte changed.
func TestAWorkedChunkRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		at   int
		to   byte
		want string
	}{
		{"a count the index does not say", 0, 3, "3 items, the index says 2"},
		{"an item that ends past the chunk", 12, 51, "item 1 at [34, 51), after 34 in 50 bytes"},
		{"an int leaf of another size", 16, 7, "item 0's id (int)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := append([]byte(nil), workedChunk...)
			b[c.at] = c.to
			rec, err := Decode(workedLayout, b, 2, nil)
			if err == nil {
				rec.Release()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}

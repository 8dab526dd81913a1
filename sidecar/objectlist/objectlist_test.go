package objectlist

import (
	"fmt"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		name, list string
		form       Form
		prefix     string
		want       string // the objects, or an error's words
		outside    int
	}{
		{"csv", "key,size\ndata/b.parquet,20\ndata/a.parquet,10\nother/c,5\ndata/sub/,0\n", CSV, "data/", "[{a.parquet 10 } {b.parquet 20 }]", 2},
		{"csv, no header, all", "a,1\n\"b,c\",2\n", CSV, "", "[{a 1 } {b,c 2 }]", 0},
		{"inventory", "\"bkt\",\"data/x%20y.bin\",\"7\",\"2026-01-01\"\n\"bkt\",\"data/a%2Bb\",\"3\",\"\"\n", S3InventoryCSV, "data/", "[{a+b 3 } {x y.bin 7 }]", 0},
		{"another bucket", "\"other\",\"data/x\",\"7\"\n", S3InventoryCSV, "data/", "row 1: an object of bucket \"other\", and the stream's is \"bkt\"", 0},
		{"a delete marker", "\"bkt\",\"data/x\",\"\"\n", S3InventoryCSV, "data/", "row 1: size \"\" of data/x is not a number of bytes", 0},
		{"negative size", "a,-1\n", CSV, "", "size \"-1\" of a is not a number of bytes", 0},
		{"three fields", "a,1,2\n", CSV, "", "row 1: 3 fields, not key,size", 0},
		{"twice", "a,1\na,2\n", CSV, "", "a is listed twice", 0},
		{"leaves the prefix", "d/../x,1\n", CSV, "d/", "not a plain relative path", 0},
		{"a long row", strings.Repeat("x", MaxLineBytes+10) + ",1\n", CSV, "", "longer than 65536 bytes", 0},
		{"unknown form", "a,1\n", "json", "", "use one of", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs, outside, err := Parse(strings.NewReader(c.list), c.form, "bkt", c.prefix, 0)
			got := fmt.Sprint(objs)
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, c.want) || (err == nil && outside != c.outside) {
				t.Fatalf("got %s (%d outside), want %s (%d outside)", got, outside, c.want, c.outside)
			}
		})
	}
	if _, _, err := Parse(strings.NewReader("a,1\nb,2\nc,3\n"), CSV, "", "", 2); err == nil || !strings.Contains(err.Error(), "more than 2 objects") {
		t.Fatalf("a list over its bound: %v", err)
	}
}

// FuzzParse: any list parses or is refused, without a panic, its objects
// sorted, distinct, under the prefix, of sizes not negative.
func FuzzParse(f *testing.F) {
	f.Add("key,size\ndata/b,20\ndata/a,10\n", false)
	f.Add("\"bkt\",\"data/x%20y\",\"7\",\"x\"\n", true)
	f.Fuzz(func(t *testing.T, list string, inventory bool) {
		form := CSV
		if inventory {
			form = S3InventoryCSV
		}
		objs, _, err := Parse(strings.NewReader(list), form, "bkt", "data/", 1000)
		if err != nil {
			return
		}
		for i, o := range objs {
			if o.Size < 0 || o.Key == "" || (i > 0 && objs[i-1].Key >= o.Key) {
				t.Fatalf("objects %v", objs)
			}
		}
	})
}

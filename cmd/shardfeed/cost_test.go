package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
)

// What index says it read is a share of the indexed objects only when it
// is one: reading files beside them once printed 100 % and more.
func TestIndexSaysWhatItReadOfTheObjects(t *testing.T) {
	f := &indexfile.File{Shards: []indexfile.Entry{{Object: "a.tar", ObjectSize: 1000}, {Object: "a.tar", ObjectSize: 1000}, {Object: "b.tar", ObjectSize: 1000}}}
	for _, c := range []struct {
		read      int64
		want, not string
	}{
		{read: 20, want: "read 20 B of the indexed objects' 2.0 KiB (1.00%) in 2 requests", not: "beside"},
		{read: 2000, want: "(100.00%)"},
		{read: 2600, want: "read 2.5 KiB in 2 requests (0 of them lists): the indexed objects' 2.0 KiB, and 600 B of the files beside them", not: "%"},
	} {
		var counts store.Counts
		counts.Gets.Store(2)
		counts.ReadBytes.Store(c.read)
		var out bytes.Buffer
		printCost(&out, f, &counts)
		if got := out.String(); !strings.Contains(got, c.want) || c.not != "" && strings.Contains(got, c.not) {
			t.Errorf("read %d: %q, want %q without %q", c.read, got, c.want, c.not)
		}
	}
}

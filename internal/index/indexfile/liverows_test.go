package indexfile

import (
	"fmt"
	"testing"
)

func TestEntryLiveRows(t *testing.T) {
	for _, c := range []struct {
		name string
		e    Entry
		want string
	}{
		{"no deletions", Entry{RowStart: 10, Rows: 3, Samples: 3}, "[10 11 12]"},
		{"runs inside", Entry{RowStart: 100, Rows: 6, Samples: 3, Deleted: []Run{{1, 2}, {3, 5}}}, "[100 102 105]"},
		{"all deleted", Entry{Rows: 2, Deleted: []Run{{0, 2}}}, "[]"},
		{"a run past the rows", Entry{Rows: 3, Samples: 2, Deleted: []Run{{2, 9}}}, "[0 1]"},
	} {
		if got := fmt.Sprint(c.e.LiveRows()); got != c.want {
			t.Errorf("%s: LiveRows = %s, want %s", c.name, got, c.want)
		}
	}
}

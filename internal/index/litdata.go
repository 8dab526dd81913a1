package index

import (
	"errors"
	"fmt"
)

// LitData says how the chunks of a litdata stream (what litdata.optimize
// writes) are read: their leaves' names and LitData data formats.
type LitData struct {
	// Columns name the leaves of a sample (the keys of its dict), in the
	// order its chunks store them.
	Columns []string `json:"columns"`
	// DataFormats are the leaves' LitData formats ("int", "str",
	// "no_header_numpy:2", …), one per column.
	DataFormats []string `json:"dataFormats"`
}

func (l *LitData) check() error {
	if len(l.Columns) == 0 || len(l.Columns) != len(l.DataFormats) {
		return fmt.Errorf("%d columns with %d data formats", len(l.Columns), len(l.DataFormats))
	}
	seen := map[string]bool{}
	for _, c := range l.Columns {
		if c == "" || seen[c] {
			return errors.New("the columns need distinct names")
		}
		seen[c] = true
	}
	return nil
}

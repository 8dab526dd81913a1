package indexfile

import (
	"errors"
	"fmt"
	"strings"
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
	// Arrays are the dtype and shape of each column of LitData's
	// multi-dimensional arrays ("numpy", "tensor"), which a chunk stores
	// per item and a column has one of: learnt from the items when
	// indexed.
	Arrays map[string]LitArray `json:"arrays,omitempty"`
	// BlockSize, for a dataset written with LitData's TokensLoader, is
	// the tokens of a sample: each chunk's tokens cut every BlockSize, the
	// rest left out (0: LitData's default PyTreeLoader, a sample an item).
	BlockSize int64 `json:"blockSize,omitempty"`
	// CompressionLevel is how LitData's zstd wraps the chunks: "chunk"
	// (each one zstd stream), "batch" (framed: zstd frames of runs of
	// items) or "sample" (each item a frame); "" for none.
	CompressionLevel string `json:"compressionLevel,omitempty"`
}

// LitArray is the dtype (LitData's code for the column's data format:
// its numpy or torch table) and shape of every value of an array column.
type LitArray struct {
	DType int   `json:"dtype"`
	Shape []int `json:"shape"`
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
	if l.BlockSize < 0 || l.BlockSize > 0 && (len(l.Columns) != 1 || !strings.HasPrefix(l.DataFormats[0], "no_header_")) {
		return fmt.Errorf("a block size of %d for %d columns of %v: a TokensLoader dataset has one, a 1-D array", l.BlockSize, len(l.Columns), l.DataFormats)
	}
	switch l.CompressionLevel {
	case "", "chunk", "batch", "sample":
	default:
		return fmt.Errorf("compression level %q", l.CompressionLevel)
	}
	for c, a := range l.Arrays {
		if !seen[c] {
			return fmt.Errorf("an array of no column %q", c)
		}
		if a.DType < 0 {
			return fmt.Errorf("column %q: dtype %d", c, a.DType)
		}
		for _, d := range a.Shape {
			if d < 0 {
				return fmt.Errorf("column %q: shape %v", c, a.Shape)
			}
		}
	}
	return nil
}

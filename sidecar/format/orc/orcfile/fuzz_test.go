package orcfile

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// readFile reads every stripe of a whole file, as the format's index and
// the sidecar do in two steps.
func readFile(data []byte, maxBytes int) error {
	size := int64(len(data))
	n, err := TailLength(size, data[max(0, len(data)-TailSize):])
	if err != nil {
		return err
	}
	f, err := ParseTail(size, data[size-n:])
	if err != nil {
		return err
	}
	for i, s := range f.Stripes {
		rec, err := f.ReadStripe(data[s.Offset:s.Offset+s.Length()], i, nil, maxBytes, memory.DefaultAllocator)
		if err != nil {
			return err
		}
		rec.Release()
	}
	return nil
}

// FuzzReadFile: any bytes give stripes or an error, within the bound on
// what a stripe decompresses to. Seeds (testdata/fuzz) are files pyarrow
// wrote with test/orc/files.py: zstd, lz4, dictionary strings, RLE v1.
func FuzzReadFile(f *testing.F) {
	f.Add([]byte("ORC"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = readFile(data, 16<<20)
	})
}

// A stripe whose lengths overflow when added is refused by the tail.
func TestStripeLengthsThatOverflowAreRefused(t *testing.T) {
	f := footer{stripes: []StripeInfo{{Offset: 3, IndexLength: 1<<64 - 10, DataLength: 20, FooterLength: 1, Rows: 1}}, rows: 1}
	if err := checkStripes(f, 100); err == nil {
		t.Fatal("a stripe of 2^64-10 index bytes in a file of 100 was accepted")
	}
}

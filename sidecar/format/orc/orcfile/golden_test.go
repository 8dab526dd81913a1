package orcfile_test

// ORC files written by pyarrow and what pyarrow reads of them, recorded in
// testdata/golden (test/orc/files.py record; make golden): every
// compression pyarrow writes, dictionary-encoded strings and RLE v1 read
// back stripe by stripe as pyarrow reads them.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shardfeed/shardfeed/internal/testenv"
	orc "github.com/shardfeed/shardfeed/sidecar/format/orc/orcfile"
)

// openFile reads an ORC file and parses its tail, as a reader does: the
// file's bytes and the parsed tail, or the parse's error.
func openFile(t *testing.T, path string) ([]byte, *orc.File, error) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(data))
	n, err := orc.TailLength(size, data[max(0, len(data)-orc.TailSize):])
	if err != nil {
		t.Fatal(err)
	}
	f, err := orc.ParseTail(size, data[size-n:])
	return data, f, err
}

func TestPyarrowFilesReadAsPyarrowReadsThem(t *testing.T) {
	golden := testenv.Golden(t)
	var manifest struct {
		Cases map[string]struct {
			Rows    int    `json:"rows"`
			Answers string `json:"answers"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(testenv.GoldenFile(t, golden, "manifest.json"), &manifest); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		stripes int // at least
	}{{"uncompressed", 4}, {"zlib", 1}, {"snappy", 1}, {"zstd", 1}, {"lz4", 1}, {"dictionary", 2}, {"v0.11", 1}} {
		t.Run(c.name, func(t *testing.T) {
			rec, ok := manifest.Cases[c.name]
			if !ok {
				t.Fatalf("the recording has no file %s (make golden)", c.name)
			}
			data, f, err := openFile(t, filepath.Join(golden, c.name+".orc"))
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Stripes) < c.stripes {
				t.Errorf("%d stripes: the test wants %d or more", len(f.Stripes), c.stripes)
			}
			var got []string
			for i, s := range f.Stripes {
				rec, err := f.ReadStripe(data[s.Offset:s.Offset+s.Length()], i, nil, 0, memory.DefaultAllocator)
				if err != nil {
					t.Fatalf("stripe %d: %v", i, err)
				}
				for r := range int(rec.NumRows()) {
					got = append(got, testenv.Canonical(t, testenv.Row(rec, r, nil)))
				}
				rec.Release()
			}
			if len(got) != rec.Rows {
				t.Fatalf("read %d rows, pyarrow reads %d", len(got), rec.Rows)
			}
			testenv.CompareHashed(t, c.name, got, testenv.GoldenFile(t, golden, rec.Answers))
		})
	}
}

// A type not read yet is refused naming the column by its path (it named
// its type number, which no user can map to a column).
func TestAnUnsupportedTypeNamesItsColumn(t *testing.T) {
	_, _, err := openFile(t, filepath.Join(testenv.Golden(t), "unsupported.orc"))
	if err == nil || !strings.Contains(err.Error(), `column "meta.at" is ORC type timestamp`) {
		t.Fatalf("a timestamp in a struct: %v", err)
	}
}

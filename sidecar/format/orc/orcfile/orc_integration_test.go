//go:build integration

package orcfile_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shardfeed/shardfeed/internal/testenv"
	orc "github.com/shardfeed/shardfeed/sidecar/format/orc/orcfile"
)

// pyarrowFiles writes test/orc/files.py's files into a fresh directory.
func pyarrowFiles(t *testing.T, rows int) string {
	t.Helper()
	dir := t.TempDir()
	testenv.PythonScript(t, "venv", "test/orc/files.py", dir, fmt.Sprint(rows))
	return dir
}

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

// Every compression pyarrow writes, dictionary-encoded strings and RLE v1
// (file version 0.11) read back, stripe by stripe, as pyarrow reads them.
func TestIntegrationPyarrowFilesReadAsPyarrowReadsThem(t *testing.T) {
	dir := pyarrowFiles(t, 20000)
	for _, c := range []string{"uncompressed", "zlib", "snappy", "zstd", "lz4", "dictionary", "v0.11"} {
		t.Run(c, func(t *testing.T) {
			data, f, err := openFile(t, filepath.Join(dir, c+".orc"))
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Stripes) < 2 {
				t.Errorf("%d stripes: the test wants several", len(f.Stripes))
			}
			want, err := os.Open(filepath.Join(dir, c+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = want.Close() }()
			sc := bufio.NewScanner(want)
			sc.Buffer(nil, 1<<20)
			row := 0
			for i, s := range f.Stripes {
				rec, err := f.ReadStripe(data[s.Offset:s.Offset+s.Length()], i, nil, 0, memory.DefaultAllocator)
				if err != nil {
					t.Fatalf("stripe %d: %v", i, err)
				}
				for r := range int(rec.NumRows()) {
					m := testenv.Row(rec, r, nil)
					if !sc.Scan() {
						t.Fatalf("row %d: pyarrow read fewer rows", row)
					}
					got, exp := testenv.Canonical(t, m), testenv.Canonical(t, json.RawMessage(sc.Bytes()))
					if got != exp {
						t.Fatalf("stripe %d row %d (file row %d):\n got %s\nwant %s", i, r, row, got, exp)
					}
					row++
				}
				rec.Release()
			}
			if sc.Scan() || row != 20000 {
				t.Fatalf("read %d rows, pyarrow reads 20000", row)
			}
		})
	}
}

// A type not read yet is refused naming the column by its path (it named
// its type number, which no user can map to a column).
func TestIntegrationAnUnsupportedTypeNamesItsColumn(t *testing.T) {
	_, _, err := openFile(t, filepath.Join(pyarrowFiles(t, 10), "unsupported.orc"))
	if err == nil || !strings.Contains(err.Error(), `column "meta.at" is ORC type timestamp`) {
		t.Fatalf("a timestamp in a struct: %v", err)
	}
}

//go:build integration

package lancefile

import (
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/testenv"
)

// pylanceFiles writes small tables with pylance in every file version
// this reader decodes and the two it refuses, and returns their data
// files: real pages of every layout and encoding to mutate.
func pylanceFiles(tb testing.TB) [][]byte {
	tb.Helper()
	var files [][]byte
	for _, v := range []string{"2.0", "2.1", "2.2", "2.3", "legacy"} {
		root := tb.TempDir()
		testenv.PythonScript(tb, "venv-oracle", "test/oracle/lance_oracle.py", "write", filepath.Join(root, "t.lance"), "--case", "tiny", "--version", v)
		for _, dir := range []string{"t.lance", "t.lance-tab"} {
			err := filepath.WalkDir(filepath.Join(root, dir, "data"), func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || !strings.HasSuffix(path, ".lance") {
					return err
				}
				b, err := os.ReadFile(path)
				// Small files: the fuzzer mutates and minimizes whole
				// inputs, and crawls on files of hundreds of KiB.
				if err == nil && len(b) <= 256<<10 {
					files = append(files, b)
				}
				return err
			})
			if err != nil {
				tb.Fatal(err)
			}
		}
	}
	if len(files) == 0 {
		tb.Fatal("pylance wrote no data file")
	}
	return files
}

// FuzzPylanceFile is FuzzFile seeded with pylance's data files (run it
// with go test -tags integration -fuzz FuzzPylanceFile).
func FuzzPylanceFile(f *testing.F) {
	for _, b := range pylanceFiles(f) {
		f.Add(b)
	}
	f.Fuzz(fuzzFile)
}

// TestPylanceFilesMutated runs fuzzFile over a fixed series of mutations
// of pylance's files (bytes overwritten, flipped, cut and inserted,
// anywhere): the native fuzzer runs few inputs of this size a second, and
// this series is what found a bit-packing width read as a negative int and
// value offsets past their bytes.
func TestPylanceFilesMutated(t *testing.T) {
	files := pylanceFiles(t)
	rng := rand.New(rand.NewSource(1))
	for range 20000 {
		b := append([]byte(nil), files[rng.Intn(len(files))]...)
		for range 1 + rng.Intn(6) {
			i := rng.Intn(len(b))
			switch rng.Intn(4) {
			case 0:
				b[i] = byte(rng.Intn(256))
			case 1:
				b = append(b[:i], b[min(len(b), i+1+rng.Intn(8)):]...)
			case 2:
				b = append(b[:i], append(make([]byte, 1+rng.Intn(8)), b[i:]...)...)
			case 3:
				b[i] ^= 1 << rng.Intn(8)
			}
		}
		fuzzFile(t, b)
	}
}

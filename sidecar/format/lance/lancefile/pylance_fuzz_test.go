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

// recording is the Lance tables pylance wrote for the table reader's
// golden tests (lance_oracle.py record; make golden): every file version
// this reader decodes, and the two it refuses.
var recording = filepath.Join("..", "lancetable", "testdata", "golden")

// pylanceFiles returns the recording's data files: real pages of every
// layout and encoding to mutate.
func pylanceFiles(tb testing.TB) [][]byte {
	tb.Helper()
	var files [][]byte
	err := filepath.WalkDir(recording, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".lance") {
			return err
		}
		b, err := os.ReadFile(path)
		// Small files: the fuzzer mutates and minimizes whole inputs, and
		// crawls on files of hundreds of KiB.
		if err == nil && len(b) <= 64<<10 {
			files = append(files, b)
		}
		return err
	})
	if err != nil {
		tb.Fatalf("the recording (make golden): %v", err)
	}
	if len(files) < 20 {
		tb.Fatalf("%d small data files in %s: the recording should hold every file version's (make golden)", len(files), recording)
	}
	return files
}

// FuzzPylanceFile is FuzzFile seeded with pylance's data files (run it
// with go test -fuzz FuzzPylanceFile).
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
		fuzzFile(t, testenv.Mutate(rng, files[rng.Intn(len(files))], 6, true))
	}
}

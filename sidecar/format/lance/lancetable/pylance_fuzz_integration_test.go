//go:build integration

package lancetable

import (
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/shardfeed/shardfeed/internal/testenv"
)

// pylanceTableFiles writes a table with pylance (appends, deletions of
// both kinds, a tag, in both manifest namings) and returns its manifests,
// and its deletion files with whether each is a bitmap and its count.
func pylanceTableFiles(tb testing.TB) (manifests [][]byte, deletions []deletionSeed) {
	tb.Helper()
	for _, names := range [][]string{nil, {"--v1-names"}} {
		dir := filepath.Join(tb.TempDir(), "t.lance")
		testenv.PythonScript(tb, "venv-oracle", "test/oracle/lance_oracle.py", append([]string{"write", dir, "--case", "train", "--version", "2.2"}, names...)...)
		paths, _ := filepath.Glob(filepath.Join(dir, "_versions", "*.manifest"))
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				tb.Fatal(err)
			}
			manifests = append(manifests, b)
			m, err := ManifestAt(b, 0, int64(len(b)))
			if err != nil {
				tb.Fatalf("%s: %v", p, err)
			}
			for _, fr := range m.Fragments {
				if fr.Deletion == nil {
					continue
				}
				d, err := os.ReadFile(filepath.Join(dir, fr.Deletion.Path(fr.ID)))
				if err != nil {
					tb.Fatal(err)
				}
				deletions = append(deletions, deletionSeed{d, fr.Deletion.Bitmap, fr.Deletion.Deleted})
			}
		}
	}
	if len(manifests) == 0 || len(deletions) == 0 {
		tb.Fatalf("pylance wrote %d manifests and %d deletion files", len(manifests), len(deletions))
	}
	return manifests, deletions
}

type deletionSeed struct {
	b      []byte
	bitmap bool
	n      uint64
}

// FuzzPylanceManifest is FuzzManifest seeded with pylance's manifests (go
// test -tags integration -fuzz FuzzPylanceManifest).
func FuzzPylanceManifest(f *testing.F) {
	ms, _ := pylanceTableFiles(f)
	for _, b := range ms {
		f.Add(b)
	}
	f.Fuzz(fuzzManifest)
}

// FuzzPylanceDeleted is FuzzDeleted seeded with pylance's deletion files.
func FuzzPylanceDeleted(f *testing.F) {
	_, ds := pylanceTableFiles(f)
	for _, d := range ds {
		f.Add(d.b, d.bitmap, d.n)
	}
	f.Fuzz(fuzzDeleted)
}

// TestPylanceTableFilesMutated runs the manifest's and the deletion
// files' parsers over a fixed series of mutations of pylance's: an error,
// never a panic or an unbounded allocation.
func TestPylanceTableFilesMutated(t *testing.T) {
	ms, ds := pylanceTableFiles(t)
	rng := rand.New(rand.NewSource(1))
	mutate := func(b []byte) []byte {
		b = append([]byte(nil), b...)
		for range 1 + rng.Intn(4) {
			i := rng.Intn(len(b))
			switch rng.Intn(3) {
			case 0:
				b[i] = byte(rng.Intn(256))
			case 1:
				b = append(b[:i], b[min(len(b), i+1+rng.Intn(8)):]...)
			case 2:
				b[i] ^= 1 << rng.Intn(8)
			}
			if len(b) == 0 {
				break
			}
		}
		return b
	}
	for range 20000 {
		fuzzManifest(t, mutate(ms[rng.Intn(len(ms))]))
		d := ds[rng.Intn(len(ds))]
		if b := mutate(d.b); len(b) > 0 {
			_, _ = Deleted(&DeletionFile{Bitmap: d.bitmap, Deleted: d.n}, 1<<16, b)
		}
	}
}

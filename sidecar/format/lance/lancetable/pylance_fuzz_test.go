package lancetable

import (
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/testenv"
)

// pylanceTableFiles returns the manifests of the recording's tables
// (appends, deletions of both kinds, tags, schema changes, a compaction,
// both manifest namings) and their deletion files with whether each is a
// bitmap and its count.
func pylanceTableFiles(tb testing.TB) (manifests [][]byte, deletions []deletionSeed) {
	tb.Helper()
	root := filepath.Join("testdata", "golden")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".manifest") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		manifests = append(manifests, b)
		m, err := ManifestAt(b, 0, int64(len(b)))
		if err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
		table := filepath.Dir(filepath.Dir(path))
		for _, fr := range m.Fragments {
			if fr.Deletion == nil {
				continue
			}
			d, err := os.ReadFile(filepath.Join(table, fr.Deletion.Path(fr.ID)))
			if err != nil {
				return err
			}
			deletions = append(deletions, deletionSeed{d, fr.Deletion.Bitmap, fr.Deletion.Deleted})
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("the recording (make golden): %v", err)
	}
	if len(manifests) == 0 || len(deletions) == 0 {
		tb.Fatalf("the recording holds %d manifests and %d deletion files (make golden)", len(manifests), len(deletions))
	}
	return manifests, deletions
}

type deletionSeed struct {
	b      []byte
	bitmap bool
	n      uint64
}

// FuzzPylanceManifest is FuzzManifest seeded with pylance's manifests (go
// test -fuzz FuzzPylanceManifest).
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
	mutate := func(b []byte) []byte { return testenv.Mutate(rng, b, 4, false) }
	for range 20000 {
		fuzzManifest(t, mutate(ms[rng.Intn(len(ms))]))
		d := ds[rng.Intn(len(ds))]
		if b := mutate(d.b); len(b) > 0 {
			_, _ = Deleted(&DeletionFile{Bitmap: d.bitmap, Deleted: d.n}, 1<<16, b)
		}
	}
}

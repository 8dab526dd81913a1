package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// GoldenEnv names the folder a package's golden tests read instead of
// their testdata/golden: make test-golden re-records each oracle there with
// the pinned writers and readers (hack/golden.sh) and runs the same
// tests on what they wrote, so a writer that changed under its pin fails
// as surely as a reader.
const GoldenEnv = "SHARDFEED_GOLDEN"

// Golden returns the folder of the package's recorded oracle: what a
// format's own project wrote, and what its own reader returned
// (test/oracle/*_oracle.py record). It is testdata/golden beside the test,
// or the folder GoldenEnv names. A missing folder fails the test: a
// golden test that finds nothing to read proves nothing.
func Golden(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(GoldenEnv)
	if dir == "" {
		dir = filepath.Join("testdata", "golden")
	}
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err != nil {
		t.Fatalf("no recorded oracle in %s (%v): make golden records it", dir, err)
	}
	return dir
}

// GoldenFile reads one file of the recorded oracle (Golden).
func GoldenFile(t testing.TB, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		t.Fatalf("the recorded oracle: %v (make golden records it)", err)
	}
	return b
}

// GoldenCopy copies folders of the recorded oracle into one temporary
// folder, each over the ones before it (an index laid beside the inputs
// it indexes), for a test that edits what it reads; the recording itself
// stays as it was written. A copy keeps its file's modification time.
func GoldenCopy(t testing.TB, dir string, names ...string) string {
	t.Helper()
	to := t.TempDir()
	for _, name := range names {
		from := filepath.Join(dir, filepath.FromSlash(name))
		err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(from, path)
			if err != nil {
				return err
			}
			if d.IsDir() {
				return os.MkdirAll(filepath.Join(to, rel), 0o755)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(to, rel), b, 0o644); err != nil {
				return err
			}
			// Two copies of a file are one version of it (a local store's
			// ETag is its modification time).
			return os.Chtimes(filepath.Join(to, rel), info.ModTime(), info.ModTime())
		})
		if err != nil {
			t.Fatalf("copying the recorded oracle's %s: %v", name, err)
		}
	}
	return to
}

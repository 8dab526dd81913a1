package testenv

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
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
	return GoldenAt(t, filepath.Join("testdata", "golden"))
}

// GoldenAt is Golden for a recording another package owns (dir, relative
// to the test's package), or the folder GoldenEnv names.
func GoldenAt(t testing.TB, dir string) string {
	t.Helper()
	if env := os.Getenv(GoldenEnv); env != "" {
		dir = env
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

// GoldenHash is the first 16 hex digits of sha256 over a canonical line
// (Canonical): the hashed answer test/oracle/golden.py's go_hash records
// for a row too large to keep whole.
func GoldenHash(line string) string {
	sum := sha256.Sum256([]byte(line))
	return hex.EncodeToString(sum[:8])
}

// CompareHashed compares rows (canonical lines, Canonical) with a hashed
// answer file (golden.hashed: one JSON line a row, its hash, or the row
// itself as {"row": ...}), failing with the first differences: the rows
// the file keeps whole are shown, the others named by index.
func CompareHashed(t testing.TB, what string, got []string, answers []byte) {
	t.Helper()
	lines := bytes.Split(bytes.TrimSuffix(answers, []byte("\n")), []byte("\n"))
	if len(answers) == 0 {
		lines = nil
	}
	if len(got) != len(lines) {
		t.Fatalf("%s: %d rows, the oracle read %d", what, len(got), len(lines))
	}
	bad, whole := 0, 0
	for i, l := range lines {
		var hash string
		if err := json.Unmarshal(l, &hash); err == nil {
			if GoldenHash(got[i]) != hash {
				if bad++; bad <= 3 {
					t.Errorf("%s: row %d differs from the oracle's (hash %s, got %.600s)", what, i, hash, got[i])
				}
			}
			continue
		}
		var kept struct {
			Row any `json:"row"`
		}
		d := json.NewDecoder(bytes.NewReader(l))
		d.UseNumber()
		if err := d.Decode(&kept); err != nil || kept.Row == nil {
			t.Fatalf("%s: answer %d is neither a hash nor a row: %.200s", what, i, l)
		}
		whole++
		if want := Canonical(t, kept.Row); got[i] != want {
			if bad++; bad <= 3 {
				t.Errorf("%s: row %d:\n got %.600s\nwant %.600s", what, i, got[i], want)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d rows differ from the oracle's (%d kept whole)", what, bad, len(lines), whole)
	}
}

// RewriteEnv names a variable that, set to 1, makes MatchRecording write what the Go code made
// instead of comparing it: for recordings whose oracle is this project's
// own code (the hand-off's frames, which the clients' tests replay), not a
// format's project (those are make golden's).
const RewriteEnv = "SHARDFEED_REWRITE"

// MatchRecording fails unless dir holds exactly files (names to bytes);
// with RewriteEnv=1 it writes them there instead, removing any other file.
// what names the recording in the failure, with how to re-record it.
func MatchRecording(t testing.TB, dir, what string, files map[string][]byte) {
	t.Helper()
	if os.Getenv(RewriteEnv) == "1" {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("%s: %v (%s=1 records it)", what, err, RewriteEnv)
	}
	for _, e := range entries {
		if _, ok := files[e.Name()]; !ok {
			t.Errorf("%s: %s is recorded, and no longer made", what, e.Name())
		}
	}
	for name, data := range files {
		had, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %s is made, and not recorded: %v", what, name, err)
			continue
		}
		if !bytes.Equal(had, data) {
			at := 0
			for at < min(len(had), len(data)) && had[at] == data[at] {
				at++
			}
			t.Errorf("%s: %s differs from the recording at byte %d of %d (recorded %d): if on purpose, %s=1 re-records it",
				what, name, at, len(data), len(had), RewriteEnv)
		}
	}
}

// GoldenFiles lists the recorded oracle's files (under dir) whose names
// end in suffix; fewer than least fails the test, since a check over no
// files proves nothing.
func GoldenFiles(t testing.TB, dir, suffix string, least int) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, suffix) {
			out = append(out, path)
		}
		return err
	})
	if err != nil || len(out) < least {
		t.Fatalf("%d %s files in %s (%v), want at least %d: make golden records them", len(out), suffix, dir, err, least)
	}
	return out
}

package cache

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Derived files: kept and read back whole, counted in the cache's bytes,
// evicted like shards to make room, never kept past the limit, removed
// when their bytes change, and named by plain names only.
func TestDerivedFiles(t *testing.T) {
	dir := t.TempDir()
	c, err := New(Options{Dir: dir, LimitBytes: 300}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := bytes.Repeat([]byte("a"), 100), bytes.Repeat([]byte("b"), 100)
	if !c.StoreDerived("s", "k1", a) || !c.StoreDerived("s", "k2", b) {
		t.Fatal("files within the limit were not kept")
	}
	if got, ok := c.LoadDerived("s", "k1"); !ok || !bytes.Equal(got, a) {
		t.Fatalf("k1 read back as %q, %v", got, ok)
	}
	if used := c.Stats().UsedBytes; used != 2*(100+32) {
		t.Fatalf("the cache counts %d bytes for two files of 100 and their sums", used)
	}
	// A third evicts the least recently used (k2: k1 was just read).
	if !c.StoreDerived("s", "k3", a) {
		t.Fatal("k3 was not kept")
	}
	if _, ok := c.LoadDerived("s", "k2"); ok {
		t.Fatal("k2 was not evicted")
	}
	if _, ok := c.LoadDerived("s", "k1"); !ok {
		t.Fatal("k1, recently used, was evicted")
	}
	if c.StoreDerived("s", "big", bytes.Repeat([]byte("x"), 400)) {
		t.Fatal("a file over the limit was kept")
	}
	// A file whose bytes changed is not used, and is removed.
	path := filepath.Join(dir, derivedStream, "s", "k1")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[3] = 'z'
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.LoadDerived("s", "k1"); ok {
		t.Fatal("a changed file was used")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the changed file is still there: %v", err)
	}
	// A new cache on the directory finds the kept files.
	c2, err := New(Options{Dir: dir, LimitBytes: 300}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := c2.LoadDerived("s", "k3"); !ok || !bytes.Equal(got, a) {
		t.Fatalf("after a restart k3 read back as %q, %v", got, ok)
	}
	for _, bad := range [][2]string{{"", "k"}, {"s", ""}, {"../s", "k"}, {"s", "../k"}, {".s", "k"}, {"s", "a/b"}} {
		if c.StoreDerived(bad[0], bad[1], a) {
			t.Errorf("stream %q key %q was kept", bad[0], bad[1])
		}
	}
}

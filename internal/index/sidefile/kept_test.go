package sidefile

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
)

// Keep copies an index and the files beside it (not a checkpoint, not
// what was kept before) under the kept folder of its content hash.
func TestKeepCopiesAnIndexAndItsSideFiles(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"part-0.parquet": "data", indexfile.Key: `{"shardfeed": 1}`, indexfile.Dir + "/filter-ab.json": "sel", indexfile.Dir + "/index.partial.json": "cp",
		KeptDir + "0000000000000000000000000000000000000000000000000000000000000000/" + indexfile.Key: "older",
	}
	for key, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	st, err := stores.Open(ctx, store.Source{URI: "file://" + dir + "/"})
	if err != nil {
		t.Fatal(err)
	}
	hash := strings.Repeat("ab", 32)
	if n, err := Keep(ctx, st, hash); err != nil || n != 2 {
		t.Fatalf("Keep = %d, %v; want the index and its selection", n, err)
	}
	uri := "file://" + dir + "/" + KeptDir + hash + "/"
	kept, err := stores.Open(ctx, store.Source{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{indexfile.Key: `{"shardfeed": 1}`, indexfile.Dir + "/filter-ab.json": "sel"} {
		r, err := kept.Get(ctx, key, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(r)
		_ = r.Close()
		if string(got) != want {
			t.Fatalf("kept %s = %q, want %q", key, got, want)
		}
	}
	if _, err := kept.Stat(ctx, indexfile.Dir+"/index.partial.json"); err == nil {
		t.Fatal("a checkpoint was kept")
	}
	if _, err := Keep(ctx, st, "not-a-hash"); err == nil {
		t.Fatal("Keep took a hash that is none")
	}
}

//go:build integration

package litdata_test

// LitData datasets written by litdata.optimize itself (bin/venv-oracle,
// test/oracle/litdata_oracle.py), indexed by shardfeed index from their
// index.json and read chunk by chunk as a pod reads them: every item equals
// what litdata.StreamingDataset reads, in order; what shardfeed does not
// read is refused when indexed, naming it.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"image"
	_ "image/jpeg" // the JPEG leaves' shapes
	"strings"
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
)

func hexReader(t *testing.T, s string) *bytes.Reader {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(b)
}

func oracle(t *testing.T, args ...string) []byte {
	t.Helper()
	return testenv.PythonScript(t, "venv-oracle", "test/oracle/litdata_oracle.py", args...)
}

func canonicalLines(t *testing.T, out []byte) []string {
	t.Helper()
	var rs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<28)
	for sc.Scan() {
		var m map[string]any
		d := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, testenv.Canonical(t, m))
	}
	return rs
}

func openDir(t *testing.T, dir string) store.Store {
	t.Helper()
	st, err := stores.Open(context.Background(), store.Source{URI: "file://" + dir + "/"})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestLitDataServesStreamingDatasetItems(t *testing.T) {
	for _, kase := range []string{"mixed", "strings", "jpeg"} {
		t.Run(kase, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			oracle(t, "write", dir, "--case", kase)
			want := canonicalLines(t, oracle(t, "read", dir))
			ctx := context.Background()
			st := openDir(t, dir)
			f, err := formats.Default().Index(ctx, st, datav1alpha1.FormatLitData, format.IndexOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Shards) < 3 {
				t.Fatalf("%d chunks: the case writes several", len(f.Shards))
			}
			raw, _ := json.Marshal(f)
			l, err := index.ReadLayout(bytes.NewReader(raw))
			if err != nil {
				t.Fatalf("the index does not read back: %v", err)
			}
			r, err := formats.Default().Open(l)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for i, e := range f.Shards {
				var parts [][]byte
				for _, p := range r.Parts(i) {
					b, err := format.StoreRead(st)(ctx, p)
					if err != nil {
						t.Fatal(err)
					}
					parts = append(parts, b)
				}
				rr, err := r.Records(ctx, i, parts, nil)
				if err != nil {
					t.Fatalf("chunk %s: %v", e.Name, err)
				}
				for rr.Next() {
					rec := rr.RecordBatch()
					for j := range int(rec.NumRows()) {
						row := testenv.Row(rec, j, nil)
						if img, ok := row["image"].(string); ok { // StreamingDataset decodes it: compare shapes
							cfg, _, err := image.DecodeConfig(hexReader(t, img))
							if err != nil {
								t.Fatalf("chunk %s: the image is not a JPEG: %v", e.Name, err)
							}
							row["image"] = map[string]any{"shape": []int{3, cfg.Height, cfg.Width}}
						}
						got = append(got, testenv.Canonical(t, row))
					}
				}
				rr.Release()
			}
			if len(got) != len(want) {
				t.Fatalf("%d items served, litdata reads %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("item %d:\n got %.300s\nwant %.300s", i, got[i], want[i])
				}
			}
		})
	}
}

func TestLitDataRefusesWhatItDoesNotRead(t *testing.T) {
	for _, c := range []struct{ kase, want string }{
		{"nested", `a sample's "a" is a builtins.dict`},
		{"numpy2d", `LitData data format "numpy" is not read by shardfeed`},
	} {
		t.Run(c.kase, func(t *testing.T) {
			dir := t.TempDir()
			oracle(t, "write", dir, "--case", c.kase, "--items", "8")
			_, err := formats.Default().Index(context.Background(), openDir(t, dir), datav1alpha1.FormatLitData, format.IndexOptions{})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "index.json") {
				t.Fatalf("got %v, want an error naming index.json and saying %q", err, c.want)
			}
		})
	}
}

//go:build integration

package litdata_test

// LitData datasets written by litdata.optimize itself (bin/venv-oracle,
// test/oracle/litdata_oracle.py), indexed by shardfeed index from their
// index.json and read chunk by chunk as a pod reads them: every item equals
// what litdata.StreamingDataset reads, in order; what shardfeed does not
// read is refused when indexed, naming it.

import (
	"bytes"
	"context"
	"encoding/hex"
	"image"
	_ "image/jpeg" // the JPEG leaves' shapes
	"strings"
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
	"github.com/shardfeed/shardfeed/sidecar/format/formattest"
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

func TestLitDataServesStreamingDatasetItems(t *testing.T) {
	for _, kase := range []string{"mixed", "strings", "jpeg"} {
		t.Run(kase, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			oracle(t, "write", dir, "--case", kase)
			want := formattest.Lines(t, oracle(t, "read", dir))
			st := formattest.OpenDir(t, dir)
			f := formattest.Index(t, st, datav1alpha1.FormatLitData, format.IndexOptions{})
			if len(f.Shards) < 3 {
				t.Fatalf("%d chunks: the case writes several", len(f.Shards))
			}
			got := formattest.Rows(t, st, f, func(row map[string]any) {
				if img, ok := row["image"].(string); ok { // StreamingDataset decodes it: compare shapes
					cfg, _, err := image.DecodeConfig(hexReader(t, img))
					if err != nil {
						t.Fatalf("the image is not a JPEG: %v", err)
					}
					row["image"] = map[string]any{"shape": []int{3, cfg.Height, cfg.Width}}
				}
			})
			formattest.Compare(t, kase, "litdata", got, want)
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
			_, err := formats.Default().Index(context.Background(), formattest.OpenDir(t, dir), datav1alpha1.FormatLitData, format.IndexOptions{})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "index.json") {
				t.Fatalf("got %v, want an error naming index.json and saying %q", err, c.want)
			}
		})
	}
}

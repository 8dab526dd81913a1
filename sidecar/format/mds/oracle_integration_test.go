//go:build integration

package mds

// Datasets written here read back equal by the real mosaicml-streaming
// package's StreamingDataset (bin/venv-oracle, test/oracle/mds_oracle.py).
// (The other way, datasets MDSWriter writes decoded here, is
// golden_test.go, from a recording.)

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/shardfeed/shardfeed/internal/testenv"
)

func oracle(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	return jsonLines(t, testenv.PythonScript(t, "venv-oracle", "test/oracle/mds_oracle.py", args...))
}

func pngBytes(t *testing.T, w, h int, seed byte) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{seed + byte(x), byte(y), 7, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestIntegrationMosaicMLStreamingReadsWhatShardfeedWrites(t *testing.T) {
	cols := []Column{
		{"b", "bytes"}, {"s", "str"}, {"i", "int"}, {"u64", "uint64"}, {"i8", "int8"}, {"f32", "float32"}, {"f64", "float64"},
		{"si", "str_int"}, {"sf", "str_float"}, {"sd", "str_decimal"}, {"j", "json"},
		{"tok", "ndarray:int32:4"}, {"dyn", "ndarray:int32"}, {"any", "ndarray"}, {"pn", "png"}, {"lp", "list[png]"},
	}
	// Every dataset is written first and read by one oracle process (each
	// start imports torch).
	comps := []string{"", "zstd:3", "gz", "br", "snappy"}
	const n = 30
	var dirs []string
	for k, comp := range comps {
		dir := filepath.Join(t.TempDir(), fmt.Sprint(k))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		w, err := NewWriter(WriterOptions{
			Columns: cols, Compression: comp, Hashes: []string{"sha1", "xxh64"}, SizeLimit: 1500,
			Put: func(name string, data []byte) error { return os.WriteFile(filepath.Join(dir, name), data, 0o600) },
		})
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			s := sampleFor(i)
			s["pn"] = pngBytes(t, 2+i%3, 3, byte(i))
			s["lp"] = [][]byte{pngBytes(t, 1, 1, byte(i)), pngBytes(t, 4, 2, 9)}
			if err := w.Write(s); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if len(w.Index().Shards) < 2 {
			t.Fatalf("compression %q: want several shards, got %d", comp, len(w.Index().Shards))
		}
		dirs = append(dirs, dir)
	}
	read := map[string][]map[string]any{}
	var rows []map[string]any
	for _, row := range oracle(t, append([]string{"read"}, dirs...)...) {
		if end, ok := row["__end__"].(string); ok {
			read[end], rows = rows, nil
			continue
		}
		rows = append(rows, row)
	}
	for k, comp := range comps {
		t.Run("compression="+comp, func(t *testing.T) {
			dir := dirs[k]
			got := read[dir]
			ours := readDir(t, dir)
			if len(got) != n || len(ours) != n {
				t.Fatalf("mosaicml-streaming read %d samples, shardfeed %d; wrote %d", len(got), len(ours), n)
			}
			for i := range n {
				for col, v := range got[i] {
					if col == "pn" || col == "lp" {
						continue // decoded to pixels there: checked below
					}
					if !sameJSON(ours[i][col], v) {
						gb, _ := json.Marshal(ours[i][col])
						wb, _ := json.Marshal(v)
						t.Fatalf("sample %d column %s: mosaicml-streaming read %.300s, shardfeed wrote %.300s", i, col, wb, gb)
					}
				}
				pn := got[i]["pn"].(map[string]any)
				if size := fmt.Sprint(pn["size"]); size != fmt.Sprintf("[%d 3]", 2+i%3) || pn["mode"] != "RGB" && pn["mode"] != "RGBA" {
					t.Fatalf("sample %d png decoded as %v %v", i, pn["mode"], size)
				}
				if lp := got[i]["lp"].([]any); len(lp) != 2 {
					t.Fatalf("sample %d list[png] has %d images", i, len(lp))
				}
			}
		})
	}
}

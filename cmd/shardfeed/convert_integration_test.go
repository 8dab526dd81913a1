//go:build integration

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/testenv"
)

// The MDS that convert writes is read by the real mosaicml-streaming.
func TestIntegrationConvertJSONLToMDSReadByMosaicMLStreaming(t *testing.T) {
	src, out := t.TempDir(), t.TempDir()
	var b strings.Builder
	for i := range 400 {
		fmt.Fprintf(&b, "{\"id\": %d, \"text\": \"sample %d\", \"tokens\": [%d, 7, 8], \"score\": %d.5, \"meta\": {\"k\": %d}}\n", i, i, i, i, i%3)
	}
	if err := os.WriteFile(filepath.Join(src, "part-0.jsonl"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := runCLI(t, "convert", "file://"+src+"/", "--from", "jsonl", "--to", "mds", "--out", "file://"+out+"/",
		"--shard-size", "4KiB", "--compression", "zstd:3", "--hashes", "sha1,xxh64")
	if err != nil || !strings.Contains(res, "400 samples in") {
		t.Fatalf("convert: %v\n%s", err, res)
	}
	stdout := bytes.NewReader(testenv.PythonScript(t, "venv-oracle", "test/oracle/mds_oracle.py", "read", out))
	sc := bufio.NewScanner(stdout)
	i := 0
	for ; sc.Scan(); i++ {
		var s map[string]any
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatal(err)
		}
		tokens := s["tokens"].(map[string]any)
		// meta, an object, is a struct: MDS's json encoding, a dict to the reader.
		meta, _ := s["meta"].(map[string]any)
		if s["id"] != float64(i) || s["text"] != fmt.Sprintf("sample %d", i) || s["score"] != float64(i)+0.5 ||
			tokens["dtype"] != "int64" || fmt.Sprint(tokens["shape"]) != "[3]" || len(meta) != 1 || meta["k"] != float64(i%3) {
			t.Fatalf("sample %d read by mosaicml-streaming = %v", i, s)
		}
	}
	if i != 400 {
		t.Fatalf("mosaicml-streaming read %d samples, want 400", i)
	}
}

// A Lance dataset converts to Parquet that pyarrow reads as pylance reads
// the dataset: every live row, in order, each value (nulls included), in
// file versions 2.0 and 2.2.
func TestIntegrationConvertLanceToParquetReadByPyarrow(t *testing.T) {
	for _, version := range []string{"2.0", "2.2"} {
		t.Run(version, func(t *testing.T) {
			root, out := t.TempDir(), t.TempDir()
			testenv.PythonScript(t, "venv-oracle", "test/oracle/lance_oracle.py", "write", filepath.Join(root, "t.lance"), "--case", "tiny", "--version", version)
			ds := filepath.Join(root, "t.lance-tab")
			res, err := runCLI(t, "convert", "file://"+ds+"/", "--from", "lance", "--to", "parquet", "--out", "file://"+out+"/", "--shard-size", "16KiB")
			if err != nil || !strings.Contains(res, "300 samples in") {
				t.Fatalf("convert: %v\n%s", err, res)
			}
			var want []string
			for _, line := range strings.Split(strings.TrimSpace(string(testenv.PythonScript(t, "venv-oracle", "test/oracle/lance_oracle.py", "read", ds))), "\n") {
				var row map[string]any
				if err := json.Unmarshal([]byte(line), &row); err != nil {
					t.Fatal(err)
				}
				delete(row, "_rowaddr")
				b, _ := json.Marshal(row)
				want = append(want, string(b))
			}
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(string(testenv.PythonScript(t, "venv-oracle", "test/oracle/lance_oracle.py", "read-parquet", out))), "\n") {
				var row map[string]any
				if err := json.Unmarshal([]byte(line), &row); err != nil {
					t.Fatal(err)
				}
				b, _ := json.Marshal(row)
				got = append(got, string(b))
			}
			if len(got) != len(want) {
				t.Fatalf("pyarrow reads %d rows of the Parquet, pylance %d of the dataset", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("row %d:\n got %.500s\nwant %.500s", i, got[i], want[i])
				}
			}
		})
	}
}

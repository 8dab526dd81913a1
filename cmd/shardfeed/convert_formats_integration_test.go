//go:build integration

package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formattest"
)

// Each format of the formats issue converts to Parquet that pyarrow reads
// row for row as shardfeed serves the source (whose rows the formats' own
// tests check against their projects' readers); Megatron tokens convert to
// MDS that mosaicml-streaming reads.
func TestIntegrationConvertTheNewFormats(t *testing.T) {
	for _, c := range []struct {
		kind  datav1alpha1.ShardFormat
		write func(t *testing.T, dir string) string // the stream's directory
		opts  format.IndexOptions                   // and convert's flags for them
		flags []string
	}{
		{datav1alpha1.FormatMegatron, func(t *testing.T, dir string) string {
			testenv.PythonScript(t, "venv-oracle", "test/oracle/megatron_oracle.py", "write", filepath.Join(dir, "docs"), "--case", "sentences", "--docs", "120")
			return dir
		}, format.IndexOptions{}, nil},
		{datav1alpha1.FormatWebDataset, func(t *testing.T, dir string) string {
			testenv.PythonScript(t, "venv-oracle", "test/oracle/webdataset_oracle.py", "write", dir, "--tars", "2", "--samples", "10")
			return dir
		}, format.IndexOptions{}, nil},
		{datav1alpha1.FormatHuggingFace, func(t *testing.T, dir string) string {
			var w struct{ Stream string }
			if err := json.Unmarshal(testenv.PythonScript(t, "venv-hf", "test/oracle/hf_oracle.py", "write", dir, "--case", "disk", "--rows", "200"), &w); err != nil {
				t.Fatal(err)
			}
			return w.Stream
		}, format.IndexOptions{}, nil},
		{datav1alpha1.FormatLitData, func(t *testing.T, dir string) string {
			testenv.PythonScript(t, "venv-oracle", "test/oracle/litdata_oracle.py", "write", dir, "--case", "mixed", "--items", "40")
			return dir
		}, format.IndexOptions{}, nil},
		{datav1alpha1.FormatLitData, func(t *testing.T, dir string) string {
			testenv.PythonScript(t, "venv-oracle", "test/oracle/litdata_oracle.py", "write", dir, "--case", "tokens")
			return dir
		}, format.IndexOptions{Own: map[string]string{"block-size": "64"}}, []string{"--block-size", "64"}},
	} {
		t.Run(strings.Join(append([]string{string(c.kind)}, c.flags...), " "), func(t *testing.T) {
			t.Parallel()
			src, out := c.write(t, t.TempDir()), t.TempDir()
			st := formattest.OpenDir(t, src)
			want := formattest.Rows(t, st, formattest.Index(t, st, c.kind, c.opts), nil)
			res, err := runCLI(t, append([]string{"convert", "file://" + src + "/", "--from", string(c.kind), "--to", "parquet", "--out", "file://" + out + "/",
				"--shard-size", "16KiB"}, c.flags...)...)
			if err != nil || !strings.Contains(res, fmt.Sprintf("%d samples in", len(want))) {
				t.Fatalf("convert: %v\n%s", err, res)
			}
			got := formattest.Lines(t, testenv.PythonScript(t, "venv-oracle", "test/oracle/lance_oracle.py", "read-parquet", out))
			if len(got) != len(want) {
				t.Fatalf("pyarrow reads %d rows of the Parquet, shardfeed serves %d of the %s stream", len(got), len(want), c.kind)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("row %d:\n got %.400s\nwant %.400s", i, got[i], want[i])
				}
			}
			if c.kind != datav1alpha1.FormatMegatron {
				return
			}
			mdsOut := t.TempDir()
			if res, err := runCLI(t, "convert", "file://"+src+"/", "--from", "megatron", "--to", "mds", "--out", "file://"+mdsOut+"/"); err != nil {
				t.Fatalf("convert to MDS: %v\n%s", err, res)
			}
			read := formattest.Lines(t, testenv.PythonScript(t, "venv-oracle", "test/oracle/mds_oracle.py", "read", mdsOut))
			if len(read) != len(want) {
				t.Fatalf("mosaicml-streaming reads %d samples of the MDS, the stream has %d", len(read), len(want))
			}
			for i, row := range read {
				var s struct{ Tokens struct{ Shape []int } }
				var w struct{ Tokens []int }
				_ = json.Unmarshal([]byte(row), &s)
				_ = json.Unmarshal([]byte(want[i]), &w)
				if len(s.Tokens.Shape) != 1 || s.Tokens.Shape[0] != len(w.Tokens) {
					t.Fatalf("sample %d: mosaicml-streaming reads tokens of shape %v, the document has %d", i, s.Tokens.Shape, len(w.Tokens))
				}
			}
		})
	}
}

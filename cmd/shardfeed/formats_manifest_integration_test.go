//go:build integration

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/testenv"
)

// index -f takes a webdataset stream's tars (a brace pattern) and column
// types, a megatron stream's unit and a litdata stream's block size, from
// the manifest's stream.
func TestIntegrationIndexFromManifestTakesTheFormatsSections(t *testing.T) {
	dir := t.TempDir()
	wds, meg := filepath.Join(dir, "wds"), filepath.Join(dir, "meg")
	testenv.PythonScript(t, "venv-oracle", "test/oracle/webdataset_oracle.py", "write", wds, "--tars", "4", "--samples", "3")
	if err := os.MkdirAll(meg, 0o755); err != nil {
		t.Fatal(err)
	}
	var written struct{ Sequences, Documents int64 }
	if err := json.Unmarshal(testenv.PythonScript(t, "venv-oracle", "test/oracle/megatron_oracle.py", "write", filepath.Join(meg, "d"), "--case", "sentences", "--docs", "50"), &written); err != nil {
		t.Fatal(err)
	}
	lit := filepath.Join(dir, "lit")
	testenv.PythonScript(t, "venv-oracle", "test/oracle/litdata_oracle.py", "write", lit, "--case", "tokens")
	manifest := filepath.Join(dir, "ds.yaml")
	if err := os.WriteFile(manifest, fmt.Appendf(nil, `apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {name: sections}
spec:
  streams:
  - name: images
    format: webdataset
    source: {uri: "file://%s/"}
    webdataset:
      shards: "shards-{000001..000002}.tar"
      columns: [{name: json, type: binary}]
  - name: tokens
    format: megatron
    source: {uri: "file://%s/"}
    megatron: {unit: sequence}
  - name: blocks
    format: litdata
    source: {uri: "file://%s/"}
    litdata: {blockSize: 64}
  missingColumns: "null"
  numSplits: 2
  globalBatchSize: 4
`, wds, meg, lit), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"images", "tokens", "blocks"} {
		if out, err := runCLI(t, "index", "-f", manifest, "--stream", s); err != nil {
			t.Fatalf("index %s: %v\n%s", s, err, out)
		}
	}
	read := func(d string) *indexfile.File {
		var f indexfile.File
		data, err := os.ReadFile(filepath.Join(d, "_shardfeed", "index.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		return &f
	}
	images := read(wds)
	var objects []string
	for _, e := range images.Shards {
		objects = append(objects, e.Object)
	}
	if strings.Join(objects, ",") != "shards-000001.tar,shards-000002.tar" {
		t.Fatalf("the pattern indexed %v", objects)
	}
	if i := slices.IndexFunc(images.Schema, func(f indexfile.Field) bool { return f.Name == "json" }); i < 0 || images.Schema[i].Type != "binary" {
		t.Fatalf("schema %v: json should be binary, as the manifest types it", images.Schema)
	}
	tokens := read(meg)
	if tokens.Megatron.Unit != "sequence" || tokens.StreamIndex().Samples() != written.Sequences || written.Sequences <= written.Documents {
		t.Fatalf("indexed %+v with %d samples; the dataset has %d sequences in %d documents", tokens.Megatron, tokens.StreamIndex().Samples(), written.Sequences, written.Documents)
	}
	if out, err := runCLI(t, "index", "-f", manifest, "--stream", "tokens", "--unit", "document"); err == nil || !strings.Contains(out+err.Error(), "--unit comes from the manifest's stream") {
		t.Fatalf("--unit with -f: %v\n%s", err, out)
	}
	blocks := read(lit)
	if blocks.LitData.BlockSize != 64 || blocks.StreamIndex().Samples() != 40 {
		t.Fatalf("indexed %+v with %d samples; the dataset has 40 blocks of 64 tokens", blocks.LitData, blocks.StreamIndex().Samples())
	}
	// plan and simulate read the two streams, their schemas joined
	// (spec.missingColumns: null) as serve would join them.
	out, err := runCLI(t, "plan", "-f", manifest, "--summary")
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	samples := images.StreamIndex().Samples() + tokens.StreamIndex().Samples() + blocks.StreamIndex().Samples()
	if !strings.Contains(out, fmt.Sprint(samples)) {
		t.Fatalf("plan --summary does not count the streams' %d samples:\n%s", samples, out)
	}
	if out, err := runCLI(t, "simulate", "-f", manifest, "--pods", "2", "--bandwidth", "100MB/s", "--step-time", "10ms"); err != nil || !strings.Contains(out, "dataset sections, epoch 0: ") || !strings.Contains(out, "POD  SHARDS  BYTES/EPOCH") {
		t.Fatalf("simulate: %v\n%s", err, out)
	}
}

package main

import (
	"encoding/json"
	"slices"
	"testing"
)

// `shardfeed formats --json` is what the Python client reads its list of
// formats from: every format of the registry, with how it is indexed.
func TestFormatsListsTheRegistry(t *testing.T) {
	out, err := runCLI(t, "formats", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []formatRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	by := map[string]formatRow{}
	for _, r := range rows {
		by[r.Name] = r
	}
	for name, want := range map[string]string{"lance": "table", "iceberg": "table", "mds": "own", "parquet": "objects", "webdataset": "objects", "huggingface": "objects"} {
		if by[name].Index != want {
			t.Errorf("%s: index %q, want %q", name, by[name].Index, want)
		}
	}
	if !slices.Contains(by["webdataset"].Suffixes, ".tar") || len(by["lance"].Suffixes) != 0 {
		t.Errorf("suffixes: webdataset %v, lance %v", by["webdataset"].Suffixes, by["lance"].Suffixes)
	}
}

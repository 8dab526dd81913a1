package index

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"

	"github.com/shardfeed/shardfeed/internal/index/compact"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store/local"
)

func TestReadBothForms(t *testing.T) {
	tests := []struct {
		name, data   string
		wantSamples  int64
		wantFirstKey string
		wantErr      string
	}{
		{
			name:        "list of shards",
			data:        `{"shards": [{"name": "a.parquet", "samples": 5, "bytes": 50, "hash": "sha256:00"}, {"name": "b.parquet", "samples": 3, "bytes": 30}]}`,
			wantSamples: 8, wantFirstKey: "a.parquet",
		},
		{
			name: "mds",
			data: `{"version": 2, "shards": [{"column_encodings": ["int"], "column_names": ["x"], "column_sizes": [8], "compression": null, "format": "mds",
				"hashes": [], "raw_data": {"basename": "shard.00000.mds", "bytes": 100, "hashes": {}}, "samples": 4, "size_limit": 1, "version": 2, "zip_data": null}]}`,
			wantSamples: 4, wantFirstKey: "shard.00000.mds",
		},
		{name: "unknown field", data: `{"shards": [{"name": "a", "samples": 1, "bytes": 1, "rows": 2}]}`, wantErr: "unknown field"},
		{name: "empty", data: `{"shards": []}`, wantErr: "no shards"},
		{name: "nameless shard", data: `{"shards": [{"samples": 1, "bytes": 1}]}`, wantErr: "needs a name"},
		{name: "garbage", data: `shards`, wantErr: "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, err := Read(strings.NewReader(tt.data))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Read = %v, want error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if x.Samples() != tt.wantSamples || x.Shards[0].Name != tt.wantFirstKey {
				t.Fatalf("Read = %+v", x)
			}
		})
	}
}

func TestReadDirNamesTheFileOnError(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, indexfile.FileName), []byte(`{"version": 3, "shards": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ReadDir(dir)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, indexfile.FileName)) || !strings.Contains(err.Error(), "version 3") {
		t.Fatalf("ReadDir = %v, want an error naming the file and the version", err)
	}
}

// An MDS index.json has no compact form: the check names that rather than
// failing a type assertion (it once panicked).
func TestCheckCompactRefusesAnMDSIndex(t *testing.T) {
	mds := `{"version": 2, "shards": [{"column_encodings": ["int"], "column_names": ["x"], "column_sizes": [8], "compression": null, "format": "mds",
		"hashes": [], "raw_data": {"basename": "shard.00000.mds", "bytes": 100, "hashes": {}}, "samples": 4, "size_limit": 1, "version": 2, "zip_data": null}]}`
	tests := []struct{ name, data, wantErr string }{
		{name: "mds", data: mds, wantErr: "an MDS index.json, which has no compact form"},
		{name: "shardfeed", data: `{"shardfeed": 1, "format": "parquet", "shards": [
			{"name": "a.parquet#0", "object": "a.parquet", "part": 0, "offset": 4, "length": 100, "samples": 10, "hash": "xxh64:0123456789abcdef", "objectSize": 300, "footerOffset": 204, "footerLength": 96}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkCompact([]byte(tt.data))
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("checkCompact = %v, want error %q", err, tt.wantErr)
			}
		})
	}
}

// WriteForm writes one form and removes the other; the store's readers
// find either; auto writes JSON for a small index.
func TestWriteFormReplacesTheOtherForm(t *testing.T) {
	st := local.OpenDir(t.TempDir())
	ctx := context.Background()
	f, err := indexfile.Parse([]byte(`{"shardfeed": 1, "format": "parquet", "shards": [
		{"name": "a.parquet#0", "object": "a.parquet", "part": 0, "offset": 4, "length": 100, "samples": 10, "hash": "xxh64:0123456789abcdef", "objectSize": 300, "footerOffset": 204, "footerLength": 96},
		{"name": "a.parquet#1", "object": "a.parquet", "part": 1, "offset": 104, "length": 100, "samples": 9, "hash": "xxh64:00000000000000ff", "objectSize": 300, "footerOffset": 204, "footerLength": 96},
		{"name": "b.parquet#0", "object": "b.parquet", "part": 0, "offset": 4, "length": 70000, "samples": 1000, "hash": "xxh64:ffffffffffffffff", "objectSize": 70200, "footerOffset": 70004, "footerLength": 196}]}`))
	if err != nil {
		t.Fatal(err)
	}
	exists := func(key string) bool {
		_, err := st.Stat(ctx, key)
		return err == nil
	}
	for _, tt := range []struct {
		form       Form
		want, gone string
	}{{FormCompact, compact.Key, indexfile.Key}, {FormAuto, indexfile.Key, compact.Key}, {FormCompact, compact.Key, indexfile.Key}, {FormJSON, indexfile.Key, compact.Key}} {
		key, err := WriteForm(ctx, st, f, tt.form)
		if err != nil || key != tt.want || !exists(tt.want) || exists(tt.gone) {
			t.Fatalf("WriteForm(%s) = %q, %v; %s there: %t, %s there: %t", tt.form, key, err, tt.want, exists(tt.want), tt.gone, exists(tt.gone))
		}
		l, x, err := ReadStoreIndexOf(ctx, st, 0, datav1alpha1.FormatParquet)
		if err != nil || !reflect.DeepEqual(l.File, f) || x.ContentHash() != f.StreamIndex().ContentHash() {
			t.Fatalf("read back after WriteForm(%s): %v", tt.form, err)
		}
	}
	if _, err := WriteForm(ctx, st, f, "yaml"); err == nil || !strings.Contains(err.Error(), "not one of auto, json, compact") {
		t.Fatalf("WriteForm(yaml) = %v", err)
	}
	// Opened in parts from the store: the header, then shards by ranges.
	if _, err := WriteForm(ctx, st, f, FormCompact); err != nil {
		t.Fatal(err)
	}
	r, err := compact.Open(ctx, st, compact.Key, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Entries(1, 3)
	if err != nil || !reflect.DeepEqual(got, f.Shards[1:3]) {
		t.Fatalf("Entries(1, 3) = %+v, %v", got, err)
	}
	if _, err := compact.Open(ctx, st, compact.Key, 100); err == nil || !strings.Contains(err.Error(), "maxIndexBytes") {
		t.Fatalf("compact.Open with a cap of 100 bytes = %v, want the cap's error naming what to raise", err)
	}
}

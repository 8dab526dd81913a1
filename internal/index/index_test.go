package index

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(`{"version": 3, "shards": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ReadDir(dir)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, FileName)) || !strings.Contains(err.Error(), "version 3") {
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

package mdsindex

import (
	"strings"
	"testing"
)

const validIndex = `{"version": 2, "shards": [
 {"column_encodings": ["int", "str"], "column_names": ["id", "text"], "column_sizes": [8, null],
  "compression": null, "format": "mds", "hashes": ["sha1", "xxh64"],
  "raw_data": {"basename": "shard.00000.mds", "bytes": 1234, "hashes": {"sha1": "aa", "xxh64": "bb"}},
  "samples": 10, "size_limit": 67108864, "version": 2, "zip_data": null},
 {"column_encodings": ["int", "str"], "column_names": ["id", "text"], "column_sizes": [8, null],
  "compression": "zstd:7", "format": "mds", "hashes": [],
  "raw_data": {"basename": "shard.00001.mds", "bytes": 2000, "hashes": {}},
  "samples": 7, "size_limit": 67108864, "version": 2,
  "zip_data": {"basename": "shard.00001.mds.zstd", "bytes": 900, "hashes": {}}}
]}`

func TestReadIndexGivesThePlannerTheStoredFiles(t *testing.T) {
	x, err := Read(strings.NewReader(validIndex))
	if err != nil {
		t.Fatal(err)
	}
	si := x.StreamIndex()
	if len(si.Shards) != 2 || si.Samples() != 17 || si.Bytes() != 1234+900 {
		t.Fatalf("stream index = %+v", si)
	}
	if s := si.Shards[0]; s.Name != "shard.00000.mds" || s.Hash != "sha1:aa" {
		t.Errorf("shard 0 = %+v, want the raw file with its strongest hash", s)
	}
	if s := si.Shards[1]; s.Name != "shard.00001.mds.zstd" || s.Bytes != 900 || s.Hash != "" {
		t.Errorf("shard 1 = %+v, want the compressed file", s)
	}
}

func TestReadIndexRejectsBrokenIndexes(t *testing.T) {
	tests := []struct {
		name, index, want string
	}{
		{"not json", `{"version": 2,`, "not valid JSON"},
		{"trailing data", `{"version": 2, "shards": []} {}`, "after top-level value"},
		{"old version", `{"version": 1, "shards": []}`, "version 1 is not supported"},
		{"no shards", `{"version": 2, "shards": []}`, "no shards"},
		{"other format", strings.Replace(validIndex, `"format": "mds"`, `"format": "json"`, 1), `format "json"`},
		{"negative samples", strings.Replace(validIndex, `"samples": 10`, `"samples": -1`, 1), "negative sample count"},
		{"path in name", strings.Replace(validIndex, `"basename": "shard.00000.mds"`, `"basename": "../etc/passwd"`, 1), "not a plain file name"},
		{"compression without zip", strings.Replace(validIndex, `"compression": null`, `"compression": "zstd"`, 1), "disagree"},
		{"duplicate shard", strings.Replace(validIndex, `shard.00001.mds.zstd`, `shard.00000.mds`, 1), "also shards[0]"},
		{"column mismatch", strings.Replace(validIndex, `"column_names": ["id", "text"]`, `"column_names": ["id"]`, 1), "1 column names but 2 encodings"},
		{"missing raw data", strings.Replace(validIndex, `"raw_data": {"basename": "shard.00000.mds", "bytes": 1234, "hashes": {"sha1": "aa", "xxh64": "bb"}}`, `"raw_data": null`, 1), "raw_data is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tt.index))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ReadIndex = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

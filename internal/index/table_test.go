package index

import (
	"fmt"
	"strings"
	"testing"
)

// icebergIndex is an iceberg index of one row group of 10 rows, with the
// given table and deleted runs spliced in.
func icebergIndex(table, deleted string, samples int) string {
	return fmt.Sprintf(`{"shardfeed": 1, "format": "iceberg", %s "shards": [{"name": "db/t/data/a.parquet#0", "object": "db/t/data/a.parquet",
		"part": 0, "offset": 4, "length": 100, "samples": %d, "hash": "xxh64:00", "objectSize": 200, "footerOffset": 104, "footerLength": 96,
		"rows": 10 %s}]}`, table, samples, deleted)
}

const goodTable = `"table": {"catalog": "rest http://rest:8181", "name": "db.t", "location": "s3://wh/db/t", "snapshot": 42, "schemaID": 0,
	"arrowSchema": "AAAA", "root": "s3://wh/", "deleteFiles": [{"path": "s3://wh/db/t/data/d.parquet", "content": "position", "rows": 3}]},`

func TestReadIcebergIndex(t *testing.T) {
	tests := []struct {
		name, data string
		wantErr    string
	}{
		{"deletes applied", icebergIndex(goodTable, `, "deleted": [[0, 1], [5, 7]]`, 7), ""},
		{"no deletes", icebergIndex(goodTable, ``, 10), ""},
		{"samples not rows less deleted", icebergIndex(goodTable, `, "deleted": [[0, 1]]`, 10), "samples 10 is not its 10 rows less 1 deleted"},
		{"overlapping runs", icebergIndex(goodTable, `, "deleted": [[0, 3], [2, 4]]`, 6), "sorted, disjoint"},
		{"run past the rows", icebergIndex(goodTable, `, "deleted": [[8, 11]]`, 7), "within its 10 rows"},
		{"empty run", icebergIndex(goodTable, `, "deleted": [[3, 3]]`, 10), "non-empty run"},
		{"no table", icebergIndex(``, ``, 10), `no "table"`},
		{"no snapshot", icebergIndex(strings.Replace(goodTable, `"snapshot": 42`, `"snapshot": 0`, 1), ``, 10), `"snapshot" is missing`},
		{"schema not base64", icebergIndex(strings.Replace(goodTable, `"AAAA"`, `"!!"`, 1), ``, 10), "not base64"},
		{"root not a bucket", icebergIndex(strings.Replace(goodTable, `"s3://wh/"`, `"wh"`, 1), ``, 10), "not a bucket URI"},
		{"unknown delete content", icebergIndex(strings.Replace(goodTable, `"position"`, `"vector"`, 1), ``, 10), `content "position" or "equality"`},
		{"unknown table key", icebergIndex(strings.Replace(goodTable, `"schemaID"`, `"schemaId"`, 1), ``, 10), "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ReadLayout(strings.NewReader(tt.data))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ReadLayout = %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.Index.Snapshot != "42" {
				t.Errorf("Snapshot = %q, want 42: the snapshot is a plan input", l.Index.Snapshot)
			}
		})
	}
}

// A table on any other format is refused: only tables have snapshots.
func TestATableOnlyOnIcebergIndexes(t *testing.T) {
	data := strings.Replace(icebergIndex(goodTable, ``, 10), `"format": "iceberg"`, `"format": "parquet"`, 1)
	if _, err := ReadLayout(strings.NewReader(data)); err == nil || !strings.Contains(err.Error(), `format "parquet" has a "table"`) {
		t.Fatalf("ReadLayout = %v, want a refusal", err)
	}
}

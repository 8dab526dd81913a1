package icebergindex

import (
	"testing"

	"github.com/apache/iceberg-go"
)

const seedMetadata = `{"format-version": 2, "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1", "location": "s3://wh/ml/t",
 "last-sequence-number": 1, "last-updated-ms": 1602638573590, "last-column-id": 2, "current-schema-id": 0,
 "schemas": [{"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "required": false, "type": "long"},
   {"id": 2, "name": "text", "required": false, "type": "string"}]}],
 "default-spec-id": 0, "partition-specs": [{"spec-id": 0, "fields": []}], "last-partition-id": 999,
 "default-sort-order-id": 0, "sort-orders": [{"order-id": 0, "fields": []}], "properties": {},
 "current-snapshot-id": 3055729675574597004,
 "snapshots": [{"snapshot-id": 3055729675574597004, "sequence-number": 1, "timestamp-ms": 1555100955770,
   "summary": {"operation": "append"}, "manifest-list": "s3://wh/ml/t/metadata/snap-1.avro", "schema-id": 0}],
 "snapshot-log": [], "metadata-log": [], "refs": {"main": {"snapshot-id": 3055729675574597004, "type": "branch"}}}`

// FuzzMetadata: any table metadata file gives metadata or an error.
func FuzzMetadata(f *testing.F) {
	f.Add([]byte(seedMetadata))
	f.Add([]byte(`{"format-version": 1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		md, err := parseMetadata(data)
		if err != nil {
			return
		}
		if s := md.CurrentSnapshot(); s != nil {
			_ = md.SnapshotByID(s.SnapshotID)
		}
	})
}

// FuzzManifests: any manifest list, and any manifest it or a seed names,
// gives entries or an error.
func FuzzManifests(f *testing.F) {
	f.Add([]byte("Obj\x01"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		if files, err := readManifestList(data); err == nil {
			for _, m := range files {
				_, _ = readManifest(m, data)
			}
		}
		m := iceberg.NewManifestFile(2, "m.avro", int64(len(data)), 0, 1).Build()
		if entries, err := readManifest(m, data); err == nil {
			for _, e := range entries {
				_ = e.DataFile().FilePath()
			}
		}
	})
}

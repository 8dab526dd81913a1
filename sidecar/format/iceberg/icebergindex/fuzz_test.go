package icebergindex

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
		for _, content := range []iceberg.ManifestContent{iceberg.ManifestContentData, iceberg.ManifestContentDeletes} {
			m := iceberg.NewManifestFile(2, "m.avro", int64(len(data)), 0, 1).Content(content).Build()
			if entries, err := readManifest(m, data); err == nil {
				for _, e := range entries {
					_ = e.DataFile().FilePath()
				}
			}
		}
	})
}

// seed reads a file of the fuzz corpus in testdata/fuzz: files pyiceberg
// wrote for the test tables of test/iceberg/tables.py.
func seed(t *testing.T, target, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fuzz", target, name))
	if err != nil {
		t.Fatal(err)
	}
	lit, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "go test fuzz v1\n[]byte(")
	if !ok {
		t.Fatalf("%s is not a corpus file of one []byte", name)
	}
	data, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
	if err != nil {
		t.Fatal(err)
	}
	return []byte(data)
}

// The fuzz seeds are real files, which parse to what the tables hold.
func TestPyicebergSeedsParse(t *testing.T) {
	md, err := parseMetadata(seed(t, "FuzzMetadata", "pyiceberg-evolved-schema"))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(md.Schemas()); got < 3 || md.CurrentSchema().Field(0).Name != "id" {
		t.Errorf("evolved table metadata: %d schemas, current %v; want several, id first", got, md.CurrentSchema())
	}
	if _, ok := md.CurrentSchema().FindFieldByName("body"); !ok {
		t.Errorf("evolved table's current schema %v has no renamed column body", md.CurrentSchema())
	}

	list, err := readManifestList(seed(t, "FuzzManifests", "pyiceberg-manifest-list-with-deletes"))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ManifestContent() != iceberg.ManifestContentData || list[1].ManifestContent() != iceberg.ManifestContentDeletes {
		t.Errorf("manifest list of the posdel table: %d manifests, want a data and a delete manifest", len(list))
	}
	for _, tt := range []struct {
		name     string
		manifest iceberg.ManifestContent
		content  iceberg.ManifestEntryContent
		rows     int64
	}{
		{"pyiceberg-position-delete-manifest", iceberg.ManifestContentDeletes, iceberg.EntryContentPosDeletes, 55},
		{"pyiceberg-equality-delete-manifest", iceberg.ManifestContentDeletes, iceberg.EntryContentEqDeletes, 13},
		{"pyiceberg-data-manifest", iceberg.ManifestContentData, iceberg.EntryContentData, 100},
	} {
		data := seed(t, "FuzzManifests", tt.name)
		m := iceberg.NewManifestFile(2, tt.name, int64(len(data)), 0, 1).Content(tt.manifest).Build()
		entries, err := readManifest(m, data)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if len(entries) != 1 || entries[0].DataFile().ContentType() != tt.content || entries[0].DataFile().Count() != tt.rows {
			t.Errorf("%s: %d entries, want one file of %v with %d rows", tt.name, len(entries), tt.content, tt.rows)
		}
	}
}

package testenv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"
)

// IcebergLake is a fresh bucket of MinIO with the Iceberg test tables of
// test/iceberg/tables.py, written by pyiceberg (bin/venv-iceberg) through a
// catalog of one kind: "sql", a SQLite file beside the test, or "rest",
// Apache Iceberg's own REST catalog server.
type IcebergLake struct {
	Bucket string
	// CatalogType and CatalogURI are the catalog's type and uri, as a
	// stream's iceberg.catalog names them.
	CatalogType, CatalogURI string
	// Snapshots maps each table written to its current snapshot.
	Snapshots map[string]int64

	minio *MinIO
}

// NewIcebergLake writes the tables into a fresh bucket of m through a
// catalog of kind; write are more flags of `tables.py write` (--tables,
// --text-prefix). The catalog goes with the test.
func NewIcebergLake(t testing.TB, m *MinIO, kind string, write ...string) *IcebergLake {
	t.Helper()
	l := &IcebergLake{Bucket: m.Bucket(t), CatalogType: kind, minio: m}
	switch kind {
	case "sql":
		l.CatalogURI = "sqlite:///" + filepath.Join(t.TempDir(), "catalog.db")
	case "rest":
		rest, err := StartIcebergREST(context.Background(), m, l.Warehouse())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rest.Stop() })
		l.CatalogURI = rest.URI
	default:
		t.Fatalf("no test catalog of type %q", kind)
	}
	if err := json.Unmarshal(l.Tables(t, append([]string{"write"}, write...)...), &l.Snapshots); err != nil {
		t.Fatal(err)
	}
	return l
}

// Warehouse is where the catalog puts new tables.
func (l *IcebergLake) Warehouse() string { return "s3://" + l.Bucket + "/wh" }

// Tables runs test/iceberg/tables.py against the lake and returns what it
// printed.
func (l *IcebergLake) Tables(t testing.TB, args ...string) []byte {
	t.Helper()
	args = append(args, "--catalog", l.CatalogType, "--uri", l.CatalogURI, "--warehouse", l.Warehouse(),
		"--s3", l.minio.URL(), l.minio.AccessKey, l.minio.SecretKey)
	return PythonScript(t, "venv-iceberg", "test/iceberg/tables.py", args...)
}

// Read returns the rows pyiceberg reads of table at snapshot, deletes
// applied (pyarrow for equality deletes), as canonical JSON objects.
func (l *IcebergLake) Read(t testing.TB, table string, snapshot int64) []string {
	t.Helper()
	var rows []string
	sc := bufio.NewScanner(bytes.NewReader(l.Tables(t, "read", table, strconv.FormatInt(snapshot, 10))))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(m)
		rows = append(rows, string(b))
	}
	return rows
}

package webdataset

import (
	"encoding/binary"
	"strings"
	"testing"
)

// sqliteRecord encodes a record of small integers and texts.
func sqliteRecord(vals ...any) []byte {
	var types, body []byte
	for _, v := range vals {
		switch v := v.(type) {
		case int:
			types = append(types, 1)
			body = append(body, byte(v))
		case string:
			types = append(types, byte(13+2*len(v)))
			body = append(body, v...)
		}
	}
	return append(append([]byte{byte(1 + len(types))}, types...), body...)
}

// sqlitePage lays out a table leaf page of rows (page 1 leaves room for
// the file header).
func sqlitePage(first bool, rows ...[]byte) []byte {
	p := make([]byte, 512)
	hdr := 0
	if first {
		hdr = 100
	}
	end := len(p)
	p[hdr] = 0x0d
	binary.BigEndian.PutUint16(p[hdr+3:], uint16(len(rows)))
	for i, r := range rows {
		cell := append([]byte{byte(len(r)), byte(i + 1)}, r...)
		end -= len(cell)
		copy(p[end:], cell)
		binary.BigEndian.PutUint16(p[hdr+8+2*i:], uint16(end))
	}
	binary.BigEndian.PutUint16(p[hdr+5:], uint16(end))
	return p
}

// sqliteDB is a two-page database: the schema and a sample_parts table,
// laid out as the SQLite file format says (the oracle tests read the
// databases energon prepare writes).
func sqliteDB(parts ...string) []byte {
	p1 := sqlitePage(true, sqliteRecord("table", "sample_parts", "sample_parts", 2, "CREATE TABLE sample_parts (a, b, part_name, c, d)"))
	copy(p1, "SQLite format 3\x00")
	binary.BigEndian.PutUint16(p1[16:], 512)
	binary.BigEndian.PutUint32(p1[56:], 1)
	var rows [][]byte
	for i, name := range parts {
		rows = append(rows, sqliteRecord(0, i, name, 3*i, 7))
	}
	return append(p1, sqlitePage(false, rows...)...)
}

func readAll(db []byte) func(off, n int64) ([]byte, error) {
	return func(off, n int64) ([]byte, error) {
		if off < 0 || off+n > int64(len(db)) {
			return nil, errSQLite
		}
		return db[off : off+n], nil
	}
}

func TestSQLiteTableScan(t *testing.T) {
	db := sqliteDB("jpg", "json", "txt")
	f, err := openSQLite(int64(len(db)), readAll(db))
	if err != nil {
		t.Fatal(err)
	}
	root, err := f.tableRoot("sample_parts")
	if err != nil || root != 2 {
		t.Fatalf("root %d, %v", root, err)
	}
	var names []string
	if err := f.scanTable(root, func(rec []any) error { names = append(names, rec[2].(string)); return nil }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, ",") != "jpg,json,txt" {
		t.Fatalf("parts %v", names)
	}
	if _, err := f.tableRoot("samples"); err == nil {
		t.Fatal("a missing table found")
	}
	bad := append([]byte(nil), db...)
	bad[512] = 0x02 // an index page where a table leaf should be
	g, _ := openSQLite(int64(len(bad)), readAll(bad))
	if err := g.scanTable(2, func([]any) error { return nil }); err == nil || !strings.Contains(err.Error(), "kind 0x2") {
		t.Fatalf("a page of another kind: %v", err)
	}
}

// FuzzSQLite: any bytes are read as a database, or refused, never a panic
// or an endless walk.
func FuzzSQLite(f *testing.F) {
	f.Add(sqliteDB("jpg", "json"))
	f.Fuzz(func(t *testing.T, db []byte) {
		if len(db) > 1<<20 {
			return
		}
		s, err := openSQLite(int64(len(db)), readAll(db))
		if err != nil {
			return
		}
		root, err := s.tableRoot("sample_parts")
		if err != nil {
			return
		}
		_ = s.scanTable(root, func([]any) error { return nil })
	})
}

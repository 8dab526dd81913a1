package indexfile

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Table is the Iceberg table of an iceberg stream as `shardfeed index`
// resolved it: which table, at which snapshot, with which schema, and the
// delete files it applied to the shards' Deleted runs.
type Table struct {
	// Catalog is where the table was found ("rest http://…", "sql
	// sqlite:///…", "glue eu-west-1").
	Catalog string `json:"catalog"`
	// Name is the table's identifier, namespace.table.
	Name string `json:"name"`
	// Location is the table's location.
	Location string `json:"location"`
	// Snapshot is the id of the snapshot the shards are of; Ref the
	// branch or tag it was resolved from, if any.
	Snapshot int64  `json:"snapshot"`
	Ref      string `json:"ref,omitempty"`
	// SchemaID is the id of the table's schema at the snapshot.
	SchemaID int `json:"schemaID"`
	// ArrowSchema is that schema as an Arrow IPC schema message, in
	// base64, each field with its Iceberg field id (PARQUET:field_id):
	// data files written under older schemas are read by field id, so
	// renamed, added and dropped columns come out as the table has them.
	ArrowSchema string `json:"arrowSchema"`
	// Root is the URI the shards' objects are keys under: the bucket (or
	// container) of the stream's source.uri, which holds the table's files.
	Root string `json:"root"`
	// DeleteFiles are the delete files of the snapshot, applied.
	DeleteFiles []DeleteFile `json:"deleteFiles,omitempty"`
}

// DeleteFile is a delete file applied to the shards' Deleted runs.
type DeleteFile struct {
	Path string `json:"path"`
	// Content is "position" or "equality".
	Content string `json:"content"`
	// Rows deleted: the file's records that fell on the snapshot's rows.
	Rows int64 `json:"rows"`
}

func (t *Table) check() error {
	switch {
	case t.Name == "":
		return errors.New(`"name" is empty`)
	case t.Snapshot == 0:
		return errors.New(`"snapshot" is missing: re-run shardfeed index`)
	case t.ArrowSchema == "":
		return errors.New(`"arrowSchema" is empty: re-run shardfeed index`)
	}
	if _, err := base64.StdEncoding.DecodeString(t.ArrowSchema); err != nil {
		return fmt.Errorf(`"arrowSchema" is not base64: %w`, err)
	}
	u, err := url.Parse(t.Root)
	if err != nil || u.Scheme == "" || !strings.HasSuffix(t.Root, "/") {
		return fmt.Errorf(`"root" %q is not a bucket URI ending in "/"`, t.Root)
	}
	for i, d := range t.DeleteFiles {
		if d.Path == "" || (d.Content != "position" && d.Content != "equality") || d.Rows < 0 {
			return fmt.Errorf(`deleteFiles[%d] needs a path, content "position" or "equality" and non-negative rows`, i)
		}
	}
	return nil
}

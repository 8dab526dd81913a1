package indexfile

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/shardfeed/shardfeed/internal/checksum"
)

// Lance is the Lance dataset of a lance stream as `shardfeed index`
// resolved it: which dataset, at which version, with which schema.
type Lance struct {
	// Root is the dataset's directory, as a URI ending in "/"; the
	// shards' objects are keys under it.
	Root string `json:"root"`
	// Version is the table version the shards are of; Tag the tag it was
	// resolved from, if any.
	Version uint64 `json:"version"`
	Tag     string `json:"tag,omitempty"`
	// DataFormat is the table's file version ("2.2").
	DataFormat string `json:"dataFormat"`
	// ArrowSchema is the indexed columns' Arrow schema (an IPC schema
	// message, base64), each field with its Lance field id
	// (lance:field_id) and its children's.
	ArrowSchema string `json:"arrowSchema"`
	// Columns are the columns the index projected to (empty: all).
	Columns []string `json:"columns,omitempty"`
	// Fields are the version's Lance fields the shards decode with
	// (depth first, as the manifest lists them).
	Fields []LanceField `json:"fields"`
}

// LanceField is a field of a Lance schema.
type LanceField struct {
	Name        string `json:"name"`
	ID          int32  `json:"id"`
	Parent      int32  `json:"parent"`
	LogicalType string `json:"logicalType"`
	Nullable    bool   `json:"nullable,omitempty"`
	// Extension is the field's Arrow extension (lance.blob.v2), and Blob
	// says it is a blob column: its values lie where descriptors say.
	Extension string `json:"extension,omitempty"`
	Blob      bool   `json:"blob,omitempty"`
}

// Range is bytes [Offset, Offset+Length) of an object, and their digest.
type Range struct {
	Object string `json:"object"`
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
	Hash   string `json:"hash"`
}

// LanceFile is a shard's data file: where its tail (the file's schema,
// column metadata and footer) is, and which of its columns hold which
// fields.
type LanceFile struct {
	Tail Range `json:"tail"`
	// Size is the whole file's.
	Size int64 `json:"size"`
	// Fields and Columns pair the field ids the file stores with its
	// columns.
	Fields  []int32 `json:"fields"`
	Columns []int32 `json:"columns"`
}

// Snapshot is the plan input that names the version ("lance:v5").
func (l *Lance) Snapshot() string { return "lance:v" + strconv.FormatUint(l.Version, 10) }

func (l *Lance) check() error {
	if l.Version == 0 {
		return errors.New(`"version" is missing: re-run shardfeed index`)
	}
	if _, err := base64.StdEncoding.DecodeString(l.ArrowSchema); err != nil || l.ArrowSchema == "" {
		return errors.New(`"arrowSchema" is missing or not base64: re-run shardfeed index`)
	}
	if err := checkRoot(l.Root); err != nil {
		return err
	}
	if len(l.Fields) == 0 {
		return errors.New(`"fields" is empty: re-run shardfeed index`)
	}
	return nil
}

// checkRoot checks a table's root is a URI ending in "/".
func checkRoot(root string) error {
	u, err := url.Parse(root)
	if err != nil || u.Scheme == "" || !strings.HasSuffix(root, "/") {
		return fmt.Errorf(`"root" %q is not a URI ending in "/"`, root)
	}
	return nil
}

func (r Range) check() error {
	if r.Object == "" || r.Offset < 0 || r.Length < 0 {
		return fmt.Errorf("range %q [%d, +%d) needs an object and non-negative offset and length", r.Object, r.Offset, r.Length)
	}
	if strings.HasPrefix(r.Object, "/") || strings.Contains(r.Object, "..") {
		return fmt.Errorf("range object %q is not a key under the dataset's root", r.Object)
	}
	_, err := checksum.Parse(r.Hash)
	return err
}

// checkLance checks a lance shard's ranges and files.
func (e Entry) checkLance() error {
	if len(e.Ranges) == 0 && e.Samples > 0 {
		return errors.New("a lance shard lists no byte ranges")
	}
	if len(e.Files) == 0 {
		return errors.New("a lance shard lists no data files")
	}
	for _, r := range e.Ranges {
		if err := r.check(); err != nil {
			return err
		}
	}
	for _, f := range e.Files {
		if err := f.Tail.check(); err != nil {
			return err
		}
		if len(f.Fields) != len(f.Columns) {
			return fmt.Errorf("data file %s pairs %d fields with %d columns", f.Tail.Object, len(f.Fields), len(f.Columns))
		}
	}
	return nil
}

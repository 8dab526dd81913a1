package index

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/planner"
)

// Version is the version of the shardfeed index format.
const Version = 1

// File is a shardfeed index (docs/formats.md): the shards of a stream as
// byte ranges of its objects, written by `shardfeed index` as index.json.
type File struct {
	// Shardfeed is the index format version.
	Shardfeed int `json:"shardfeed"`
	// Format of the stream's objects (spec.streams[].format).
	Format datav1alpha1.ShardFormat `json:"format"`
	// Schema of a stream whose objects carry none (JSON Lines, CSV, TSV),
	// as shardfeed index inferred it or was given it.
	Schema []Field `json:"schema,omitempty"`
	// Table is the Iceberg table of an iceberg stream, at the snapshot
	// the index was resolved at.
	Table  *Table  `json:"table,omitempty"`
	Shards []Entry `json:"shards"`
}

// Entry is one shard: part Part (a Parquet row group, or a run of text
// records) of Object, stored in bytes [Offset, Offset+Length).
type Entry struct {
	Name    string `json:"name"`
	Object  string `json:"object"`
	Part    int    `json:"part"`
	Offset  int64  `json:"offset"`
	Length  int64  `json:"length"`
	Samples int64  `json:"samples"`
	// Hash is the "algo:hex" digest of the shard's bytes.
	Hash string `json:"hash"`
	// ObjectSize is the size of the whole object.
	ObjectSize int64 `json:"objectSize,omitempty"`
	// FooterOffset and FooterLength give a Parquet object's footer range
	// (the footer, its length and PAR1): with the shard's own range, all a
	// reader fetches to decode the row group.
	FooterOffset int64 `json:"footerOffset,omitempty"`
	FooterLength int64 `json:"footerLength,omitempty"`
	// Rows of the part before deletes, where deletes apply: an Iceberg
	// row group's rows, of which Deleted are never served, so that
	// Samples = Rows - the deleted rows.
	Rows int64 `json:"rows,omitempty"`
	// Deleted are the part's deleted rows, as sorted, disjoint runs
	// [start, end) of row positions within the part.
	Deleted []Run `json:"deleted,omitempty"`
}

// Run is the rows [Run[0], Run[1]) of a part.
type Run [2]int64

// Count is the number of rows in the run.
func (r Run) Count() int64 { return r[1] - r[0] }

// StreamIndex returns the planner's view of the index.
func (f *File) StreamIndex() planner.StreamIndex {
	out := planner.StreamIndex{Shards: make([]planner.Shard, len(f.Shards))}
	for i, e := range f.Shards {
		out.Shards[i] = planner.Shard{Name: e.Name, Samples: e.Samples, Bytes: e.Length, Hash: e.Hash}
	}
	if f.Table != nil {
		out.Snapshot = strconv.FormatInt(f.Table.Snapshot, 10)
	}
	return out
}

func (f *File) check() error {
	if f.Shardfeed != Version {
		return fmt.Errorf("shardfeed index version %d is not supported: this shardfeed reads version %d; re-run shardfeed index", f.Shardfeed, Version)
	}
	if f.Format == "" {
		return errors.New(`shardfeed index names no "format": re-run shardfeed index`)
	}
	for _, fl := range f.Schema {
		if err := fl.check(); err != nil {
			return fmt.Errorf("shardfeed index schema: %w", err)
		}
	}
	if len(f.Shards) == 0 {
		return errors.New(`shardfeed index lists no shards ("shards" is empty)`)
	}
	if (f.Format == datav1alpha1.FormatIceberg) != (f.Table != nil) {
		return fmt.Errorf(`shardfeed index of format %q has %s "table": an iceberg index has one, no other does; re-run shardfeed index`, f.Format, map[bool]string{true: "a", false: "no"}[f.Table != nil])
	}
	if f.Table != nil {
		if err := f.Table.check(); err != nil {
			return fmt.Errorf("shardfeed index table: %w", err)
		}
	}
	seen := map[string]int{}
	for i, e := range f.Shards {
		if e.Name == "" || e.Object == "" || e.Offset < 0 || e.Length < 0 || e.Samples < 0 || e.Part < 0 {
			return fmt.Errorf("shardfeed index: shards[%d] needs a name, an object and non-negative part, offset, length and samples", i)
		}
		if j, dup := seen[e.Name]; dup {
			return fmt.Errorf("shardfeed index: shards[%d] %q is also shards[%d]", i, e.Name, j)
		}
		seen[e.Name] = i
		if _, err := checksum.Parse(e.Hash); err != nil {
			return fmt.Errorf("shardfeed index: shards[%d]: %w", i, err)
		}
		if err := e.checkDeleted(); err != nil {
			return fmt.Errorf("shardfeed index: shards[%d] %q: %w", i, e.Name, err)
		}
	}
	return nil
}

// checkDeleted checks that the deleted runs are sorted, disjoint and
// within the part's rows, and that the samples are the rows left.
func (e Entry) checkDeleted() error {
	if e.Rows == 0 && len(e.Deleted) == 0 {
		return nil
	}
	if e.Rows < 0 {
		return fmt.Errorf("rows %d is negative", e.Rows)
	}
	var deleted, end int64
	for j, r := range e.Deleted {
		if r[0] < end || r[1] <= r[0] || r[1] > e.Rows {
			return fmt.Errorf("deleted[%d] %v is not a sorted, disjoint, non-empty run within its %d rows", j, r, e.Rows)
		}
		deleted += r.Count()
		end = r[1]
	}
	if e.Samples != e.Rows-deleted {
		return fmt.Errorf("samples %d is not its %d rows less %d deleted", e.Samples, e.Rows, deleted)
	}
	return nil
}

// Field is a column of a File's schema: a name and one of FieldTypes.
type Field struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// FieldTypes are the type names of a File's schema (each format that reads
// a schema from the index maps them to Arrow types).
var FieldTypes = []string{"bool", "int64", "float64", "utf8", "list<int64>", "list<float64>", "list<utf8>"}

func (f Field) check() error {
	if !slices.Contains(FieldTypes, f.Type) {
		return fmt.Errorf("column %q: type %q is not one of %s", f.Name, f.Type, strings.Join(FieldTypes, ", "))
	}
	return nil
}

// readFile parses a shardfeed index, strictly.
func readFile(data []byte) (*Layout, error) {
	var f File
	if err := decodeStrict(data, &f); err != nil {
		return nil, fmt.Errorf("shardfeed index: %w", err)
	}
	if err := f.check(); err != nil {
		return nil, err
	}
	return &Layout{Format: f.Format, Index: f.StreamIndex(), Native: &f}, nil
}

package index

import (
	"errors"
	"fmt"
	"slices"
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
}

// StreamIndex returns the planner's view of the index.
func (f *File) StreamIndex() planner.StreamIndex {
	out := planner.StreamIndex{Shards: make([]planner.Shard, len(f.Shards))}
	for i, e := range f.Shards {
		out.Shards[i] = planner.Shard{Name: e.Name, Samples: e.Samples, Bytes: e.Length, Hash: e.Hash}
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

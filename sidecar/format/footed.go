package format

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/expr"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
)

// Footed is a format of self-describing objects read by range, as Parquet
// and Arrow IPC files are: a shard is one part of an object (a row group,
// a record batch) listed in a shardfeed index, fetched as the part's byte
// range and the object's footer, without which a range does not decode.
type Footed struct {
	Name datav1alpha1.ShardFormat
	Exts []string
	// SchemaOf reads the Arrow schema of an object of size bytes from its
	// footer range (its last bytes).
	SchemaOf func(size int64, tail []byte) (*arrow.Schema, error)
	// Decode decodes a part of an object, keeping columns (nil: all).
	Decode func(ctx context.Context, p FootedPart, columns []string) ([]arrow.RecordBatch, error)
	// Index appends the parts of an object, with their footer range, to f.
	Index func(ctx context.Context, st store.Store, o store.Object, f *indexfile.File, opts IndexOptions) error
	// Stats, if set, returns the statistics of part's columns from the
	// footer range of an object of size bytes (Pruner).
	Stats func(size int64, tail []byte, part int) (map[string]expr.Stats, error)
}

// FootedPart is one part of a footed object, as Footed.Decode reads it:
// the object's size and its footer range (Tail, its last bytes), and the
// part's index in the object and its bytes (Data, from Offset).
type FootedPart struct {
	Size   int64
	Tail   []byte
	Index  int
	Offset int64
	Data   []byte
}

var (
	_ Format  = (*Footed)(nil)
	_ Indexer = (*Footed)(nil)
	_ Pruner  = footedReader{}
)

// Kind implements Format.
func (f *Footed) Kind() datav1alpha1.ShardFormat { return f.Name }

// Suffixes implements Indexer.
func (f *Footed) Suffixes() []string { return f.Exts }

// IndexObject implements Indexer.
func (f *Footed) IndexObject(ctx context.Context, st store.Store, o store.Object, out *indexfile.File, opts IndexOptions) error {
	return f.Index(ctx, st, o, out, opts)
}

// Open implements Format.
func (f *Footed) Open(l *index.Layout) (Reader, error) {
	file, err := FileOf(l)
	if err != nil {
		return nil, err
	}
	return footedReader{f: f, file: file}, nil
}

type footedReader struct {
	f    *Footed
	file *indexfile.File
}

func (r footedReader) Parts(i int) []Part { return FileParts(r.file, i, true) }

func (r footedReader) Schema(ctx context.Context, read ReadFunc) (*arrow.Schema, error) {
	e := r.file.Shard(0)
	tail, err := read(ctx, r.Parts(0)[1])
	if err != nil {
		return nil, err
	}
	s, err := r.f.SchemaOf(e.ObjectSize, tail)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.Object, err)
	}
	return s, nil
}

func (r footedReader) Stats(ctx context.Context, i int, read ReadFunc) (map[string]expr.Stats, error) {
	if r.f.Stats == nil {
		return nil, nil
	}
	e := r.file.Shard(i)
	tail, err := read(ctx, r.Parts(i)[1])
	if err != nil {
		return nil, err
	}
	return r.f.Stats(e.ObjectSize, tail, e.Part)
}

func (r footedReader) Records(ctx context.Context, i int, parts [][]byte, columns []string) (array.RecordReader, error) {
	e := r.file.Shard(i)
	recs, err := r.f.Decode(ctx, FootedPart{Size: e.ObjectSize, Tail: parts[1], Offset: e.Offset, Data: parts[0], Index: e.Part}, columns)
	if err != nil {
		return nil, err
	}
	return RecordsOf(recs)
}

package parquet

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// Format is Parquet: one shard per row group, fetched as the row group's
// byte range and the object's footer.
type Format struct{}

var (
	_ format.Format  = Format{}
	_ format.Indexer = Format{}
)

// Kind implements format.Format.
func (Format) Kind() datav1alpha1.ShardFormat { return datav1alpha1.FormatParquet }

// Suffixes implements format.Indexer.
func (Format) Suffixes() []string { return []string{".parquet"} }

// Open implements format.Format.
func (Format) Open(l *index.Layout) (format.Reader, error) {
	f, err := format.FileOf(l)
	if err != nil {
		return nil, err
	}
	return reader{f}, nil
}

// IndexObject implements format.Indexer: the object's row groups, from its
// footer (two ranged reads), each hashed.
func (Format) IndexObject(ctx context.Context, st store.Store, o store.Object, f *index.File, opts format.IndexOptions) error {
	md, err := ReadFooter(ctx, st, o.Key, o.Size)
	if err != nil {
		return err
	}
	rgs, err := RowGroups(o.Key, md, o.Size)
	if err != nil {
		return err
	}
	for p, rg := range rgs {
		sum, err := format.HashRange(ctx, st, o.Key, rg.Offset, rg.Length, opts.Hash)
		if err != nil {
			return err
		}
		f.Shards = append(f.Shards, index.Entry{
			Name: fmt.Sprintf("%s#%d", o.Key, p), Object: o.Key, Part: p,
			Offset: rg.Offset, Length: rg.Length, Samples: rg.Rows, Hash: sum,
			ObjectSize: o.Size, FooterOffset: o.Size - 8 - int64(md.Size()), FooterLength: 8 + int64(md.Size()),
		})
	}
	return nil
}

type reader struct{ f *index.File }

func (r reader) Parts(i int) []format.Part { return format.FileParts(r.f, i, true) }

func (r reader) Schema(ctx context.Context, read format.ReadFunc) (*arrow.Schema, error) {
	e := r.f.Shards[0]
	parts := r.Parts(0)
	tail, err := read(ctx, parts[1])
	if err != nil {
		return nil, err
	}
	s, err := Schema(e.ObjectSize, tail)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.Object, err)
	}
	return s, nil
}

func (r reader) Records(ctx context.Context, i int, parts [][]byte, columns []string) (array.RecordReader, error) {
	e := r.f.Shards[i]
	recs, err := ReadRowGroupRange(ctx, e.ObjectSize, parts[1], e.Offset, parts[0], e.Part, columns)
	if err != nil {
		return nil, err
	}
	return format.RecordsOf(recs)
}

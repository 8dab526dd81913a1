package mds

import (
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/mdsindex"
	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// Format is MDS: one shard per object, as its own index.json lists them
// (written by mosaicml-streaming or shardfeed convert; there is no
// Indexer).
type Format struct{}

var _ format.Format = Format{}

// Kind implements format.Format.
func (Format) Kind() datav1alpha1.ShardFormat { return datav1alpha1.FormatMDS }

// Open implements format.Format.
func (Format) Open(l *index.Layout) (format.Reader, error) {
	if l.MDS == nil {
		return nil, fmt.Errorf("an MDS stream is read through its MDS index.json, not %s", l.Form())
	}
	return reader{x: l.MDS, planned: l.Index}, nil
}

type reader struct {
	x *mdsindex.Index
	// planned is the planner's view: each shard's stored file, its size
	// and the hash the cache checks it by.
	planned planner.StreamIndex
}

func (r reader) Parts(i int) []format.Part {
	s := r.planned.Shards[i]
	return []format.Part{{Key: s.Name, Size: s.Bytes, Hash: s.Hash}}
}

// Schema is the first shard's columns; every shard must have the same.
func (r reader) Schema(context.Context, format.ReadFunc) (*arrow.Schema, error) {
	first := &r.x.Shards[0]
	fields, err := Columns(first)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", first.Stored().Basename, err)
	}
	for i := range r.x.Shards[1:] {
		e := &r.x.Shards[i+1]
		if !slices.Equal(e.ColumnNames, first.ColumnNames) || !slices.Equal(e.ColumnEncodings, first.ColumnEncodings) {
			return nil, fmt.Errorf("%s has columns %v %v, %s has %v %v: every shard of a stream needs the same columns",
				e.Stored().Basename, e.ColumnNames, e.ColumnEncodings, first.Stored().Basename, first.ColumnNames, first.ColumnEncodings)
		}
	}
	return arrow.NewSchema(fields, nil), nil
}

func (r reader) Records(_ context.Context, i int, parts [][]byte, columns []string) (array.RecordReader, error) {
	sh, err := ReadShard(parts[0], &r.x.Shards[i], columns)
	if err != nil {
		return nil, err
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sh.Schema())
	defer b.Release()
	b.Reserve(sh.Len())
	for j := range sh.Len() {
		if err := sh.Append(b, j); err != nil {
			return nil, err
		}
	}
	return format.RecordsOf([]arrow.RecordBatch{b.NewRecordBatch()})
}

// Package orc reads Apache ORC files shard by shard: a shard is one stripe,
// fetched as the stripe's byte range and the file's tail (postscript,
// footer and metadata), decoded by orcfile with only the projected
// columns.
package orc

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/orc/orcfile"
)

// Format is ORC: one shard per stripe.
var Format = &format.Footed{Name: datav1alpha1.FormatORC, Exts: []string{".orc"}, SchemaOf: Schema, Decode: ReadStripeRange, Index: indexObject}

// Schema returns the Arrow schema of a file of size bytes from its tail.
func Schema(size int64, tail []byte) (*arrow.Schema, error) {
	f, err := orcfile.ParseTail(size, tail)
	if err != nil {
		return nil, err
	}
	return f.Schema, nil
}

// ReadStripeRange decodes stripe part of a file of size bytes from the
// stripe's bytes (data, at offset) and the file's tail.
func ReadStripeRange(_ context.Context, p format.FootedPart, columns []string) ([]arrow.RecordBatch, error) {
	size, tail, offset, data, part := p.Size, p.Tail, p.Offset, p.Data, p.Index
	f, err := orcfile.ParseTail(size, tail)
	if err != nil {
		return nil, err
	}
	if part < 0 || part >= len(f.Stripes) {
		return nil, fmt.Errorf("stripe %d is outside the file's %d: the index does not match the file, re-run shardfeed index", part, len(f.Stripes))
	}
	if s := f.Stripes[part]; int64(s.Offset) != offset { //nolint:gosec // checked against the file size by ParseTail
		return nil, fmt.Errorf("stripe %d starts at byte %d, the index says %d: re-run shardfeed index", part, s.Offset, offset)
	}
	rec, err := f.ReadStripe(data, part, columns, 0, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	return []arrow.RecordBatch{rec}, nil
}

// indexObject is the format's Indexer: the object's stripes, from its tail
// (one ranged read, two for a tail beyond orcfile.TailSize), each hashed.
func indexObject(ctx context.Context, st store.Store, o store.Object, f *indexfile.File, opts format.IndexOptions) error {
	if o.Size < 4 {
		return fmt.Errorf("%s: %d bytes is too short for ORC", o.Key, o.Size)
	}
	last, err := format.ReadRange(ctx, st, o.Key, max(o.Size-orcfile.TailSize, 0), min(o.Size, orcfile.TailSize))
	if err != nil {
		return err
	}
	n, err := orcfile.TailLength(o.Size, last)
	if err != nil {
		return fmt.Errorf("%s: %w", o.Key, err)
	}
	tail := last[int64(len(last))-min(n, int64(len(last))):]
	if n > int64(len(last)) {
		if tail, err = format.ReadRange(ctx, st, o.Key, o.Size-n, n); err != nil {
			return err
		}
	}
	file, err := orcfile.ParseTail(o.Size, tail)
	if err != nil {
		return fmt.Errorf("%s: %w", o.Key, err)
	}
	for p, s := range file.Stripes {
		off, length := int64(s.Offset), int64(s.Length()) //nolint:gosec // checked against the file size by ParseTail
		sum, err := format.HashRange(ctx, st, o.Key, off, length, opts.Hash)
		if err != nil {
			return err
		}
		f.Shards = append(f.Shards, indexfile.Entry{
			Name: fmt.Sprintf("%s#%d", o.Key, p), Object: o.Key, Part: p,
			Offset: off, Length: length, Samples: int64(s.Rows), Hash: sum, //nolint:gosec // bounded by the stripe's bytes
			ObjectSize: o.Size, FooterOffset: o.Size - n, FooterLength: n,
		})
	}
	return nil
}

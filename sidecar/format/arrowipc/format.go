package arrowipc

import (
	"context"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// Format is the Arrow IPC file format (Feather v2): one shard per record
// batch, fetched as the batch's byte range and the object's footer.
type Format struct{}

var (
	_ format.Format  = Format{}
	_ format.Indexer = Format{}
)

// Kind implements format.Format.
func (Format) Kind() datav1alpha1.ShardFormat { return datav1alpha1.FormatArrow }

// Suffixes implements format.Indexer.
func (Format) Suffixes() []string { return []string{".arrow", ".feather", ".ipc"} }

// Open implements format.Format.
func (Format) Open(l *index.Layout) (format.Reader, error) {
	f, err := format.FileOf(l)
	if err != nil {
		return nil, err
	}
	return reader{f}, nil
}

// IndexObject implements format.Indexer: the object is read once for its
// record batches, their ranges and hashes, and its footer range.
func (Format) IndexObject(ctx context.Context, st store.Store, o store.Object, f *index.File, opts format.IndexOptions) error {
	body, err := st.Get(ctx, o.Key, 0, -1)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(body)
	_ = body.Close()
	if err != nil {
		return err
	}
	batches, err := Batches(data)
	if err != nil {
		return fmt.Errorf("%s%s: %w", st.URI(), o.Key, err)
	}
	size := int64(len(data))
	tail, err := FooterLength(data[size-10:], size)
	if err != nil {
		return fmt.Errorf("%s%s: %w", st.URI(), o.Key, err)
	}
	for p, b := range batches {
		sum, _ := checksum.Of(opts.Hash, data[b.Offset:b.Offset+b.Length])
		f.Shards = append(f.Shards, index.Entry{
			Name: fmt.Sprintf("%s#%d", o.Key, p), Object: o.Key, Part: p,
			Offset: b.Offset, Length: b.Length, Samples: b.Rows, Hash: sum.String(),
			ObjectSize: size, FooterOffset: size - tail, FooterLength: tail,
		})
	}
	return nil
}

type reader struct{ f *index.File }

func (r reader) Parts(i int) []format.Part { return format.FileParts(r.f, i, true) }

func (r reader) Schema(ctx context.Context, read format.ReadFunc) (*arrow.Schema, error) {
	e := r.f.Shards[0]
	tail, err := read(ctx, r.Parts(0)[1])
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
	rec, err := ReadBatchRange(ctx, e.ObjectSize, parts[1], e.Offset, parts[0], e.Part, columns)
	if err != nil {
		return nil, err
	}
	return format.RecordsOf([]arrow.RecordBatch{rec})
}

package arrowipc

import (
	"context"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// Format is the Arrow IPC file format (Feather v2): one shard per record
// batch, fetched as the batch's byte range and the object's footer.
var Format = &format.Footed{Name: datav1alpha1.FormatArrow, Exts: []string{".arrow", ".feather", ".ipc"}, SchemaOf: Schema, Decode: readBatchesRange, Index: indexObject}

// indexObject is the format's Indexer: the object is read once for its
// record batches, their ranges and hashes, and its footer range.
func indexObject(ctx context.Context, st store.Store, o store.Object, f *indexfile.File, opts format.IndexOptions) error {
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
		f.Shards = append(f.Shards, indexfile.Entry{
			Name: fmt.Sprintf("%s#%d", o.Key, p), Object: o.Key, Part: p,
			Offset: b.Offset, Length: b.Length, Samples: b.Rows, Hash: sum.String(),
			ObjectSize: size, FooterOffset: size - tail, FooterLength: tail,
		})
	}
	return nil
}

// readBatchesRange is ReadBatchRange as Footed decodes.
func readBatchesRange(ctx context.Context, p format.FootedPart, columns []string) ([]arrow.RecordBatch, error) {
	rec, err := ReadBatchRange(ctx, p.Size, p.Tail, p.Offset, p.Data, p.Index, columns)
	if err != nil {
		return nil, err
	}
	return []arrow.RecordBatch{rec}, nil
}

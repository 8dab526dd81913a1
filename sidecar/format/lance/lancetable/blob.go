package lancetable

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shardfeed/shardfeed/sidecar/format/lance/lancefile"
)

// readBlobs reads rows [from, to) of a blob column: its descriptors, then
// each value's bytes by range from the data file (inline) or its blob
// files (packed, dedicated).
func readBlobs(n *lancefile.Node, f FileView, from, to uint64, skip func(uint64) bool) (arrow.Array, error) {
	refs, err := f.Tail.ReadBlobRefs(f.Source, n, f.Columns, from, to)
	if err != nil {
		return nil, err
	}
	b := array.NewBinaryBuilder(memory.DefaultAllocator, arrow.BinaryTypes.LargeBinary)
	defer b.Release()
	b.Reserve(len(refs))
	for i, r := range refs {
		row := from + uint64(i) //nolint:gosec // i < rows
		if r.Null || skip != nil && skip(row) {
			b.AppendNull()
			continue
		}
		v, err := blobBytes(n, f, r)
		if err != nil {
			return nil, fmt.Errorf("column %q, row %d: %w", n.Name, row, err)
		}
		b.Append(v)
	}
	return b.NewArray(), nil
}

func blobBytes(n *lancefile.Node, f FileView, r lancefile.BlobRef) ([]byte, error) {
	if r.External {
		return nil, fmt.Errorf("%w: a blob stored outside the dataset (its descriptor names a URI): shardfeed serves only blobs the dataset holds; write the bytes into the table (lance.blob.Blob.from_bytes), or select other columns than %q", ErrUnsupported, n.Name)
	}
	if r.Size == 0 {
		return []byte{}, nil
	}
	src := f.Source
	if r.InBlobFile {
		if f.Blobs == nil {
			return nil, fmt.Errorf("blob file %s of a data file with none", lancefile.BlobFileName(r.ID))
		}
		var err error
		if src, err = f.Blobs(r.ID); err != nil {
			return nil, err
		}
	}
	return src.ReadAt(r.Position, r.Size)
}

// BlobSizes are the sizes of a blob column's values in rows [from, to)
// (0: null or empty), read from its descriptors alone.
func BlobSizes(n *lancefile.Node, files []FileView, from, to uint64) ([]uint64, error) {
	out := make([]uint64, to-from)
	i, err := FileOf(n, files)
	if err != nil || i < 0 {
		return out, err
	}
	f := files[i]
	refs, err := f.Tail.ReadBlobRefs(f.Source, n, f.Columns, from, to)
	if err != nil {
		return nil, err
	}
	for k, r := range refs {
		if !r.Null {
			out[k] = r.Size
		}
	}
	return out, nil
}

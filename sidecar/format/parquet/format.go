package parquet

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/parquet/metadata"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// Format is Parquet: one shard per row group, fetched as the row group's
// byte range and the object's footer.
var Format = &format.Footed{Name: datav1alpha1.FormatParquet, Exts: []string{".parquet"}, SchemaOf: Schema, Decode: ReadRowGroupRange, Index: indexObject, Stats: Stats}

// indexObject is the format's Indexer: the object's row groups, from its
// footer (two ranged reads), each hashed.
func indexObject(ctx context.Context, st store.Store, o store.Object, f *index.File, opts format.IndexOptions) error {
	md, err := readFooter(ctx, st, o.Key, o.Size)
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

// readFooter fetches the footer of the Parquet object at key, of size bytes,
// with two ranged reads, and returns its metadata.
func readFooter(ctx context.Context, st store.Store, key string, size int64) (*metadata.FileMetaData, error) {
	if size < 12 {
		return nil, fmt.Errorf("%s: %d bytes is too short for Parquet", key, size)
	}
	tail, err := format.ReadRange(ctx, st, key, size-8, 8)
	if err != nil {
		return nil, err
	}
	if string(tail[4:]) != magic {
		return nil, fmt.Errorf("%s: not a Parquet file (no PAR1 at the end)", key)
	}
	n := int64(binary.LittleEndian.Uint32(tail))
	if n <= 0 || n > MaxFooterBytes || n > size-12 {
		return nil, fmt.Errorf("%s: footer length %d does not fit the %d-byte file", key, n, size)
	}
	footer, err := format.ReadRange(ctx, st, key, size-8-n, n)
	if err != nil {
		return nil, err
	}
	return ParseFooter(key, footer, size)
}

package parquet

import (
	"context"
	"fmt"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// Format is Parquet: one shard per row group, fetched as the row group's
// byte range and the object's footer.
var Format = &format.Footed{Name: datav1alpha1.FormatParquet, Exts: []string{".parquet"}, SchemaOf: Schema, Decode: ReadRowGroupRange, Index: indexObject}

// indexObject is the format's Indexer: the object's row groups, from its
// footer (two ranged reads), each hashed.
func indexObject(ctx context.Context, st store.Store, o store.Object, f *index.File, opts format.IndexOptions) error {
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

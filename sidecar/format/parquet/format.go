package parquet

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/parquet/metadata"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// Format is Parquet: one shard per row group, fetched as the row group's
// byte range and the object's footer.
var Format = &format.Footed{Name: datav1alpha1.FormatParquet, Exts: []string{".parquet"}, SchemaOf: Schema, Decode: ReadRowGroupRange, Index: indexObject, Stats: Stats}

// tailBytes is what indexing reads of an object's end at once: its footer
// in one request, and a small object whole (its row groups hashed from
// the same bytes).
const tailBytes = 64 << 10

// indexObject is the format's Indexer: the object's row groups, from its
// footer, each hashed. The object's last tailBytes come in one ranged read;
// a footer longer than they hold takes a second, a row group before them
// one more.
func indexObject(ctx context.Context, st store.Store, o store.Object, f *indexfile.File, opts format.IndexOptions) error {
	if o.Size < 12 {
		return fmt.Errorf("%s: %d bytes is too short for Parquet", o.Key, o.Size)
	}
	start := max(o.Size-tailBytes, 0)
	tail, err := format.ReadRange(ctx, st, o.Key, start, o.Size-start)
	if err != nil {
		return err
	}
	md, err := footerOf(ctx, st, o.Key, o.Size, tail)
	if err != nil {
		return err
	}
	rgs, err := RowGroups(o.Key, md, o.Size)
	if err != nil {
		return err
	}
	for p, rg := range rgs {
		var sum string
		if rg.Offset >= start { // in the tail read
			s, err := checksum.Of(opts.Hash, tail[rg.Offset-start:rg.Offset-start+rg.Length])
			if err != nil {
				return err
			}
			sum = s.String()
		} else if sum, err = format.HashRange(ctx, st, o.Key, rg.Offset, rg.Length, opts.Hash); err != nil {
			return err
		}
		f.Shards = append(f.Shards, indexfile.Entry{
			Name: fmt.Sprintf("%s#%d", o.Key, p), Object: o.Key, Part: p,
			Offset: rg.Offset, Length: rg.Length, Samples: rg.Rows, Hash: sum,
			ObjectSize: o.Size, FooterOffset: o.Size - 8 - int64(md.Size()), FooterLength: 8 + int64(md.Size()),
		})
	}
	return nil
}

// ReadFooter reads and parses the footer of the Parquet object at key, of
// size bytes, with ranged reads of its end, and returns it with the
// footer's range (the footer, its length and PAR1).
func ReadFooter(ctx context.Context, st store.Store, key string, size int64) (md *metadata.FileMetaData, off, n int64, err error) {
	if size < 12 {
		return nil, 0, 0, fmt.Errorf("%s: %d bytes is too short for Parquet", key, size)
	}
	start := max(size-tailBytes, 0)
	tail, err := format.ReadRange(ctx, st, key, start, size-start)
	if err != nil {
		return nil, 0, 0, err
	}
	if md, err = footerOf(ctx, st, key, size, tail); err != nil {
		return nil, 0, 0, err
	}
	return md, size - 8 - int64(md.Size()), 8 + int64(md.Size()), nil
}

// footerOf parses the footer of the Parquet object at key, of size bytes,
// from tail (its last bytes), reading the rest of a footer longer than
// tail holds.
func footerOf(ctx context.Context, st store.Store, key string, size int64, tail []byte) (*metadata.FileMetaData, error) {
	end := tail[len(tail)-8:]
	if string(end[4:]) != magic {
		return nil, fmt.Errorf("%s: not a Parquet file (no PAR1 at the end)", key)
	}
	n := int64(binary.LittleEndian.Uint32(end))
	if n <= 0 || n > MaxFooterBytes || n > size-12 {
		return nil, fmt.Errorf("%s: footer length %d does not fit the %d-byte file", key, n, size)
	}
	if have := int64(len(tail)) - 8; n <= have {
		return ParseFooter(key, tail[have-n:have], size)
	}
	footer, err := format.ReadRange(ctx, st, key, size-8-n, n)
	if err != nil {
		return nil, err
	}
	return ParseFooter(key, footer, size)
}

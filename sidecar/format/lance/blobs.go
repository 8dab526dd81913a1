package lance

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/lance/lancefile"
	"github.com/shardfeed/shardfeed/sidecar/format/lance/lancetable"
)

// Blob v2's packed and dedicated values lie in blob files beside their
// data file (lancefile.BlobFileName). A shard's parts hold the byte
// ranges of its live rows' blobs, read by range: never a whole blob file
// unless its rows are all the shard's.

// blobKey is the key of a data file's blob file of an id.
func blobKey(dataKey string, id uint32) string {
	return strings.TrimSuffix(dataKey, ".lance") + "/" + lancefile.BlobFileName(id)
}

// blobFile is a blob file opened for indexing, read by range from the
// store; segs are the reads of the shard being indexed, kept to hash.
type blobFile struct {
	key  string
	size uint64
	read func(off, n uint64) ([]byte, error)
	segs []segment
}

func (b *blobFile) ReadAt(off, n uint64) ([]byte, error) {
	if off > b.size || n > b.size-off {
		return nil, fmt.Errorf("%s: a blob at [%d, +%d) lies past its %d bytes", b.key, off, n, b.size)
	}
	data, err := b.read(off, n)
	if err != nil {
		return nil, err
	}
	b.segs = append(b.segs, segment{off: off, data: data})
	return data, nil
}

// ranges merges the shard's reads that touch or overlap into the ranges
// its parts fetch (no gaps: the bytes between two blobs may be another
// shard's or a deleted row's).
func (b *blobFile) ranges() []segment {
	segs := slices.Clone(b.segs)
	slices.SortFunc(segs, func(x, y segment) int { return cmp.Compare(x.off, y.off) })
	var out []segment
	for _, g := range segs {
		if n := len(out); n > 0 && g.off <= out[n-1].off+uint64(len(out[n-1].data)) {
			last := &out[n-1]
			if end := g.off + uint64(len(g.data)); end > last.off+uint64(len(last.data)) {
				last.data = append(slices.Clip(last.data), g.data[last.off+uint64(len(last.data))-g.off:]...)
			}
			continue
		}
		out = append(out, g)
	}
	return out
}

// blobFiles opens data file f's blob files for indexing, each once.
func (ix *indexer) blobFiles(ctx context.Context, f *openFile) lancetable.BlobFiles {
	return func(id uint32) (lancefile.Source, error) {
		key := blobKey(f.key, id)
		if b, ok := f.blobs[key]; ok {
			return b, nil
		}
		o, err := ix.ds.st.Stat(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("blob file %s of %s: %w", key, f.key, err)
		}
		b := &blobFile{key: key, size: uint64(o.Size), read: func(off, n uint64) ([]byte, error) { //nolint:gosec // a size
			return format.ReadRange(ctx, ix.ds.st, key, int64(off), int64(n)) //nolint:gosec // bounded by the object's size
		}}
		if f.blobs == nil {
			f.blobs = map[string]*blobFile{}
		}
		f.blobs[key] = b
		return b, nil
	}
}

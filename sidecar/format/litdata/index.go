package litdata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// IndexName is LitData's own index, beside the chunks.
const IndexName = "index.json"

// maxIndexBytes and maxChunkBytes bound what indexing reads of LitData's
// index and of one chunk.
const (
	maxIndexBytes = 64 << 20
	maxChunkBytes = 4 << 30
)

// litIndex is LitData's index.json: its chunks in order and how their
// items are written.
type litIndex struct {
	Chunks []struct {
		ChunkSize int64  `json:"chunk_size"`
		Filename  string `json:"filename"`
		// Dim is a TokensLoader chunk's tokens (its items' lengths).
		Dim *int64 `json:"dim"`
	} `json:"chunks"`
	Config *struct {
		Compression *string         `json:"compression"`
		Level       *string         `json:"compression_level"`
		Encryption  json.RawMessage `json:"encryption"`
		DataFormat  []string        `json:"data_format"`
		DataSpec    string          `json:"data_spec"`
		ItemLoader  string          `json:"item_loader"`
	} `json:"config"`
	// wrap is how the chunks are compressed ("": not).
	wrap string
}

var _ format.StreamIndexer = Format{}

// IndexObject implements format.Indexer for one chunk (Registry.Index
// hands the stream's chunks to IndexObjects).
func (x Format) IndexObject(ctx context.Context, st store.Store, o store.Object, f *indexfile.File, opts format.IndexOptions) error {
	return x.IndexObjects(ctx, st, []store.Object{o}, f, opts)
}

// IndexObjects implements format.StreamIndexer: LitData's index.json says
// which chunks the stream has, in order, and how their items are written;
// each chunk is read once, decoded whole (so that what the sidecar will
// not read is refused now) and hashed. A shard is a chunk.
func (Format) IndexObjects(ctx context.Context, st store.Store, objects []store.Object, f *indexfile.File, opts format.IndexOptions) error {
	li, err := readIndex(ctx, st)
	if err != nil {
		return fmt.Errorf("%s%s: %w", st.URI(), IndexName, err)
	}
	blockSize, err := opts.OwnCount(blockSizeOption)
	if err != nil {
		return err
	}
	if li.Config.ItemLoader == tokensLoader {
		return indexTokens(ctx, st, objects, li, f, blockSize, opts)
	}
	if blockSize != 0 {
		return fmt.Errorf("%s%s: a block size (--block-size, spec.streams[].litdata.blockSize) is for a dataset written with LitData's TokensLoader, "+
			"and its item loader is %s: drop it", st.URI(), IndexName, li.Config.ItemLoader)
	}
	columns, err := Columns(li.Config.DataSpec)
	if err != nil {
		return fmt.Errorf("%s%s: %w", st.URI(), IndexName, err)
	}
	if len(columns) != len(li.Config.DataFormat) {
		return fmt.Errorf("%s%s: %d leaves and %d data formats", st.URI(), IndexName, len(columns), len(li.Config.DataFormat))
	}
	f.LitData = &indexfile.LitData{Columns: columns, DataFormats: li.Config.DataFormat, CompressionLevel: li.wrap}
	for i, df := range li.Config.DataFormat {
		if df == "numpy" || df == "tensor" {
			continue // their dtype and shape are the items'
		}
		if _, err := leafOf(df); err != nil {
			return fmt.Errorf("%s%s: column %q: %w", st.URI(), IndexName, columns[i], err)
		}
	}
	by := make(map[string]store.Object, len(objects))
	for _, o := range objects {
		by[o.Key] = o
	}
	for i, c := range li.Chunks {
		o, stored, data, err := readChunk(ctx, st, by, c.Filename, f.LitData)
		if err != nil {
			return err
		}
		if err := LearnArrays(f.LitData, data); err != nil {
			return fmt.Errorf("%s%s: %w", st.URI(), o.Key, err)
		}
		if _, err := Schema(f.LitData); err == nil || c.ChunkSize > 0 {
			// (An empty chunk before any item told an array's shape is
			// checked by the chunks after it.)
			rec, err := decodePlain(f.LitData, data, c.ChunkSize, nil)
			if err != nil {
				return fmt.Errorf("%s%s: %w", st.URI(), o.Key, err)
			}
			rec.Release()
		}
		sum, _ := checksum.Of(opts.Hash, stored)
		f.Shards = append(f.Shards, indexfile.Entry{Name: o.Key, Object: o.Key, Length: o.Size, Samples: c.ChunkSize, Hash: sum.String(), ObjectSize: o.Size})
		if opts.Progress != nil {
			opts.Progress(i+1, len(li.Chunks), o.Key)
		}
	}
	if _, err := Schema(f.LitData); err != nil {
		return fmt.Errorf("%s%s: %w (no item holds it)", st.URI(), IndexName, err)
	}
	return nil
}

// readIndex reads and checks LitData's index.json: the item loader and
// options shardfeed reads.
func readIndex(ctx context.Context, st store.Store) (*litIndex, error) {
	r, err := st.Get(ctx, IndexName, 0, -1)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, errors.New("not found: a LitData dataset is litdata.optimize's output, its index.json beside its chunks")
		}
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(r, maxIndexBytes+1))
	_ = r.Close()
	if err != nil {
		return nil, err
	}
	if len(data) > maxIndexBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxIndexBytes)
	}
	var li litIndex
	if err := json.Unmarshal(data, &li); err != nil {
		return nil, fmt.Errorf("not LitData's index: %w", err)
	}
	switch c := li.Config; {
	case c == nil || len(li.Chunks) == 0:
		return nil, errors.New(`not LitData's index: it needs "chunks" and "config"`)
	case c.ItemLoader != "PyTreeLoader" && c.ItemLoader != tokensLoader:
		return nil, fmt.Errorf("its item loader is %q: shardfeed reads LitData's default, PyTreeLoader, and TokensLoader", c.ItemLoader)
	case len(c.Encryption) > 0 && string(c.Encryption) != "null":
		return nil, errors.New("its chunks are encrypted: shardfeed does not read encrypted LitData chunks")
	}
	if li.wrap, err = compressionOf(li.Config.Compression, li.Config.Level); err != nil {
		return nil, err
	}
	for _, c := range li.Chunks {
		if c.Filename == "" || c.ChunkSize < 0 {
			return nil, fmt.Errorf("a chunk %q of %d items", c.Filename, c.ChunkSize)
		}
	}
	return &li, nil
}

const tokensLoader = "TokensLoader"

// indexTokens indexes a dataset written with LitData's TokensLoader: each
// chunk's items are 1-D token arrays laid end to end (no per-item
// header), and a sample is a block of blockSize tokens of one chunk,
// as TokensLoader(block_size) reads them (a chunk's rest left out). Each
// chunk is read once, its layout checked against index.json and hashed.
func indexTokens(ctx context.Context, st store.Store, objects []store.Object, li *litIndex, f *indexfile.File, blockSize int64, opts format.IndexOptions) error {
	where := st.URI() + IndexName
	if blockSize <= 0 {
		return fmt.Errorf("%s: the dataset was written with LitData's TokensLoader: give its samples' length in tokens, "+
			"--block-size N or spec.streams[].litdata.blockSize (TokensLoader's block_size)", where)
	}
	if len(li.Config.DataFormat) != 1 {
		return fmt.Errorf("%s: a TokensLoader dataset of %d data formats %v: it has one, the tokens' 1-D array", where, len(li.Config.DataFormat), li.Config.DataFormat)
	}
	lf, err := leafOf(li.Config.DataFormat[0])
	if err != nil || lf.elem == nil {
		return fmt.Errorf("%s: a TokensLoader dataset's data format is a 1-D array (no_header_numpy:N, no_header_tensor:N), not %q", where, li.Config.DataFormat[0])
	}
	f.LitData = &indexfile.LitData{Columns: []string{"value"}, DataFormats: li.Config.DataFormat, BlockSize: blockSize, CompressionLevel: li.wrap}
	by := make(map[string]store.Object, len(objects))
	for _, o := range objects {
		by[o.Key] = o
	}
	for i, c := range li.Chunks {
		if c.Dim == nil || *c.Dim < 0 {
			return fmt.Errorf("%s: chunk %q has no count of tokens (dim): re-run litdata.optimize with item_loader=TokensLoader()", where, c.Filename)
		}
		o, stored, data, err := readChunk(ctx, st, by, c.Filename, f.LitData)
		if err != nil {
			return err
		}
		if _, err := tokensOf(data, c.ChunkSize, *c.Dim, lf.size); err != nil {
			return fmt.Errorf("%s%s: %w", st.URI(), o.Key, err)
		}
		sum, _ := checksum.Of(opts.Hash, stored)
		f.Shards = append(f.Shards, indexfile.Entry{Name: o.Key, Object: o.Key, Length: o.Size, Samples: *c.Dim / blockSize,
			Hash: sum.String(), ObjectSize: o.Size})
		if opts.Progress != nil {
			opts.Progress(i+1, len(li.Chunks), o.Key)
		}
	}
	return nil
}

// readChunk reads the chunk index.json names (which the stream must hold,
// within the bound on a chunk): as stored, and inflated.
func readChunk(ctx context.Context, st store.Store, by map[string]store.Object, name string, l *indexfile.LitData) (o store.Object, stored, data []byte, err error) {
	o, ok := by[name]
	if !ok {
		return o, nil, nil, fmt.Errorf("%s%s lists chunk %q, which is not in the stream", st.URI(), IndexName, name)
	}
	if o.Size > maxChunkBytes {
		return o, nil, nil, fmt.Errorf("%s%s: %d bytes, above the bound of %d on a chunk", st.URI(), o.Key, o.Size, int64(maxChunkBytes))
	}
	if stored, err = format.ReadRange(ctx, st, o.Key, 0, o.Size); err != nil {
		return o, nil, nil, err
	}
	if data, err = Inflate(l, stored); err != nil {
		return o, nil, nil, fmt.Errorf("%s%s: %w", st.URI(), o.Key, err)
	}
	return o, stored, data, nil
}

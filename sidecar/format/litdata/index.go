package litdata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/index"
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
	} `json:"chunks"`
	Config *struct {
		Compression *string         `json:"compression"`
		Encryption  json.RawMessage `json:"encryption"`
		DataFormat  []string        `json:"data_format"`
		DataSpec    string          `json:"data_spec"`
		ItemLoader  string          `json:"item_loader"`
	} `json:"config"`
}

var _ format.StreamIndexer = Format{}

// IndexObject implements format.Indexer for one chunk (Registry.Index
// hands the stream's chunks to IndexObjects).
func (x Format) IndexObject(ctx context.Context, st store.Store, o store.Object, f *index.File, opts format.IndexOptions) error {
	return x.IndexObjects(ctx, st, []store.Object{o}, f, opts)
}

// IndexObjects implements format.StreamIndexer: LitData's index.json says
// which chunks the stream has, in order, and how their items are written;
// each chunk is read once, decoded whole (so that what the sidecar will
// not read is refused now) and hashed. A shard is a chunk.
func (Format) IndexObjects(ctx context.Context, st store.Store, objects []store.Object, f *index.File, opts format.IndexOptions) error {
	li, err := readIndex(ctx, st)
	if err != nil {
		return fmt.Errorf("%s%s: %w", st.URI(), IndexName, err)
	}
	columns, err := Columns(li.Config.DataSpec)
	if err != nil {
		return fmt.Errorf("%s%s: %w", st.URI(), IndexName, err)
	}
	if len(columns) != len(li.Config.DataFormat) {
		return fmt.Errorf("%s%s: %d leaves and %d data formats", st.URI(), IndexName, len(columns), len(li.Config.DataFormat))
	}
	f.LitData = &index.LitData{Columns: columns, DataFormats: li.Config.DataFormat}
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
		o, ok := by[c.Filename]
		if !ok {
			return fmt.Errorf("%s%s lists chunk %q, which is not in the stream", st.URI(), IndexName, c.Filename)
		}
		if o.Size > maxChunkBytes {
			return fmt.Errorf("%s%s: %d bytes, above the bound of %d on a chunk", st.URI(), o.Key, o.Size, int64(maxChunkBytes))
		}
		data, err := format.ReadRange(ctx, st, o.Key, 0, o.Size)
		if err != nil {
			return err
		}
		if err := LearnArrays(f.LitData, data); err != nil {
			return fmt.Errorf("%s%s: %w", st.URI(), o.Key, err)
		}
		if _, err := Schema(f.LitData); err == nil || c.ChunkSize > 0 {
			// (An empty chunk before any item told an array's shape is
			// checked by the chunks after it.)
			rec, err := Decode(f.LitData, data, c.ChunkSize, nil)
			if err != nil {
				return fmt.Errorf("%s%s: %w", st.URI(), o.Key, err)
			}
			rec.Release()
		}
		sum, _ := checksum.Of(opts.Hash, data)
		f.Shards = append(f.Shards, index.Entry{Name: o.Key, Object: o.Key, Length: o.Size, Samples: c.ChunkSize, Hash: sum.String(), ObjectSize: o.Size})
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
	case c.ItemLoader != "PyTreeLoader":
		return nil, fmt.Errorf("its item loader is %q: shardfeed reads LitData's default, PyTreeLoader (TokensLoader datasets are not read yet)", c.ItemLoader)
	case c.Compression != nil && *c.Compression != "":
		return nil, fmt.Errorf("its chunks are compressed (%s): optimize without compression (the sidecar's cache holds chunks as they are stored)", *c.Compression)
	case len(c.Encryption) > 0 && string(c.Encryption) != "null":
		return nil, errors.New("its chunks are encrypted: shardfeed does not read encrypted LitData chunks")
	}
	for _, c := range li.Chunks {
		if c.Filename == "" || c.ChunkSize < 0 {
			return nil, fmt.Errorf("a chunk %q of %d items", c.Filename, c.ChunkSize)
		}
	}
	return &li, nil
}

package index

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/checksum"
	"github.com/shardfeed/shardfeed/sidecar/format/parquet"
	"github.com/shardfeed/shardfeed/sidecar/store"
)

// Version is the version of the shardfeed index format.
const Version = 1

// File is a shardfeed index (docs/formats.md): the shards of a stream as
// byte ranges of its objects, written by `shardfeed index` as index.json.
type File struct {
	// Shardfeed is the index format version.
	Shardfeed int `json:"shardfeed"`
	// Format of the stream's objects: parquet (jsonl, csv, tsv and arrow
	// come with their readers).
	Format string  `json:"format"`
	Shards []Entry `json:"shards"`
}

// Entry is one shard: part Part (a Parquet row group) of Object, stored in
// bytes [Offset, Offset+Length).
type Entry struct {
	Name    string `json:"name"`
	Object  string `json:"object"`
	Part    int    `json:"part"`
	Offset  int64  `json:"offset"`
	Length  int64  `json:"length"`
	Samples int64  `json:"samples"`
	// Hash is the "algo:hex" digest of the shard's bytes.
	Hash string `json:"hash"`
}

// StreamIndex returns the planner's view of the index.
func (f *File) StreamIndex() planner.StreamIndex {
	out := planner.StreamIndex{Shards: make([]planner.Shard, len(f.Shards))}
	for i, e := range f.Shards {
		out.Shards[i] = planner.Shard{Name: e.Name, Samples: e.Samples, Bytes: e.Length, Hash: e.Hash}
	}
	return out
}

func (f *File) check() error {
	if f.Shardfeed != Version {
		return fmt.Errorf("shardfeed index version %d is not supported: this shardfeed reads version %d; re-run shardfeed index", f.Shardfeed, Version)
	}
	if f.Format != "parquet" {
		return fmt.Errorf("shardfeed index format %q is not supported: use parquet", f.Format)
	}
	if len(f.Shards) == 0 {
		return errors.New(`shardfeed index lists no shards ("shards" is empty)`)
	}
	seen := map[string]int{}
	for i, e := range f.Shards {
		if e.Name == "" || e.Object == "" || e.Offset < 0 || e.Length < 0 || e.Samples < 0 || e.Part < 0 {
			return fmt.Errorf("shardfeed index: shards[%d] needs a name, an object and non-negative part, offset, length and samples", i)
		}
		if j, dup := seen[e.Name]; dup {
			return fmt.Errorf("shardfeed index: shards[%d] %q is also shards[%d]", i, e.Name, j)
		}
		seen[e.Name] = i
		if _, err := checksum.Parse(e.Hash); err != nil {
			return fmt.Errorf("shardfeed index: shards[%d]: %w", i, err)
		}
	}
	return nil
}

// Progress reports how many of the objects are indexed.
type Progress func(done, total int, object string)

// Build indexes the objects of a stream in format: for Parquet, every
// *.parquet object's row groups from its footer, each hashed with algo.
func Build(ctx context.Context, st store.Store, format, algo string, progress Progress) (*File, error) {
	if format != "parquet" {
		return nil, fmt.Errorf("shardfeed index: format %q is not supported yet: use parquet (MDS streams have their own index.json)", format)
	}
	if _, err := checksum.Of(algo, nil); err != nil {
		return nil, err
	}
	objs, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	var parts []store.Object
	for _, o := range objs {
		if strings.HasSuffix(o.Key, ".parquet") {
			parts = append(parts, o)
		}
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("%s holds no *.parquet objects", st.URI())
	}
	f := &File{Shardfeed: Version, Format: format}
	for i, o := range parts {
		md, err := parquet.ReadFooter(ctx, st, o.Key, o.Size)
		if err != nil {
			return nil, err
		}
		rgs, err := parquet.RowGroups(o.Key, md, o.Size)
		if err != nil {
			return nil, err
		}
		for p, rg := range rgs {
			sum, err := hashRange(ctx, st, o.Key, rg.Offset, rg.Length, algo)
			if err != nil {
				return nil, err
			}
			f.Shards = append(f.Shards, Entry{
				Name: fmt.Sprintf("%s#%d", o.Key, p), Object: o.Key, Part: p,
				Offset: rg.Offset, Length: rg.Length, Samples: rg.Rows, Hash: sum,
			})
		}
		if progress != nil {
			progress(i+1, len(parts), o.Key)
		}
	}
	return f, nil
}

func hashRange(ctx context.Context, st store.Store, key string, off, n int64, algo string) (string, error) {
	r, err := st.Get(ctx, key, off, n)
	if err != nil {
		return "", err
	}
	defer func() { _ = r.Close() }()
	h := checksum.Sum{Algo: algo}.New()
	got, err := io.Copy(h, r)
	if err != nil {
		return "", err
	}
	if got != n {
		return "", fmt.Errorf("%s: read %d bytes of [%d, %d)", key, got, off, off+n)
	}
	return algo + ":" + hex.EncodeToString(h.Sum(nil)), nil
}

// Write stores the index as index.json in the stream's prefix.
func Write(ctx context.Context, st store.Store, f *File) error {
	data, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		return err
	}
	return st.Put(ctx, FileName, strings.NewReader(string(data)), int64(len(data)))
}

// ReadStore reads the index.json of a stream's prefix.
func ReadStore(ctx context.Context, st store.Store) (planner.StreamIndex, error) {
	r, err := st.Get(ctx, FileName, 0, -1)
	if err != nil {
		return planner.StreamIndex{}, fmt.Errorf("%w (write one with: shardfeed index %s)", err, st.URI())
	}
	defer func() { _ = r.Close() }()
	x, err := Read(r)
	if err != nil {
		return planner.StreamIndex{}, fmt.Errorf("%s: %w", path.Join(st.URI(), FileName), err)
	}
	return x, nil
}

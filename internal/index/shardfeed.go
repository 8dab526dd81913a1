package index

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/format/arrowipc"
	"github.com/shardfeed/shardfeed/sidecar/format/parquet"
	"github.com/shardfeed/shardfeed/sidecar/format/text"
)

// Version is the version of the shardfeed index format.
const Version = 1

// File is a shardfeed index (docs/formats.md): the shards of a stream as
// byte ranges of its objects, written by `shardfeed index` as index.json.
type File struct {
	// Shardfeed is the index format version.
	Shardfeed int `json:"shardfeed"`
	// Format of the stream's objects: parquet, jsonl, csv or tsv.
	Format string `json:"format"`
	// Schema of a jsonl, csv or tsv stream, inferred by shardfeed index.
	Schema []text.Field `json:"schema,omitempty"`
	Shards []Entry      `json:"shards"`
}

// Entry is one shard: part Part (a Parquet row group, or a run of text
// records) of Object, stored in bytes [Offset, Offset+Length).
type Entry struct {
	Name    string `json:"name"`
	Object  string `json:"object"`
	Part    int    `json:"part"`
	Offset  int64  `json:"offset"`
	Length  int64  `json:"length"`
	Samples int64  `json:"samples"`
	// Hash is the "algo:hex" digest of the shard's bytes.
	Hash string `json:"hash"`
	// ObjectSize is the size of the whole object.
	ObjectSize int64 `json:"objectSize,omitempty"`
	// FooterOffset and FooterLength give a Parquet object's footer range
	// (the footer, its length and PAR1): with the shard's own range, all a
	// reader fetches to decode the row group.
	FooterOffset int64 `json:"footerOffset,omitempty"`
	FooterLength int64 `json:"footerLength,omitempty"`
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
	switch f.Format {
	case "parquet", "arrow":
	case text.JSONL, text.CSV, text.TSV:
		if len(f.Schema) == 0 {
			return fmt.Errorf("shardfeed index of a %s stream needs its schema: re-run shardfeed index", f.Format)
		}
		if _, err := text.Schema(f.Schema); err != nil {
			return fmt.Errorf("shardfeed index schema: %w", err)
		}
	default:
		return fmt.Errorf("shardfeed index format %q is not supported: use parquet, arrow, jsonl, csv or tsv", f.Format)
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

// suffixes are the object names each format indexes.
var suffixes = map[string][]string{
	"parquet":  {".parquet"},
	text.JSONL: {".jsonl", ".json", ".ndjson"},
	text.CSV:   {".csv"},
	text.TSV:   {".tsv", ".tab"},
	"arrow":    {".arrow", ".feather", ".ipc"},
}

// BuildOptions tune Build.
type BuildOptions struct {
	// Hash is the algorithm of the shards' content hashes (default xxh64).
	Hash string
	// ShardBytes is the size of a text shard (default 64 MiB).
	ShardBytes int64
	// TempDir holds text objects while they are scanned (default: os.TempDir).
	TempDir string
	// Schema, for text formats, is used instead of the inferred one; the
	// records must fit it.
	Schema   []text.Field
	Progress Progress
}

// Build indexes the objects of a stream in format: for Parquet, every
// object's row groups from its footer; for JSONL, CSV and TSV, runs of whole
// records of about ShardBytes, with the schema inferred from the first
// records. Every shard's bytes are hashed.
func Build(ctx context.Context, st store.Store, format string, opts BuildOptions) (*File, error) {
	exts, ok := suffixes[format]
	if !ok {
		return nil, fmt.Errorf("shardfeed index: format %q is not supported: use parquet, arrow, jsonl, csv or tsv (MDS streams have their own index.json)", format)
	}
	if opts.Hash == "" {
		opts.Hash = "xxh64"
	}
	if opts.ShardBytes <= 0 {
		opts.ShardBytes = 64 << 20
	}
	algo := opts.Hash
	if _, err := checksum.Of(algo, nil); err != nil {
		return nil, err
	}
	objs, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	var parts []store.Object
	for _, o := range objs {
		for _, ext := range exts {
			if strings.HasSuffix(o.Key, ext) {
				parts = append(parts, o)
				break
			}
		}
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("%s holds no %s objects (%s)", st.URI(), format, strings.Join(exts, ", "))
	}
	f := &File{Shardfeed: Version, Format: format}
	progress := opts.Progress
	switch format {
	case "arrow":
		return f, buildArrow(ctx, st, f, parts, opts)
	case text.JSONL, text.CSV, text.TSV:
		return f, buildText(ctx, st, f, parts, opts)
	}
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
				ObjectSize: o.Size, FooterOffset: o.Size - 8 - int64(md.Size()), FooterLength: 8 + int64(md.Size()),
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
		return planner.StreamIndex{}, missingIndex(err, st)
	}
	defer func() { _ = r.Close() }()
	x, err := Read(r)
	if err != nil {
		return planner.StreamIndex{}, fmt.Errorf("%s: %w", path.Join(st.URI(), FileName), err)
	}
	return x, nil
}

// buildText scans every text object (downloaded to a temporary file once),
// cuts it into shards and merges the objects' inferred schemas.
func buildText(ctx context.Context, st store.Store, f *File, parts []store.Object, opts BuildOptions) error {
	for i, o := range parts {
		if err := indexTextObject(ctx, st, f, o, opts); err != nil {
			return fmt.Errorf("%s%s: %w", st.URI(), o.Key, err)
		}
		if opts.Progress != nil {
			opts.Progress(i+1, len(parts), o.Key)
		}
	}
	return nil
}

func indexTextObject(ctx context.Context, st store.Store, f *File, o store.Object, opts BuildOptions) error {
	body, err := st.Get(ctx, o.Key, 0, -1)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(opts.TempDir, "shardfeed-index-*")
	if err != nil {
		_ = body.Close()
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()); _ = tmp.Close() }()
	_, err = io.Copy(tmp, body)
	_ = body.Close()
	if err != nil {
		return err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	fields, chunks, err := text.Scan(tmp, f.Format, opts.ShardBytes)
	if err != nil {
		return err
	}
	if opts.Schema != nil {
		if err := fitsSchema(f.Format, fields, opts.Schema); err != nil {
			return err
		}
		f.Schema = opts.Schema
	} else if err := mergeSchema(f, fields); err != nil {
		return err
	}
	for p, c := range chunks {
		h := checksum.Sum{Algo: opts.Hash}.New()
		if _, err := io.Copy(h, io.NewSectionReader(tmp, c.Offset, c.Length)); err != nil {
			return err
		}
		f.Shards = append(f.Shards, Entry{
			Name: fmt.Sprintf("%s#%d", o.Key, p), Object: o.Key, Part: p,
			Offset: c.Offset, Length: c.Length, Samples: c.Records,
			Hash: opts.Hash + ":" + hex.EncodeToString(h.Sum(nil)), ObjectSize: o.Size,
		})
	}
	return nil
}

// mergeSchema widens the stream's schema with one object's; CSV objects
// must have the same columns.
func mergeSchema(f *File, fields []text.Field) error {
	if f.Schema == nil {
		f.Schema = fields
		return nil
	}
	at := map[string]int{}
	for i, fl := range f.Schema {
		at[fl.Name] = i
	}
	if f.Format != text.JSONL {
		var a, b []string
		for _, fl := range f.Schema {
			a = append(a, fl.Name)
		}
		for _, fl := range fields {
			b = append(b, fl.Name)
		}
		if strings.Join(a, "\x00") != strings.Join(b, "\x00") {
			return fmt.Errorf("columns %q differ from the stream's first object's %q", b, a)
		}
	}
	for _, fl := range fields {
		if i, ok := at[fl.Name]; ok {
			f.Schema[i].Type = text.Widen(f.Schema[i].Type, fl.Type)
		} else {
			f.Schema = append(f.Schema, fl)
		}
	}
	return nil
}

// buildArrow reads every Arrow IPC object once: its record batches, their
// ranges and hashes, and its tail (footer) range.
func buildArrow(ctx context.Context, st store.Store, f *File, parts []store.Object, opts BuildOptions) error {
	for i, o := range parts {
		body, err := st.Get(ctx, o.Key, 0, -1)
		if err != nil {
			return err
		}
		data, err := io.ReadAll(body)
		_ = body.Close()
		if err != nil {
			return err
		}
		batches, err := arrowipc.Batches(data)
		if err != nil {
			return fmt.Errorf("%s%s: %w", st.URI(), o.Key, err)
		}
		size := int64(len(data))
		tail, err := arrowipc.FooterLength(data[size-10:], size)
		if err != nil {
			return fmt.Errorf("%s%s: %w", st.URI(), o.Key, err)
		}
		for p, b := range batches {
			sum, _ := checksum.Of(opts.Hash, data[b.Offset:b.Offset+b.Length])
			f.Shards = append(f.Shards, Entry{
				Name: fmt.Sprintf("%s#%d", o.Key, p), Object: o.Key, Part: p,
				Offset: b.Offset, Length: b.Length, Samples: b.Rows, Hash: sum.String(),
				ObjectSize: size, FooterOffset: size - tail, FooterLength: tail,
			})
		}
		if opts.Progress != nil {
			opts.Progress(i+1, len(parts), o.Key)
		}
	}
	return nil
}

// fitsSchema checks an object's inferred fields against a given schema: the
// same CSV header, and values the given types hold.
func fitsSchema(format string, inferred, given []text.Field) error {
	if _, err := text.Schema(given); err != nil {
		return fmt.Errorf("the given schema: %w", err)
	}
	types := map[string]string{}
	for _, g := range given {
		types[g.Name] = g.Type
	}
	if format != text.JSONL {
		if len(inferred) != len(given) {
			return fmt.Errorf("the header has %d columns, the given schema %d", len(inferred), len(given))
		}
		for i := range inferred {
			if inferred[i].Name != given[i].Name {
				return fmt.Errorf("header column %d is %q, the given schema says %q", i+1, inferred[i].Name, given[i].Name)
			}
		}
	}
	for _, fl := range inferred {
		if want, ok := types[fl.Name]; ok && text.Widen(want, fl.Type) != want {
			return fmt.Errorf("column %q holds %s values, the given schema says %s", fl.Name, fl.Type, want)
		}
	}
	return nil
}

package text

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// Format is a text format: JSON Lines (comma 0) or records delimited by
// comma, with a header row. A shard is a run of whole records of about
// the index's shard size; the schema is the index's.
type Format struct {
	kind     datav1alpha1.ShardFormat
	comma    rune
	suffixes []string
}

var (
	_ format.Format  = (*Format)(nil)
	_ format.Indexer = (*Format)(nil)
)

func (t *Format) isJSON() bool { return t.comma == 0 }

// String returns the format's name.
func (t *Format) String() string { return string(t.kind) }

// Kind implements format.Format.
func (t *Format) Kind() datav1alpha1.ShardFormat { return t.kind }

// Suffixes implements format.Indexer.
func (t *Format) Suffixes() []string { return t.suffixes }

// Open implements format.Format.
func (t *Format) Open(l *index.Layout) (format.Reader, error) {
	f, err := format.FileOf(l)
	if err != nil {
		return nil, err
	}
	if len(f.Schema) == 0 {
		return nil, fmt.Errorf("shardfeed index of a %s stream needs its schema: re-run shardfeed index", t.kind)
	}
	schema, err := Schema(f.Schema)
	if err != nil {
		return nil, fmt.Errorf("shardfeed index schema: %w", err)
	}
	return &reader{t: t, f: f, schema: schema}, nil
}

// IndexObject implements format.Indexer: the object is downloaded to a
// temporary file once, cut into shards at record boundaries, and its
// inferred schema merged into the stream's (or checked against the given).
func (t *Format) IndexObject(ctx context.Context, st store.Store, o store.Object, f *indexfile.File, opts format.IndexOptions) error {
	if err := t.indexObject(ctx, st, o, f, opts); err != nil {
		return fmt.Errorf("%s%s: %w", st.URI(), o.Key, err)
	}
	return nil
}

func (t *Format) indexObject(ctx context.Context, st store.Store, o store.Object, f *indexfile.File, opts format.IndexOptions) error {
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
	fields, chunks, err := Scan(tmp, t, opts.ShardBytes, opts.Schema)
	if err != nil {
		return err
	}
	if len(chunks) == 0 {
		return nil // an empty object, as an empty Parquet file: no shard
	}
	if opts.Schema != nil {
		if err := t.fitsSchema(fields, opts.Schema); err != nil {
			return err
		}
		f.Schema = opts.Schema
	} else if err := t.mergeSchema(f, fields); err != nil {
		return err
	}
	for p, c := range chunks {
		h := checksum.Sum{Algo: opts.Hash}.New()
		if _, err := io.Copy(h, io.NewSectionReader(tmp, c.Offset, c.Length)); err != nil {
			return err
		}
		f.Shards = append(f.Shards, indexfile.Entry{
			Name: fmt.Sprintf("%s#%d", o.Key, p), Object: o.Key, Part: p,
			Offset: c.Offset, Length: c.Length, Samples: c.Records,
			Hash: opts.Hash + ":" + hex.EncodeToString(h.Sum(nil)), ObjectSize: o.Size,
		})
	}
	return nil
}

// Merge implements format.Merger: an object's inferred schema widens the
// stream's, its shards follow the stream's.
func (t *Format) Merge(dst, obj *indexfile.File) error {
	if err := t.mergeSchema(dst, obj.Schema); err != nil {
		return err
	}
	dst.Shards = append(dst.Shards, obj.Shards...)
	return nil
}

// mergeSchema widens the stream's schema with one object's; CSV objects
// must have the same columns.
func (t *Format) mergeSchema(f *indexfile.File, fields []indexfile.Field) error {
	if f.Schema == nil {
		f.Schema = fields
		return nil
	}
	at := map[string]int{}
	for i, fl := range f.Schema {
		at[fl.Name] = i
	}
	if !t.isJSON() {
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
			f.Schema[i].Type = Widen(f.Schema[i].Type, fl.Type)
		} else {
			f.Schema = append(f.Schema, fl)
		}
	}
	return nil
}

// fitsSchema checks an object's header against a given schema, column for
// column (Scan has checked every value against the given types: a column
// of only nulls, inferred as utf8, fits any).
func (t *Format) fitsSchema(inferred, given []indexfile.Field) error {
	if _, err := Schema(given); err != nil {
		return fmt.Errorf("the given schema: %w", err)
	}
	if t.isJSON() {
		return nil
	}
	if len(inferred) != len(given) {
		return fmt.Errorf("the header has %d columns, the given schema %d", len(inferred), len(given))
	}
	for i := range inferred {
		if inferred[i].Name != given[i].Name {
			return fmt.Errorf("header column %d is %q, the given schema says %q", i+1, inferred[i].Name, given[i].Name)
		}
	}
	return nil
}

type reader struct {
	t      *Format
	f      *indexfile.File
	schema *arrow.Schema
}

func (r *reader) Parts(i int) []format.Part { return format.FileParts(r.f, i, false) }

func (r *reader) Schema(context.Context, format.ReadFunc) (*arrow.Schema, error) {
	return r.schema, nil
}

func (r *reader) Records(_ context.Context, _ int, parts [][]byte, columns []string) (array.RecordReader, error) {
	recs, err := Decode(parts[0], r.t, r.f.Schema, columns)
	if err != nil {
		return nil, err
	}
	return format.RecordsOf(recs)
}

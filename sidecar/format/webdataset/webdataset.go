// Package webdataset reads WebDataset tar shards: a sample is the members
// of a tar that share a key (the name up to the first dot of its base
// name), each extension a column. `shardfeed index` reads the tars'
// headers alone (ranged reads that skip the members' bytes) and cuts each
// tar into shards, runs of whole samples of about the shard size: a pod
// fetches the byte range of its shards' samples, never a whole tar.
// Compressed tars (.tar.gz, .tgz) cannot be read by range: each is one
// shard, fetched and read whole.
//
// # Byte layout
//
// A tar is 512-byte blocks: each member a header block, then its bytes
// padded to whole blocks; two zero blocks end the archive.
//
//	header: name [0,100) NUL-ended, mode [100,108), uid, gid, size
//	  [124,136), mtime, checksum [148,156), type [156] ('0' or NUL a
//	  file; 'x' a PAX header, 'L' a GNU long name, for the member after
//	  it), link name, magic [257,263) "ustar\0" (POSIX; "ustar  \0" GNU),
//	  prefix [345,500) joined before the name as "prefix/name" (ustar).
//	numbers: octal text, spaces or NULs around it; or base-256 when the
//	  first byte's high bit is set (GNU, for sizes of 8 GiB and more).
//	checksum: the sum of the header's bytes, its own field as spaces
//	  (unsigned, or signed as old tars summed).
//	PAX records: "LEN key=value\n", LEN the record's whole length; path
//	  and size override the member header's.
//
// A sample is the members whose names share a key (the name up to the
// first dot of its base name), each extension a column (lower-cased);
// names of the form __…__ are skipped, as webdataset skips them. The
// worked examples (worked_test.go) state each from a few blocks.
package webdataset

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// Format is the WebDataset format.
type Format struct{}

var _ format.Format = Format{}

// Kind implements format.Format.
func (Format) Kind() datav1alpha1.ShardFormat { return datav1alpha1.FormatWebDataset }

// Suffixes are the tars' names: plain, and compressed (read whole).
func (Format) Suffixes() []string { return []string{".tar", ".tar.gz", ".tgz"} }

// IndexHelp is shardfeed index's help of a webdataset stream.
func (Format) IndexHelp() string {
	return `URI holds WebDataset tar shards (or --shards names them by a brace
pattern): a sample is the members of a tar that share a key, each
extension a column (txt, text and transcript as text, cls, cls2, index,
inx and id as integers, json and jsn as their JSON text, every other as
bytes; --schema gives other types). Only the tars' headers are read, by
ranged reads of 16 tars at once (--concurrency); each tar is cut into
shards of whole samples of about --shard-size, and a pod fetches its
shards' byte ranges, never a whole tar. A compressed tar (.tar.gz, .tgz)
cannot be read by range: it is read whole, one shard. Where energon
prepare left Megatron-Energon's index beside the tars (.nv-meta/,
*.tar.idx), it is reused and no tar is read. The tars' contents are not
hashed (their headers' checksums are checked where they are read): the
index says how much of the tars it read.`
}

// compressed says a tar is gzipped, and so read whole.
func compressed(key string) bool {
	return strings.HasSuffix(key, ".tar.gz") || strings.HasSuffix(key, ".tgz")
}

// Types a column may have: the bytes of its members, their UTF-8 text, or
// the integer they spell.
var Types = []string{"binary", "utf8", "int64"}

// DefaultType is an extension's column type by webdataset's decoding
// conventions (its basichandlers), by the extension's last part: text for
// txt, text and transcript, an integer for cls, cls2, index, inx and id,
// the JSON text for json and jsn, the bytes for every other.
func DefaultType(ext string) string {
	switch ext[strings.LastIndex(ext, ".")+1:] {
	case "txt", "text", "transcript", "json", "jsn":
		return "utf8"
	case "cls", "cls2", "index", "inx", "id":
		return "int64"
	}
	return "binary"
}

// isJSON says a utf8 column's members hold JSON, checked as such.
func isJSON(ext string) bool {
	last := ext[strings.LastIndex(ext, ".")+1:]
	return last == "json" || last == "jsn"
}

// Open implements format.Format.
func (Format) Open(l *index.Layout) (format.Reader, error) {
	f, err := format.FileOf(l)
	if err != nil {
		return nil, err
	}
	schema, err := Schema(f.Schema)
	if err != nil {
		return nil, fmt.Errorf("shardfeed index schema: %w; re-run shardfeed index", err)
	}
	return &reader{f: f, schema: schema}, nil
}

// Schema is the Arrow schema of a stream's index schema: the key first,
// then a column per extension.
func Schema(fields []indexfile.Field) (*arrow.Schema, error) {
	if len(fields) == 0 || fields[0] != (indexfile.Field{Name: KeyColumn, Type: "utf8"}) {
		return nil, fmt.Errorf("a webdataset stream's first column is %s (utf8)", KeyColumn)
	}
	out := make([]arrow.Field, len(fields))
	for i, fl := range fields {
		var t arrow.DataType
		switch fl.Type {
		case "binary":
			t = arrow.BinaryTypes.Binary
		case "utf8":
			t = arrow.BinaryTypes.String
		case "int64":
			t = arrow.PrimitiveTypes.Int64
		default:
			return nil, fmt.Errorf("column %q: type %q is not one of %s", fl.Name, fl.Type, strings.Join(Types, ", "))
		}
		out[i] = arrow.Field{Name: fl.Name, Type: t, Nullable: i > 0}
	}
	return arrow.NewSchema(out, nil), nil
}

type reader struct {
	f      *indexfile.File
	schema *arrow.Schema
}

func (r *reader) Parts(i int) []format.Part {
	e := r.f.Shard(i)
	if compressed(e.Object) {
		return []format.Part{{Key: e.Object, Size: e.Length, Hash: e.Hash}}
	}
	return format.FileParts(r.f, i, false)
}

func (r *reader) Schema(context.Context, format.ReadFunc) (*arrow.Schema, error) {
	return r.schema, nil
}

func (r *reader) Records(_ context.Context, i int, parts [][]byte, columns []string) (array.RecordReader, error) {
	e := r.f.Shard(i)
	data := parts[0]
	if compressed(e.Object) {
		var err error
		if data, err = gunzip(data); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name, err)
		}
	}
	rec, err := Decode(r.f.Schema, data, e.Samples, columns)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.Name, err)
	}
	return format.RecordsOf([]arrow.RecordBatch{rec})
}

// maxTarSize bounds a compressed tar's bytes once decompressed.
const maxTarSize = 16 << 30

func gunzip(b []byte) ([]byte, error) {
	z, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%w: not gzip: %w", errCorrupt, err)
	}
	out, err := io.ReadAll(io.LimitReader(z, maxTarSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: gzip: %w", errCorrupt, err)
	}
	if len(out) > maxTarSize {
		return nil, fmt.Errorf("the tar is larger than %d bytes decompressed: store it uncompressed, which is also read by range", maxTarSize)
	}
	return out, nil
}

// Decode reads the samples of a shard's bytes (whole samples of a tar,
// from the first one's headers), which must be exactly samples, into the
// stream's schema (fields), keeping only columns (nil: all).
func Decode(fields []indexfile.Field, data []byte, samples int64, columns []string) (arrow.RecordBatch, error) {
	schema, err := Schema(fields)
	if err != nil {
		return nil, err
	}
	if columns == nil {
		for _, f := range fields {
			columns = append(columns, f.Name)
		}
	}
	keep := make([]int, len(columns)) // each column's field
	for k, c := range columns {
		if keep[k] = slices.IndexFunc(fields, func(f indexfile.Field) bool { return f.Name == c }); keep[k] < 0 {
			var names []string
			for _, f := range fields {
				names = append(names, f.Name)
			}
			return nil, fmt.Errorf("no column %q: the stream's columns are %s", c, strings.Join(names, ", "))
		}
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(func() []arrow.Field {
		out := make([]arrow.Field, len(keep))
		for k, f := range keep {
			out[k] = schema.Field(f)
		}
		return out
	}(), nil))
	defer b.Release()
	var n int64
	err = walk(bytesBlocks(data), int64(len(data)), func(s *sample) error {
		n++
		for _, e := range s.exts {
			if !slices.ContainsFunc(fields, func(f indexfile.Field) bool { return f.Name == e }) {
				return fmt.Errorf("%w: the sample %q has a %q the index does not list: re-run shardfeed index", errCorrupt, s.key, e)
			}
		}
		for k, f := range keep {
			fl := fields[f]
			if f == 0 {
				b.Field(k).(*array.StringBuilder).Append(s.key)
				continue
			}
			at := slices.Index(s.exts, fl.Name)
			if at < 0 {
				b.Field(k).AppendNull()
				continue
			}
			m := s.members[at]
			if err := appendValue(b.Field(k), fl, data[m.Data:m.Data+m.Size]); err != nil {
				return fmt.Errorf("%w: %q: %w", errCorrupt, m.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if n != samples {
		return nil, fmt.Errorf("%w: %d samples, the index says %d", errCorrupt, n, samples)
	}
	return b.NewRecordBatch(), nil
}

// appendValue appends a member's bytes as its column's type.
func appendValue(b array.Builder, f indexfile.Field, v []byte) error {
	switch f.Type {
	case "binary":
		b.(*array.BinaryBuilder).Append(v)
	case "utf8":
		if !utf8.Valid(v) {
			return fmt.Errorf("column %s is text and the member is not UTF-8", f.Name)
		}
		if isJSON(f.Name) && !json.Valid(v) {
			return fmt.Errorf("column %s is JSON and the member does not parse as JSON", f.Name)
		}
		b.(*array.StringBuilder).Append(string(v))
	case "int64":
		n, err := parseInt(v)
		if err != nil {
			return fmt.Errorf("column %s is an integer and the member holds %.40q", f.Name, v)
		}
		b.(*array.Int64Builder).Append(n)
	}
	return nil
}

// parseInt reads an integer as Python's int(bytes) does (webdataset's
// decoder of cls): spaces around, a sign, and underscores between digits.
func parseInt(v []byte) (int64, error) {
	s := strings.TrimSpace(string(v))
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) > 1 || body == "" || strings.HasPrefix(body, "_") || strings.HasSuffix(body, "_") || strings.Contains(body, "__") {
		return 0, strconv.ErrSyntax
	}
	return strconv.ParseInt(s[:len(s)-len(body)]+strings.ReplaceAll(body, "_", ""), 10, 64)
}

var _ format.Indexer = Format{}

// IndexObject implements format.Indexer for one tar (Registry.Index hands
// the stream's tars to IndexObjects, concurrently).
func (x Format) IndexObject(ctx context.Context, st store.Store, o store.Object, f *indexfile.File, opts format.IndexOptions) error {
	return x.IndexObjects(ctx, st, []store.Object{o}, f, opts)
}

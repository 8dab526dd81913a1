// Package parquet reads Parquet files shard by shard: a shard is one row
// group. The index is built from the file footers alone; a row group is
// decoded to Arrow with only the projected columns.
package parquet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/sparse"
)

// magic ends (and starts) every Parquet file.
const magic = "PAR1"

// MaxFooterBytes bounds the footer shardfeed reads: a larger one is refused.
const MaxFooterBytes = 64 << 20

// RowGroup is one row group of a file: its rows and the byte range of its
// column chunks.
type RowGroup struct {
	Rows   int64
	Offset int64
	Length int64
}

// ParseFooter parses footer metadata and checks the row groups' ranges
// against the file size.
func ParseFooter(key string, footer []byte, size int64) (md *metadata.FileMetaData, err error) {
	defer func() {
		// The thrift decoder can panic on hostile input; an index must not.
		if r := recover(); r != nil {
			md, err = nil, fmt.Errorf("%s: corrupt Parquet footer: %v", key, r)
		}
	}()
	md, err = metadata.NewFileMetaData(footer, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: corrupt Parquet footer: %w", key, err)
	}
	if _, err := RowGroups(key, md, size); err != nil {
		return nil, err
	}
	return md, nil
}

// RowGroups returns the row groups of a file with their byte ranges.
func RowGroups(key string, md *metadata.FileMetaData, size int64) ([]RowGroup, error) {
	var out []RowGroup
	for i := range md.NumRowGroups() {
		rg := md.RowGroup(i)
		switch n := rg.NumRows(); {
		case n < 0:
			return nil, fmt.Errorf("%s: row group %d has %d rows", key, i, n)
		case n == 0:
			// An empty row group (pyarrow writes one for an empty table) has
			// column chunks with no page to locate (data_page_offset 0): an
			// empty shard, never fetched.
			out = append(out, RowGroup{})
			continue
		}
		lo, hi := int64(-1), int64(0)
		for c := range rg.NumColumns() {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				return nil, fmt.Errorf("%s: row group %d column %d: %w", key, i, c, err)
			}
			start := cc.DataPageOffset()
			if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && cc.DictionaryPageOffset() < start {
				start = cc.DictionaryPageOffset()
			}
			end := start + cc.TotalCompressedSize()
			if start < 4 || end > size || end < start {
				return nil, fmt.Errorf("%s: row group %d column %d spans [%d, %d), outside the data of the %d-byte file (bytes 4 to %d): the footer is corrupt", key, i, c, start, end, size, size)
			}
			if lo < 0 || start < lo {
				lo = start
			}
			hi = max(hi, end)
		}
		out = append(out, RowGroup{Rows: rg.NumRows(), Offset: max(lo, 0), Length: max(hi-lo, 0)})
	}
	return out, nil
}

// ReadRowGroup decodes row group rg of a whole Parquet file in memory to
// Arrow, with only the named columns (nil: all), as record batches.
func ReadRowGroup(ctx context.Context, data []byte, rg int, columns []string) (recs []arrow.RecordBatch, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("corrupt Parquet data: %v", r)
		}
	}()
	return readRowGroup(ctx, bytes.NewReader(data), rg, columns)
}

func readRowGroup(ctx context.Context, r pq.ReaderAtSeeker, rg int, columns []string) (recs []arrow.RecordBatch, err error) {
	pf, err := file.NewParquetReader(r)
	if err != nil {
		return nil, fmt.Errorf("opening Parquet: %w", err)
	}
	defer func() { _ = pf.Close() }()
	if rg < 0 || rg >= pf.NumRowGroups() {
		return nil, fmt.Errorf("row group %d is outside the file's %d", rg, pf.NumRowGroups())
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	var cols []int
	if columns != nil {
		schema, err := fr.Schema()
		if err != nil {
			return nil, err
		}
		for _, name := range columns {
			idx := schema.FieldIndices(name)
			if len(idx) == 0 {
				var names []string
				for _, f := range schema.Fields() {
					names = append(names, f.Name)
				}
				return nil, fmt.Errorf("no column %q: the file's columns are %s", name, strings.Join(names, ", "))
			}
			// pqarrow selects leaf columns: a nested field has several.
			leaves, err := leafIndices(pf, name)
			if err != nil {
				return nil, err
			}
			cols = append(cols, leaves...)
		}
	}
	rr, err := fr.GetRecordReader(ctx, cols, []int{rg})
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	for rr.Next() {
		rec := rr.RecordBatch()
		rec.Retain()
		recs = append(recs, rec)
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		for _, r := range recs {
			r.Release()
		}
		return nil, err
	}
	// Corrupt pages can decode to fewer rows without an error: a row
	// group is whole or it is an error, never silently short.
	if got, want := Rows(recs), pf.MetaData().RowGroup(rg).NumRows(); got != want {
		for _, r := range recs {
			r.Release()
		}
		return nil, fmt.Errorf("corrupt Parquet data: row group %d decoded to %d rows, its footer says %d", rg, got, want)
	}
	return recs, nil
}

// leafIndices returns the leaf column indices under a top-level field.
func leafIndices(pf *file.Reader, name string) ([]int, error) {
	sc := pf.MetaData().Schema
	var out []int
	for i := range sc.NumColumns() {
		path := sc.Column(i).ColumnPath()
		if len(path) > 0 && path[0] == name {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no column %q", name)
	}
	return slices.Clip(out), nil
}

// Rows counts the rows of records.
func Rows(recs []arrow.RecordBatch) int64 {
	var n int64
	for _, r := range recs {
		n += r.NumRows()
	}
	return n
}

// ReadRowGroupRange decodes row group rg from the bytes of its range alone
// (rgData at rgOffset) and the file's footer (the last footerLen+8 bytes of
// a file of size bytes): what a pod fetches instead of the whole file.
func ReadRowGroupRange(ctx context.Context, p format.FootedPart, columns []string) (recs []arrow.RecordBatch, err error) {
	size, tail, rgOffset, rgData, rg := p.Size, p.Tail, p.Offset, p.Data, p.Index
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("corrupt Parquet data: %v", r)
		}
	}()
	if int64(len(tail)) < 12 || int64(len(tail)) > size || string(tail[len(tail)-4:]) != magic {
		return nil, fmt.Errorf("the footer range of %d bytes does not end the file with PAR1", len(tail))
	}
	f := sparse.New(size, sparse.Range{Offset: size - int64(len(tail)), Data: tail}, sparse.Range{Offset: rgOffset, Data: rgData})
	return readRowGroup(ctx, f, rg, columns)
}

// Schema returns the Arrow schema of a file of size bytes from its footer
// range (its last bytes, ending in PAR1): what every row group decodes to.
func Schema(size int64, tail []byte) (schema *arrow.Schema, err error) {
	md, err := parseTail(size, tail)
	if err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			schema, err = nil, fmt.Errorf("corrupt Parquet schema: %v", r)
		}
	}()
	return pqarrow.FromParquet(md.Schema, nil, md.KeyValueMetadata())
}

// parseTail parses the metadata of a file of size bytes from its footer
// range (its last bytes: the footer, its length and PAR1).
func parseTail(size int64, tail []byte) (*metadata.FileMetaData, error) {
	if len(tail) < 12 || string(tail[len(tail)-4:]) != magic {
		return nil, fmt.Errorf("the footer range of %d bytes does not end with PAR1", len(tail))
	}
	return ParseFooter("footer", tail[:len(tail)-8], size)
}

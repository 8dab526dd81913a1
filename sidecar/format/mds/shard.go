package mds

import (
	"bytes"
	"compress/bzip2"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/golang/snappy"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/shardfeed/shardfeed/internal/index/mdsindex"
)

// MaxShardBytes bounds the decompressed size of a shard: an index that
// claims more is refused rather than trusted with the memory.
const MaxShardBytes = 8 << 30

// Shard is one decoded MDS shard file, ready to append samples to Arrow
// builders.
type Shard struct {
	raw     []byte
	offsets []byte // n+1 little-endian uint32, absolute in raw
	n       int
	columns []column
	proj    []int // indexes of the projected columns, in schema order
	schema  *arrow.Schema
}

// Columns returns the columns of an index entry, with their Arrow fields.
func Columns(s *mdsindex.ShardEntry) ([]arrow.Field, error) {
	cols, err := newColumns(s)
	if err != nil {
		return nil, err
	}
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = c.field
	}
	return fields, nil
}

func newColumns(s *mdsindex.ShardEntry) ([]column, error) {
	if len(s.ColumnNames) != len(s.ColumnEncodings) {
		return nil, fmt.Errorf("%d column names but %d encodings", len(s.ColumnNames), len(s.ColumnEncodings))
	}
	cols := make([]column, len(s.ColumnNames))
	for i, name := range s.ColumnNames {
		c, err := newColumn(name, s.ColumnEncodings[i])
		if err != nil {
			return nil, err
		}
		if i < len(s.ColumnSizes) && s.ColumnSizes[i] != nil && int64(c.size) != *s.ColumnSizes[i] {
			return nil, fmt.Errorf("column %q: the index says %d bytes per value, encoding %q has %d", name, *s.ColumnSizes[i], c.encoding, c.size)
		}
		if i < len(s.ColumnSizes) && s.ColumnSizes[i] == nil && c.size >= 0 {
			return nil, fmt.Errorf("column %q: the index says values vary in size, encoding %q has %d bytes", name, c.encoding, c.size)
		}
		cols[i] = c
	}
	return cols, nil
}

// ReadShard decodes the stored bytes of a shard (compressed or not, as its
// index entry says) and checks its header. columns picks the columns to
// read, in that order; nil reads all, in index order.
func ReadShard(stored []byte, e *mdsindex.ShardEntry, columns []string) (*Shard, error) {
	cols, err := newColumns(e)
	if err != nil {
		return nil, err
	}
	raw, err := decompress(stored, e)
	if err != nil {
		return nil, err
	}
	s := &Shard{raw: raw, columns: cols}
	if err := s.readHeader(e.Samples); err != nil {
		return nil, fmt.Errorf("%s: %w", e.RawData.Basename, err)
	}
	if columns == nil {
		for i := range cols {
			columns = append(columns, cols[i].name)
		}
	}
	fields := make([]arrow.Field, 0, len(columns))
	for _, name := range columns {
		i := slices.IndexFunc(cols, func(c column) bool { return c.name == name })
		if i < 0 {
			return nil, fmt.Errorf("%s has no column %q: its columns are %s", e.RawData.Basename, name, strings.Join(e.ColumnNames, ", "))
		}
		if cols[i].refused != nil {
			return nil, cols[i].refused
		}
		s.proj = append(s.proj, i)
		fields = append(fields, cols[i].field)
	}
	s.schema = arrow.NewSchema(fields, nil)
	return s, nil
}

// readHeader checks [n uint32][offsets (n+1) uint32][...][samples].
func (s *Shard) readHeader(want int64) error {
	if len(s.raw) < 4 {
		return fmt.Errorf("shard of %d bytes has no header", len(s.raw))
	}
	n := uint64(binary.LittleEndian.Uint32(s.raw))
	if int64(n) != want {
		return fmt.Errorf("shard holds %d samples, the index says %d", n, want)
	}
	end := 4 + 4*(n+1)
	if end > uint64(len(s.raw)) {
		return fmt.Errorf("header of %d samples is longer than the %d-byte shard", n, len(s.raw))
	}
	s.offsets = s.raw[4:end]
	prev := end
	for i := uint64(0); i <= n; i++ {
		off := uint64(binary.LittleEndian.Uint32(s.offsets[4*i:]))
		if off < prev || off > uint64(len(s.raw)) {
			return fmt.Errorf("sample %d offset %d is outside [%d, %d]", i, off, prev, len(s.raw))
		}
		prev = off
	}
	s.n = int(n)
	return nil
}

// Len returns the number of samples.
func (s *Shard) Len() int { return s.n }

// Schema returns the Arrow schema of the projected columns.
func (s *Shard) Schema() *arrow.Schema { return s.schema }

// sample returns the bytes of sample i.
func (s *Shard) sample(i int) []byte {
	lo := binary.LittleEndian.Uint32(s.offsets[4*i:])
	hi := binary.LittleEndian.Uint32(s.offsets[4*i+4:])
	return s.raw[lo:hi]
}

// Append appends sample i's projected values to the builders of a record
// whose schema is Schema(), field by field.
func (s *Shard) Append(b *array.RecordBuilder, i int) error {
	if i < 0 || i >= s.n {
		return fmt.Errorf("sample %d is outside the shard's %d samples", i, s.n)
	}
	data := s.sample(i)
	var buf [65]int
	starts, err := s.starts(data, i, buf[:0])
	if err != nil {
		return err
	}
	for f, k := range s.proj {
		if err := s.columns[k].decode(b.Field(f), data[starts[k]:starts[k+1]]); err != nil {
			return fmt.Errorf("sample %d: %w", i, err)
		}
	}
	return nil
}

// starts returns where each column's value begins in sample i's bytes
// (data), and where the last ends, appended to buf; an error if the
// sample's header does not fill it exactly.
func (s *Shard) starts(data []byte, i int, buf []int) ([]int, error) {
	pos := 0
	starts := buf[:0]
	starts = append(starts, 0)
	for k, c := range s.columns {
		n := c.size
		if n < 0 {
			if pos+4 > len(data) {
				return nil, fmt.Errorf("sample %d: header ends before column %q's size", i, c.name)
			}
			n = int(binary.LittleEndian.Uint32(data[pos:]))
			pos += 4
		}
		starts = append(starts, starts[k]+n) // the header's length is added below
	}
	starts[0] = pos
	for k := 1; k < len(starts); k++ {
		starts[k] += pos
		if starts[k] > len(data) || starts[k] < starts[k-1] {
			return nil, fmt.Errorf("sample %d: column %q ends past the sample's %d bytes", i, s.columns[k-1].name, len(data))
		}
	}
	if last := starts[len(starts)-1]; last != len(data) {
		return nil, fmt.Errorf("sample %d: columns fill %d of its %d bytes", i, last, len(data))
	}
	return starts, nil
}

// decompress returns the raw shard of the stored bytes.
func decompress(stored []byte, e *mdsindex.ShardEntry) ([]byte, error) {
	name := e.RawData.Basename
	if e.Compression == nil || *e.Compression == "" {
		if int64(len(stored)) != e.RawData.Bytes {
			return nil, fmt.Errorf("%s: %d bytes, the index says %d", name, len(stored), e.RawData.Bytes)
		}
		return stored, nil
	}
	if e.RawData.Bytes > MaxShardBytes {
		return nil, fmt.Errorf("%s: the index says %d bytes decompressed, more than shardfeed's limit of %d", name, e.RawData.Bytes, int64(MaxShardBytes))
	}
	algo, _, _ := strings.Cut(*e.Compression, ":")
	limit := e.RawData.Bytes
	var r io.Reader
	switch algo {
	case "zstd":
		// The window may be larger than the content; the output is bounded
		// below by limit+1 either way.
		d, err := zstd.NewReader(bytes.NewReader(stored), zstd.WithDecoderMaxMemory(max(uint64(limit)+1, 64<<20)), zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		defer d.Close()
		r = d
	case "gz":
		g, err := gzip.NewReader(bytes.NewReader(stored))
		if err != nil {
			return nil, fmt.Errorf("%s: gzip: %w", name, err)
		}
		r = g
	case "bz2":
		r = bzip2.NewReader(bytes.NewReader(stored))
	case "br":
		r = brotli.NewReader(bytes.NewReader(stored))
	case "snappy":
		n, err := snappy.DecodedLen(stored)
		if err != nil {
			return nil, fmt.Errorf("%s: snappy: %w", name, err)
		}
		if int64(n) != limit {
			return nil, fmt.Errorf("%s: snappy data decodes to %d bytes, the index says %d", name, n, limit)
		}
		raw, err := snappy.Decode(nil, stored)
		if err != nil {
			return nil, fmt.Errorf("%s: snappy: %w", name, err)
		}
		return raw, nil
	default:
		return nil, fmt.Errorf("%s: compression %q is not supported: use zstd, gz, bz2, br or snappy", name, *e.Compression)
	}
	raw := make([]byte, 0, limit)
	buf := bytes.NewBuffer(raw)
	n, err := io.Copy(buf, io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", name, algo, err)
	}
	if n != limit {
		return nil, fmt.Errorf("%s: decompresses to %d bytes, the index says %d", name, n, limit)
	}
	return buf.Bytes(), nil
}

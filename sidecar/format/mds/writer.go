package mds

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/golang/snappy"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/index/mdsindex"
)

// DefaultSizeLimit is the raw size at which a shard is closed (as MDSWriter).
const DefaultSizeLimit = 1 << 26

// Column is a column to write and its MDS encoding.
type Column struct {
	Name     string
	Encoding string
}

// WriterOptions configure a Writer.
type WriterOptions struct {
	// Columns to write; like MDSWriter, they are stored sorted by name.
	Columns []Column
	// Compression is "", or "zstd", "gz", "br", "snappy", with an optional
	// ":level" (zstd:7).
	Compression string
	// Hashes are the algorithms recorded per shard (e.g. "xxh64", "sha1").
	Hashes []string
	// SizeLimit is the raw bytes at which a shard is closed.
	SizeLimit int64
	// Put stores one file (a shard, then index.json) under its base name.
	Put func(name string, data []byte) error
}

// Writer writes samples as MDS shards and, on Close, index.json.
type Writer struct {
	opts    WriterOptions
	cols    []column
	config  []byte
	samples [][]byte
	size    int64 // raw bytes of the open shard
	index   mdsindex.Index
	closed  bool
}

// NewWriter checks the options and returns a writer.
func NewWriter(opts WriterOptions) (*Writer, error) {
	if len(opts.Columns) == 0 {
		return nil, fmt.Errorf("mds writer: no columns")
	}
	if opts.SizeLimit <= 0 {
		opts.SizeLimit = DefaultSizeLimit
	}
	if opts.Put == nil {
		return nil, fmt.Errorf("mds writer: no Put")
	}
	if _, err := compress(opts.Compression, nil); err != nil {
		return nil, err
	}
	for _, h := range opts.Hashes {
		if _, err := checksum.Of(h, nil); err != nil {
			return nil, err
		}
	}
	w := &Writer{opts: opts, index: mdsindex.Index{Version: mdsindex.Version}}
	sorted := slices.Clone(opts.Columns)
	slices.SortFunc(sorted, func(a, b Column) int { return strings.Compare(a.Name, b.Name) })
	for i, c := range sorted {
		if i > 0 && sorted[i-1].Name == c.Name {
			return nil, fmt.Errorf("mds writer: column %q twice", c.Name)
		}
		col, err := newColumn(c.Name, c.Encoding)
		if err != nil {
			return nil, err
		}
		if col.refused != nil {
			return nil, fmt.Errorf("mds writer: column %q: shardfeed does not write pkl", c.Name)
		}
		w.cols = append(w.cols, col)
	}
	cfg, err := pyJSON(w.config0())
	if err != nil {
		return nil, err
	}
	w.config = cfg
	return w, nil
}

// config0 is the writer configuration MDSWriter stores in every shard.
func (w *Writer) config0() map[string]any {
	var comp any
	if w.opts.Compression != "" {
		comp = w.opts.Compression
	}
	names, encs, sizes := w.columnLists()
	return map[string]any{
		"column_encodings": encs, "column_names": names, "column_sizes": sizes,
		"compression": comp, "format": mdsindex.ShardFormat, "hashes": nonNil(w.opts.Hashes),
		"size_limit": w.opts.SizeLimit, "version": mdsindex.Version,
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (w *Writer) columnLists() (names, encs []string, sizes []*int64) {
	for _, c := range w.cols {
		names = append(names, c.name)
		encs = append(encs, c.encoding)
		if c.size >= 0 {
			n := int64(c.size)
			sizes = append(sizes, &n)
		} else {
			sizes = append(sizes, nil)
		}
	}
	return names, encs, sizes
}

// pyJSON encodes like Python's json.dumps(obj, sort_keys=True): keys sorted,
// ", " and ": " separators.
func pyJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	inString, escaped := false, false
	for _, c := range b {
		out.WriteByte(c)
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == ',' || c == ':'):
			out.WriteByte(' ')
		}
	}
	return out.Bytes(), nil
}

// Write encodes one sample: a value for every column, of the Go type its
// encoding takes (see encodeValue).
func (w *Writer) Write(sample map[string]any) error {
	if w.closed {
		return fmt.Errorf("mds writer: closed")
	}
	var head, body []byte
	for _, c := range w.cols {
		v, ok := sample[c.name]
		if !ok {
			return fmt.Errorf("mds writer: sample has no column %q", c.name)
		}
		data, err := encodeValue(c, v)
		if err != nil {
			return err
		}
		if c.size < 0 {
			if len(data) > math.MaxUint32 {
				return fmt.Errorf("column %q: value of %d bytes is too large for MDS", c.name, len(data))
			}
			head = binary.LittleEndian.AppendUint32(head, uint32(len(data)))
		} else if len(data) != c.size {
			return fmt.Errorf("column %q: encoding %s takes %d bytes, value has %d", c.name, c.encoding, c.size, len(data))
		}
		body = append(body, data...)
	}
	s := slices.Concat(head, body)
	extra := int64(4 + 4 + len(w.config))
	if len(w.samples) > 0 && w.size+int64(len(s))+4*int64(len(w.samples)+1)+extra > w.opts.SizeLimit {
		if err := w.flush(); err != nil {
			return err
		}
	}
	w.samples = append(w.samples, s)
	w.size += int64(len(s)) + 4
	return nil
}

// encodeValue encodes v for column c: []byte for bytes and images, string
// for str, str_decimal and json (JSON text), Go integers and floats for
// the scalar and str_int/str_float encodings, [][]byte for image lists,
// and for ndarray a []T of the dtype (shape given by the encoding) or an
// NDArray.
func encodeValue(c column, v any) ([]byte, error) {
	base, _, _ := strings.Cut(c.encoding, ":")
	wrong := func() error {
		return fmt.Errorf("column %q: a %T value does not fit encoding %s", c.name, v, c.encoding)
	}
	switch base {
	case "bytes", "pil", "jpeg", "png":
		b, ok := v.([]byte)
		if !ok {
			return nil, wrong()
		}
		return b, nil
	case "str", "str_decimal", "json":
		s, ok := v.(string)
		if !ok {
			return nil, wrong()
		}
		return []byte(s), nil
	case "str_int":
		i, ok := toInt64(v)
		if !ok {
			return nil, wrong()
		}
		return strconv.AppendInt(nil, i, 10), nil
	case "str_float":
		f, ok := toFloat64(v)
		if !ok {
			return nil, wrong()
		}
		return []byte(pyFloat(f)), nil
	case "list[pil]", "list[jpeg]", "list[png]", "jpeg_array", "jpegarray":
		blobs, ok := v.([][]byte)
		if !ok {
			return nil, wrong()
		}
		var out []byte
		if base != "jpeg_array" && base != "jpegarray" {
			out = binary.LittleEndian.AppendUint32(out, 0)
		}
		out = binary.LittleEndian.AppendUint32(out, uint32(len(blobs)))
		for _, b := range blobs {
			out = binary.LittleEndian.AppendUint32(out, uint32(len(b)))
		}
		for _, b := range blobs {
			out = append(out, b...)
		}
		return out, nil
	case "ndarray":
		return encodeNDArray(c, v)
	}
	d, ok := dtypes[base]
	if base == "int" {
		d, ok = dtypes["int64"], true
	}
	if !ok {
		return nil, fmt.Errorf("column %q: cannot write encoding %s", c.name, c.encoding)
	}
	return appendScalar(nil, d, v)
}

// pyFloat writes a float as Python's str(float) does for the values MDS
// round-trips (repr: shortest form that reads back the same).
func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0"
	}
	return s
}

func toInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		if x > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	}
	return 0, false
}

func toFloat64(v any) (float64, bool) {
	switch x := v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	if i, ok := toInt64(v); ok {
		return float64(i), true
	}
	return 0, false
}

// appendScalar appends one value of dtype d, little-endian.
func appendScalar(out []byte, d dtype, v any) ([]byte, error) {
	le := binary.LittleEndian
	switch d.name {
	case "float16":
		f, ok := v.(uint16) // float16 bits
		if !ok {
			return nil, fmt.Errorf("a float16 value is written as its uint16 bits, got %T", v)
		}
		return le.AppendUint16(out, f), nil
	case "float32":
		f, ok := toFloat64(v)
		if !ok {
			return nil, fmt.Errorf("%T is not a float32", v)
		}
		return le.AppendUint32(out, math.Float32bits(float32(f))), nil
	case "float64":
		f, ok := toFloat64(v)
		if !ok {
			return nil, fmt.Errorf("%T is not a float64", v)
		}
		return le.AppendUint64(out, math.Float64bits(f)), nil
	}
	var u uint64
	if x, ok := v.(uint64); ok {
		u = x
	} else {
		i, ok := toInt64(v)
		if !ok {
			return nil, fmt.Errorf("%T is not an integer", v)
		}
		u = uint64(i)
	}
	switch d.width {
	case 1:
		return append(out, byte(u)), nil
	case 2:
		return le.AppendUint16(out, uint16(u)), nil
	case 4:
		return le.AppendUint32(out, uint32(u)), nil
	}
	return le.AppendUint64(out, u), nil
}

// NDArray is an ndarray value for the dynamic ndarray encodings.
type NDArray struct {
	// DType names the element type (uint8 … float64).
	DType string
	Shape []int64
	// Data holds the values, little-endian.
	Data []byte
}

func encodeNDArray(c column, v any) ([]byte, error) {
	_, arg, _ := strings.Cut(c.encoding, ":")
	dname, _, hasShape := strings.Cut(arg, ":")
	a, ok := v.(NDArray)
	if !ok {
		return nil, fmt.Errorf("column %q: ndarray values are mds.NDArray, got %T", c.name, v)
	}
	d, ok := dtypes[a.DType]
	if !ok {
		return nil, fmt.Errorf("column %q: dtype %q is not an MDS dtype", c.name, a.DType)
	}
	count := int64(1)
	for _, n := range a.Shape {
		count *= n
	}
	if len(a.Shape) == 0 || count <= 0 || count*int64(d.width) != int64(len(a.Data)) {
		return nil, fmt.Errorf("column %q: ndarray of shape %v and dtype %s needs %d bytes, has %d", c.name, a.Shape, a.DType, count*int64(d.width), len(a.Data))
	}
	var out []byte
	if dname == "" {
		out = append(out, d.code)
	} else if dname != a.DType {
		return nil, fmt.Errorf("column %q: dtype %s, the encoding says %s", c.name, a.DType, dname)
	}
	if hasShape {
		if int(count)*d.width != c.size {
			return nil, fmt.Errorf("column %q: ndarray of %d values, the encoding's shape holds %d", c.name, count, c.size/d.width)
		}
		return append(out, a.Data...), nil
	}
	maxDim := slices.Max(a.Shape)
	width := 3
	switch {
	case maxDim < 1<<8:
		width = 0
	case maxDim < 1<<16:
		width = 1
	case maxDim < 1<<32:
		width = 2
	}
	out = append(out, byte(len(a.Shape)<<2|width))
	for _, n := range a.Shape {
		out, _ = appendScalar(out, dtype{name: "uint", width: 1 << width}, uint64(n))
	}
	return append(out, a.Data...), nil
}

// flush writes the open shard.
func (w *Writer) flush() error {
	if len(w.samples) == 0 {
		return nil
	}
	n := len(w.samples)
	headLen := 4 + 4*(n+1) + len(w.config)
	raw := make([]byte, 0, headLen+int(w.size))
	raw = binary.LittleEndian.AppendUint32(raw, uint32(n))
	off := uint32(headLen)
	raw = binary.LittleEndian.AppendUint32(raw, off)
	for _, s := range w.samples {
		off += uint32(len(s))
		raw = binary.LittleEndian.AppendUint32(raw, off)
	}
	raw = append(raw, w.config...)
	for _, s := range w.samples {
		raw = append(raw, s...)
	}
	i := len(w.index.Shards)
	names, encs, sizes := w.columnLists()
	limit := w.opts.SizeLimit
	e := mdsindex.ShardEntry{
		ColumnEncodings: encs, ColumnNames: names, ColumnSizes: sizes,
		Format: mdsindex.ShardFormat, Hashes: nonNil(w.opts.Hashes), Samples: int64(n), SizeLimit: &limit, Version: mdsindex.Version,
	}
	var err error
	// A compressed shard's raw file is described, not stored.
	if e.RawData, err = w.put(fmt.Sprintf("shard.%05d.mds", i), raw, w.opts.Compression == ""); err != nil {
		return err
	}
	if w.opts.Compression != "" {
		comp := w.opts.Compression
		e.Compression = &comp
		zipped, err := compress(comp, raw)
		if err != nil {
			return err
		}
		algo, _, _ := strings.Cut(comp, ":")
		if e.ZipData, err = w.put(fmt.Sprintf("shard.%05d.mds.%s", i, algo), zipped, true); err != nil {
			return err
		}
	}
	w.index.Shards = append(w.index.Shards, e)
	w.samples = w.samples[:0]
	w.size = 0
	return nil
}

// put hashes a shard file and, if store, writes it.
func (w *Writer) put(name string, data []byte, store bool) (*mdsindex.FileInfo, error) {
	f := &mdsindex.FileInfo{Basename: name, Bytes: int64(len(data)), Hashes: map[string]string{}}
	for _, h := range w.opts.Hashes {
		sum, err := checksum.Of(h, data)
		if err != nil {
			return nil, err
		}
		f.Hashes[h] = sum.Hex
	}
	if store {
		if err := w.opts.Put(name, data); err != nil {
			return nil, fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return f, nil
}

// Close writes the last shard and then index.json, so a reader never sees
// an index that lists a shard not yet written.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	if err := w.flush(); err != nil {
		return err
	}
	w.closed = true
	data, err := json.Marshal(&w.index)
	if err != nil {
		return err
	}
	return w.opts.Put("index.json", data)
}

// Index returns the index written so far.
func (w *Writer) Index() *mdsindex.Index { return &w.index }

// compress compresses data with an MDS compression name ("zstd:7").
func compress(spec string, data []byte) ([]byte, error) {
	if spec == "" {
		return data, nil
	}
	algo, levelText, hasLevel := strings.Cut(spec, ":")
	level := -1
	if hasLevel {
		l, err := strconv.Atoi(levelText)
		if err != nil {
			return nil, fmt.Errorf("compression %q: level %q is not a number", spec, levelText)
		}
		level = l
	}
	bad := func(lo, hi int) error {
		return fmt.Errorf("compression %q: %s levels are %d to %d", spec, algo, lo, hi)
	}
	var buf bytes.Buffer
	switch algo {
	case "zstd":
		if level == -1 {
			level = 3
		}
		if level < 1 || level > 22 {
			return nil, bad(1, 22)
		}
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)), zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		defer func() { _ = enc.Close() }()
		return enc.EncodeAll(data, nil), nil
	case "gz":
		if level == -1 {
			level = 9
		}
		if level < 0 || level > 9 {
			return nil, bad(0, 9)
		}
		g, err := gzip.NewWriterLevel(&buf, level)
		if err != nil {
			return nil, err
		}
		if _, err := g.Write(data); err != nil {
			return nil, err
		}
		if err := g.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case "br":
		if level == -1 {
			level = 11
		}
		if level < 0 || level > 11 {
			return nil, bad(0, 11)
		}
		b := brotli.NewWriterLevel(&buf, level)
		if _, err := b.Write(data); err != nil {
			return nil, err
		}
		if err := b.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case "snappy":
		if hasLevel {
			return nil, fmt.Errorf("compression %q: snappy has no levels", spec)
		}
		return snappy.Encode(nil, data), nil
	case "bz2":
		return nil, fmt.Errorf("compression %q: shardfeed reads bz2 shards but does not write them: use zstd, gz, br or snappy", spec)
	}
	return nil, fmt.Errorf("compression %q is not supported: use zstd, gz, br or snappy, with an optional :level", spec)
}

// Package arrowipc reads Arrow IPC files shard by shard: a shard is one
// record batch.
package arrowipc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shardfeed/shardfeed/sidecar/format/sparse"
)

// Batch is one record batch of a file: its rows and byte range.
type Batch struct {
	Rows           int64
	Offset, Length int64
}

// recorder notes the byte ranges a reader reads.
type recorder struct {
	r      *bytes.Reader
	mu     sync.Mutex
	lo, hi int64
}

func (r *recorder) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.r.ReadAt(p, off)
	r.mu.Lock()
	if r.lo < 0 || off < r.lo {
		r.lo = off
	}
	r.hi = max(r.hi, off+int64(n))
	r.mu.Unlock()
	return n, err
}

func (r *recorder) Read(p []byte) (int, error)                { return r.r.Read(p) }
func (r *recorder) Seek(off int64, whence int) (int64, error) { return r.r.Seek(off, whence) }
func (r *recorder) reset()                                    { r.lo, r.hi = -1, 0 }
func (r *recorder) span() (int64, int64)                      { return r.lo, r.hi - r.lo }
func open(data []byte) (*ipc.FileReader, *recorder, error) {
	if err := verify(data); err != nil {
		return nil, nil, err
	}
	rec := &recorder{r: bytes.NewReader(data)}
	f, err := ipc.NewFileReader(rec, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, nil, fmt.Errorf("not an Arrow IPC file: %w", err)
	}
	if f.NumDictionaries() > 0 {
		_ = f.Close()
		return nil, nil, errors.New("dictionary-encoded Arrow IPC files are not supported: a batch could not be read without the dictionaries; cast dictionary columns to their value type")
	}
	return f, rec, nil
}

// Batches lists the record batches of a whole file with their byte ranges:
// each batch is read once (its message and body are where it was read from).
func Batches(data []byte) (out []Batch, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("corrupt Arrow IPC file: %v", r)
		}
	}()
	f, rec, err := open(data)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	for i := range f.NumRecords() {
		rec.reset()
		b, err := f.RecordBatchAt(i)
		if err != nil {
			return nil, fmt.Errorf("record batch %d: %w", i, err)
		}
		off, n := rec.span()
		out = append(out, Batch{Rows: b.NumRows(), Offset: off, Length: n})
		b.Release()
	}
	return out, nil
}

// ReadBatch decodes record batch i of a whole file with only columns (nil:
// all).
func ReadBatch(data []byte, i int, columns []string) (out arrow.RecordBatch, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("corrupt Arrow IPC file: %v", r)
		}
	}()
	f, _, err := open(data)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return batchOf(f, i, columns)
}

func batchOf(f *ipc.FileReader, i int, columns []string) (arrow.RecordBatch, error) {
	if f.NumDictionaries() > 0 {
		return nil, errors.New("dictionary-encoded Arrow IPC files are not supported: cast dictionary columns to their value type")
	}
	if i < 0 || i >= f.NumRecords() {
		return nil, fmt.Errorf("record batch %d is outside the file's %d", i, f.NumRecords())
	}
	b, err := f.RecordBatchAt(i)
	if err != nil {
		return nil, err
	}
	defer b.Release()
	if columns == nil {
		b.Retain()
		return b, nil
	}
	var cols []arrow.Array
	var fields []arrow.Field
	for _, c := range columns {
		idx := b.Schema().FieldIndices(c)
		if len(idx) == 0 {
			var names []string
			for _, fl := range b.Schema().Fields() {
				names = append(names, fl.Name)
			}
			return nil, fmt.Errorf("no column %q: the file's columns are %s", c, strings.Join(names, ", "))
		}
		cols = append(cols, b.Column(idx[0]))
		fields = append(fields, b.Schema().Field(idx[0]))
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, b.NumRows()), nil
}

var _ io.ReaderAt = (*recorder)(nil)

// FooterLength returns the length of a file's tail — footer, its length and
// ARROW1 — from the file's last 10 bytes.
func FooterLength(last10 []byte, size int64) (int64, error) {
	n, err := footerLen(last10, size)
	return int64(n) + 10, err
}

// tailFooter checks a file's tail (footer, its length, ARROW1) and returns
// the footer's length.
func tailFooter(size int64, tail []byte) (int, error) {
	if len(tail) < 10 || int64(len(tail)) > size {
		return 0, fmt.Errorf("%w: tail of %d bytes", errCorrupt, len(tail))
	}
	n, err := footerLen(tail[len(tail)-10:], size)
	if err != nil {
		return 0, err
	}
	if n+10 != len(tail) {
		return 0, fmt.Errorf("%w: the tail holds %d bytes, the footer needs %d", errCorrupt, len(tail), n+10)
	}
	return n, nil
}

// ReadBatchRange decodes record batch i from the bytes of its range alone
// (data at offset) and the file's tail (the footer, its length and ARROW1:
// the last footerLength+10 bytes of a file of size bytes).
func ReadBatchRange(_ context.Context, size int64, tail []byte, offset int64, data []byte, i int, columns []string) (out arrow.RecordBatch, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("corrupt Arrow IPC file: %v", r)
		}
	}()
	n, err := tailFooter(size, tail)
	if err != nil {
		return nil, err
	}
	err = verifyFooter(tail[:n], size, func(off, metaLen, body int64) ([]byte, []byte, bool) {
		if off < offset || off+metaLen > offset+int64(len(data)) {
			return nil, nil, false
		}
		var bodyBytes []byte
		if off+metaLen+body <= offset+int64(len(data)) {
			bodyBytes = data[off-offset+metaLen : off-offset+metaLen+body]
		}
		return data[off-offset : off-offset+metaLen], bodyBytes, true
	})
	if err != nil {
		return nil, err
	}
	f := sparse.New(size,
		sparse.Range{Offset: 0, Data: []byte(magic + "\x00\x00")},
		sparse.Range{Offset: size - int64(len(tail)), Data: tail},
		sparse.Range{Offset: offset, Data: data})
	r, err := ipc.NewFileReader(f, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, fmt.Errorf("not an Arrow IPC file: %w", err)
	}
	defer func() { _ = r.Close() }()
	return batchOf(r, i, columns)
}

// Schema returns the schema of a file from its tail alone (the footer, its
// length and ARROW1: the last bytes of a file of size bytes).
func Schema(size int64, tail []byte) (schema *arrow.Schema, err error) {
	defer func() {
		if r := recover(); r != nil {
			schema, err = nil, fmt.Errorf("corrupt Arrow IPC file: %v", r)
		}
	}()
	n, err := tailFooter(size, tail)
	if err != nil {
		return nil, err
	}
	if err := verifyFooter(tail[:n], size, func(int64, int64, int64) ([]byte, []byte, bool) { return nil, nil, false }); err != nil {
		return nil, err
	}
	f := sparse.New(size,
		sparse.Range{Offset: 0, Data: []byte(magic + "\x00\x00")},
		sparse.Range{Offset: size - int64(len(tail)), Data: tail})
	r, err := ipc.NewFileReader(f, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, fmt.Errorf("not an Arrow IPC file: %w", err)
	}
	defer func() { _ = r.Close() }()
	return r.Schema(), nil
}

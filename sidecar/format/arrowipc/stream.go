package arrowipc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Message is one encapsulated message of an Arrow IPC stream: its bytes
// [Offset, Offset+Length), metadata and body together, and the rows of a
// record batch.
type Message struct {
	Offset, Length int64
	Rows           int64
}

// The message header types of Message.fbs.
const (
	headerSchema      = 1
	headerDictionary  = 2
	headerRecordBatch = 3
)

// eos ends a stream: the continuation marker and a zero length.
var eos = []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}

// StreamMessages walks an Arrow IPC stream (no footer: what Hugging Face
// datasets write): its schema message and its record batches, each checked
// as Verify checks a file's (fields, buffers within their bodies). A
// dictionary batch is refused, as in files.
func StreamMessages(data []byte) (schema Message, batches []Message, err error) {
	off := int64(0)
	first := true
	for {
		m, typ, meta, body, end, err := nextMessage(data, off)
		if err != nil {
			return Message{}, nil, fmt.Errorf("the message at byte %d: %w", off, err)
		}
		if end {
			break
		}
		switch {
		case first && typ != headerSchema:
			return Message{}, nil, fmt.Errorf("%w: the stream does not start with its schema", errCorrupt)
		case first:
			if err := checkSchemaMessage(meta); err != nil {
				return Message{}, nil, fmt.Errorf("the schema: %w", err)
			}
			schema, first = m, false
		case typ == headerRecordBatch:
			if err := checkMessage(meta, int64(len(body)), body); err != nil {
				return Message{}, nil, fmt.Errorf("record batch %d: %w", len(batches), err)
			}
			if m.Rows, err = batchRows(meta); err != nil {
				return Message{}, nil, fmt.Errorf("record batch %d: %w", len(batches), err)
			}
			batches = append(batches, m)
		case typ == headerDictionary:
			return Message{}, nil, errors.New("dictionary-encoded Arrow IPC streams are not supported: a batch could not be read without the dictionaries; cast dictionary columns to their value type")
		default:
			return Message{}, nil, fmt.Errorf("%w: a message of type %d in a stream of record batches", errCorrupt, typ)
		}
		off = m.Offset + m.Length
	}
	if first {
		return Message{}, nil, fmt.Errorf("%w: an empty stream (no schema)", errCorrupt)
	}
	return schema, batches, nil
}

// nextMessage reads the message at off: its range, header type, metadata
// (the flatbuffer with its length prefix) and body. end: the stream's end
// (an end-of-stream marker, or no bytes left).
func nextMessage(data []byte, off int64) (m Message, typ int, meta, body []byte, end bool, err error) {
	rest := data[off:]
	if len(rest) == 0 {
		return Message{}, 0, nil, nil, true, nil
	}
	p := 0
	if len(rest) >= 4 && binary.LittleEndian.Uint32(rest) == 0xFFFFFFFF {
		p = 4
	}
	if len(rest) < p+4 {
		return Message{}, 0, nil, nil, false, fmt.Errorf("%w: a message length cut short", errCorrupt)
	}
	n := int64(int32(binary.LittleEndian.Uint32(rest[p:]))) //nolint:gosec // the stored bits
	if n == 0 {
		return Message{}, 0, nil, nil, true, nil
	}
	if n < 0 || n > int64(len(rest)-p-4) {
		return Message{}, 0, nil, nil, false, fmt.Errorf("%w: metadata of %d bytes past the end", errCorrupt, n)
	}
	meta = rest[:int64(p)+4+n]
	f := &fbuf{b: rest[int64(p)+4 : int64(p)+4+n]}
	root, err := f.u32(0)
	if err != nil {
		return Message{}, 0, nil, nil, false, err
	}
	msg, err := f.table(root)
	if err != nil {
		return Message{}, 0, nil, nil, false, err
	}
	tp, err := msg.field(1, 1)
	if err != nil {
		return Message{}, 0, nil, nil, false, err
	}
	if tp != 0 {
		typ = int(f.b[tp])
	}
	var bodyLen int64
	if bp, err := msg.field(3, 8); err != nil {
		return Message{}, 0, nil, nil, false, err
	} else if bp != 0 {
		bodyLen, _ = f.i64(bp)
	}
	start := int64(len(meta))
	if bodyLen < 0 || bodyLen > int64(len(rest))-start {
		return Message{}, 0, nil, nil, false, fmt.Errorf("%w: a body of %d bytes past the end", errCorrupt, bodyLen)
	}
	body = rest[start : start+bodyLen]
	return Message{Offset: off, Length: start + bodyLen}, typ, meta, body, false, nil
}

// checkSchemaMessage checks a schema message's fields, as a file's footer
// schema is checked.
func checkSchemaMessage(meta []byte) error {
	msg, err := messageTable(meta)
	if err != nil {
		return err
	}
	schema, ok, err := msg.subtable(2)
	if err != nil || !ok {
		return fmt.Errorf("%w: a schema message without its schema", errCorrupt)
	}
	return checkSchema(schema)
}

// messageTable is the Message table of an encapsulated message's metadata
// (its continuation marker, if any, and length first).
func messageTable(meta []byte) (fbTable, error) {
	p := 0
	if binary.LittleEndian.Uint32(meta) == 0xFFFFFFFF {
		p = 4
	}
	f := &fbuf{b: meta[p+4:]}
	root, err := f.u32(0)
	if err != nil {
		return fbTable{}, err
	}
	return f.table(root)
}

// batchRows reads a record batch message's row count.
func batchRows(meta []byte) (int64, error) {
	msg, err := messageTable(meta)
	if err != nil {
		return 0, err
	}
	hdr, ok, err := msg.subtable(2)
	if err != nil || !ok {
		return 0, errCorrupt
	}
	lp, err := hdr.field(0, 8)
	if err != nil || lp == 0 {
		return 0, err
	}
	n, _ := msg.f.i64(lp)
	if n < 0 {
		return 0, fmt.Errorf("%w: %d rows", errCorrupt, n)
	}
	return n, nil
}

// ReadStreamBatches decodes record batches from a stream's schema message
// and a run of its record batch messages (their bytes in order), keeping
// only columns (nil: all), after checking them as StreamMessages does.
func ReadStreamBatches(_ context.Context, schemaMsg, batches []byte, columns []string) (out []arrow.RecordBatch, err error) {
	defer func() {
		if r := recover(); r != nil {
			for _, b := range out {
				b.Release()
			}
			out, err = nil, fmt.Errorf("corrupt Arrow IPC stream: %v", r)
		}
	}()
	stream := make([]byte, 0, len(schemaMsg)+len(batches)+len(eos))
	stream = append(append(append(stream, schemaMsg...), batches...), eos...)
	if _, _, err := StreamMessages(stream); err != nil {
		return nil, err
	}
	r, err := ipc.NewReader(bytes.NewReader(stream), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, fmt.Errorf("not an Arrow IPC stream: %w", err)
	}
	defer r.Release()
	keep, err := projection(r.Schema(), columns)
	if err != nil {
		return nil, err
	}
	for r.Next() {
		b := r.RecordBatch()
		if keep == nil {
			b.Retain()
			out = append(out, b)
			continue
		}
		cols := make([]arrow.Array, len(keep))
		fields := make([]arrow.Field, len(keep))
		for k, i := range keep {
			cols[k], fields[k] = b.Column(i), b.Schema().Field(i)
		}
		out = append(out, array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, b.NumRows()))
	}
	if err := r.Err(); err != nil {
		for _, b := range out {
			b.Release()
		}
		return nil, err
	}
	return out, nil
}

// projection is the positions of columns in s (nil: all).
func projection(s *arrow.Schema, columns []string) ([]int, error) {
	if columns == nil {
		return nil, nil
	}
	out := make([]int, len(columns))
	for k, c := range columns {
		idx := s.FieldIndices(c)
		if len(idx) == 0 {
			var names []string
			for _, f := range s.Fields() {
				names = append(names, f.Name)
			}
			return nil, fmt.Errorf("no column %q: the stream's columns are %s", c, strings.Join(names, ", "))
		}
		out[k] = idx[0]
	}
	return out, nil
}

// StreamSchema reads the schema of a stream from its schema message.
func StreamSchema(schemaMsg []byte) (s *arrow.Schema, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("corrupt Arrow IPC stream: %v", r)
		}
	}()
	if _, _, err := StreamMessages(schemaMsg); err != nil {
		return nil, err
	}
	r, err := ipc.NewReader(bytes.NewReader(append(append([]byte{}, schemaMsg...), eos...)))
	if err != nil {
		return nil, fmt.Errorf("not an Arrow IPC stream: %w", err)
	}
	defer r.Release()
	return r.Schema(), nil
}

package arrowipc

import (
	"bytes"
	"context"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// writeStream writes an Arrow IPC stream (no footer) of batches of the
// given sizes, as arrow-go's stream writer lays it out.
func writeStream(t testing.TB, opts []ipc.Option, batches ...int) []byte {
	t.Helper()
	var buf bytes.Buffer
	writeBatches(t, func(schema *arrow.Schema) batchWriter {
		return ipc.NewWriter(&buf, append([]ipc.Option{ipc.WithSchema(schema)}, opts...)...)
	}, batches)
	return buf.Bytes()
}

// A stream's batches are found with their rows and disjoint ranges, and a
// run of them decodes from its bytes and the schema message alone.
func TestStreamMessagesAndRuns(t *testing.T) {
	data := writeStream(t, nil, 10, 3, 25)
	schema, batches, err := StreamMessages(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(batches) != 3 || batches[0].Rows != 10 || batches[1].Rows != 3 || batches[2].Rows != 25 || schema.Offset != 0 || batches[0].Offset != schema.Length {
		t.Fatalf("schema %+v, batches %+v", schema, batches)
	}
	run := data[batches[1].Offset : batches[2].Offset+batches[2].Length]
	recs, err := ReadStreamBatches(context.Background(), data[:schema.Length], run, []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, r := range recs {
		ids = append(ids, r.Column(0).(*array.Int64).Int64Values()...)
		r.Release()
	}
	if len(ids) != 28 || ids[0] != 10 || ids[27] != 37 {
		t.Fatalf("the run decodes to ids %v", ids)
	}
	if _, err := ReadStreamBatches(context.Background(), data[:schema.Length], run, []string{"x"}); err == nil || !strings.Contains(err.Error(), `no column "x"`) {
		t.Fatalf("an unknown column: %v", err)
	}
	if _, _, err := StreamMessages(run); err == nil || !strings.Contains(err.Error(), "does not start with its schema") {
		t.Fatalf("a stream without its schema: %v", err)
	}
}

// FuzzStream: any bytes are walked and decoded as a stream or refused,
// never a panic or an allocation the bytes do not back.
func FuzzStream(f *testing.F) {
	f.Add(writeStream(f, nil, 3, 2))
	f.Add(writeStream(f, []ipc.Option{ipc.WithZstd()}, 4))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<20 {
			return
		}
		schema, batches, err := StreamMessages(data)
		if err != nil {
			return
		}
		msg := data[schema.Offset : schema.Offset+schema.Length]
		if _, err := StreamSchema(msg); err != nil {
			return
		}
		for _, b := range batches {
			recs, err := ReadStreamBatches(context.Background(), msg, data[b.Offset:b.Offset+b.Length], nil)
			if err != nil {
				continue
			}
			var n int64
			for _, r := range recs {
				n += r.NumRows()
				r.Release()
			}
			if n != b.Rows {
				t.Fatalf("a batch of %d rows decodes to %d", b.Rows, n)
			}
		}
	})
}

// The stream's framing, byte by byte: each message a continuation marker
// (0xFFFFFFFF), an int32 metadata length, the Message flatbuffer padded to
// 8 bytes, then its body; the stream ends in the marker and a zero length.
// A pre-1.0 stream (no marker: the length first) reads alike.
func TestWorkedStreamFraming(t *testing.T) {
	data := writeStream(t, nil, 2, 1)
	schema, batches, err := StreamMessages(data)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	for i, m := range append([]Message{schema}, batches...) {
		b := data[m.Offset:]
		n := int64(le.Uint32(b[4:]))
		if le.Uint32(b) != 0xFFFFFFFF || (8+n)%8 != 0 || n > m.Length-8 {
			t.Fatalf("message %d at %d: marker %#x, metadata of %d bytes in a message of %d", i, m.Offset, le.Uint32(b), n, m.Length)
		}
	}
	last := batches[len(batches)-1]
	if end := data[last.Offset+last.Length:]; !bytes.Equal(end, []byte{0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0}) {
		t.Fatalf("the stream ends in % x, want the end-of-stream marker", end)
	}
	// Without markers: each message's length word alone.
	var old []byte
	for _, m := range append([]Message{schema}, batches...) {
		old = append(old, data[m.Offset+4:m.Offset+m.Length]...)
	}
	old = append(old, 0, 0, 0, 0)
	s2, b2, err := StreamMessages(old)
	if err != nil || len(b2) != 2 || b2[0].Rows != 2 || b2[1].Rows != 1 || s2.Length != schema.Length-4 {
		t.Fatalf("the stream without markers: schema %+v, batches %+v, %v", s2, b2, err)
	}
}

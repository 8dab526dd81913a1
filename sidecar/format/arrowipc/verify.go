package arrowipc

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// arrow-go trusts the lengths in an IPC file's flatbuffers and allocates
// what they say before reading (a corrupt field count in the schema ran a
// fuzzer out of memory). verify walks the footer, the schema and every
// record batch message with bounds checks first, so that only files whose
// structures fit their bytes reach arrow-go.

var errCorrupt = errors.New("corrupt Arrow IPC file")

// unionType is the Type union's tag of Union in Schema.fbs.
const unionType = 14

type fbuf struct {
	b     []byte
	nodes int // budget of tables visited
}

func (f *fbuf) u32(p int) (int, error) {
	if p < 0 || p+4 > len(f.b) {
		return 0, errCorrupt
	}
	return int(binary.LittleEndian.Uint32(f.b[p:])), nil
}

func (f *fbuf) i64(p int) (int64, error) {
	if p < 0 || p+8 > len(f.b) {
		return 0, errCorrupt
	}
	return int64(binary.LittleEndian.Uint64(f.b[p:])), nil
}

type fbTable struct {
	f        *fbuf
	pos, vt  int
	vtLen    int
	tableLen int
}

func (f *fbuf) table(pos int) (fbTable, error) {
	if f.nodes++; f.nodes > 1_000_000 {
		return fbTable{}, errCorrupt
	}
	if pos < 0 || pos+4 > len(f.b) {
		return fbTable{}, errCorrupt
	}
	soff := int(int32(binary.LittleEndian.Uint32(f.b[pos:])))
	vt := pos - soff
	if vt < 0 || vt+4 > len(f.b) {
		return fbTable{}, errCorrupt
	}
	vtLen := int(binary.LittleEndian.Uint16(f.b[vt:]))
	tableLen := int(binary.LittleEndian.Uint16(f.b[vt+2:]))
	if vtLen < 4 || vtLen%2 != 0 || vt+vtLen > len(f.b) || pos+tableLen > len(f.b) {
		return fbTable{}, errCorrupt
	}
	return fbTable{f: f, pos: pos, vt: vt, vtLen: vtLen, tableLen: tableLen}, nil
}

// field returns the position of a slot's value, 0 when absent.
func (t fbTable) field(slot, size int) (int, error) {
	i := 4 + 2*slot
	if i+2 > t.vtLen {
		return 0, nil
	}
	o := int(binary.LittleEndian.Uint16(t.f.b[t.vt+i:]))
	if o == 0 {
		return 0, nil
	}
	if o+size > t.tableLen {
		return 0, errCorrupt
	}
	return t.pos + o, nil
}

// ref follows an offset slot to the table, vector or string it names.
func (t fbTable) ref(slot int) (int, error) {
	p, err := t.field(slot, 4)
	if err != nil || p == 0 {
		return 0, err
	}
	o, err := t.f.u32(p)
	if err != nil {
		return 0, err
	}
	if p+o >= len(t.f.b) {
		return 0, errCorrupt
	}
	return p + o, nil
}

// vector returns the first element and the length of a vector slot whose
// elements are size bytes, checking that they fit.
func (t fbTable) vector(slot, size int) (int, int, error) {
	p, err := t.ref(slot)
	if err != nil || p == 0 {
		return 0, 0, err
	}
	n, err := t.f.u32(p)
	if err != nil {
		return 0, 0, err
	}
	if n > (len(t.f.b)-p-4)/max(size, 1) {
		return 0, 0, errCorrupt
	}
	return p + 4, n, nil
}

func (t fbTable) subtable(slot int) (fbTable, bool, error) {
	p, err := t.ref(slot)
	if err != nil || p == 0 {
		return fbTable{}, false, err
	}
	sub, err := t.f.table(p)
	return sub, err == nil, err
}

func (t fbTable) tables(slot int, each func(fbTable) error) error {
	start, n, err := t.vector(slot, 4)
	if err != nil {
		return err
	}
	for i := range n {
		p := start + 4*i
		o, err := t.f.u32(p)
		if err != nil {
			return err
		}
		sub, err := t.f.table(p + o)
		if err != nil {
			return err
		}
		if err := each(sub); err != nil {
			return err
		}
	}
	return nil
}

func checkKeyValues(t fbTable, slot int) error {
	return t.tables(slot, func(kv fbTable) error {
		for s := range 2 {
			if _, _, err := kv.vector(s, 1); err != nil {
				return err
			}
		}
		return nil
	})
}

func checkField(t fbTable, depth int) error {
	if depth > 64 {
		return errCorrupt
	}
	if _, _, err := t.vector(0, 1); err != nil { // name
		return err
	}
	typeType := byte(0)
	if p, err := t.field(2, 1); err != nil {
		return err
	} else if p != 0 {
		typeType = t.f.b[p]
	}
	if typ, ok, err := t.subtable(3); err != nil {
		return err
	} else if ok && typeType == unionType {
		// Union's typeIds is the only vector of a type table.
		if _, _, err := typ.vector(1, 4); err != nil {
			return err
		}
	}
	if dict, ok, err := t.subtable(4); err != nil {
		return err
	} else if ok {
		if _, _, err := dict.subtable(1); err != nil {
			return err
		}
	}
	if err := t.tables(5, func(c fbTable) error { return checkField(c, depth+1) }); err != nil {
		return err
	}
	return checkKeyValues(t, 6)
}

// Verify checks an Arrow IPC file's footer, schema and record batch
// messages (their flatbuffers, and that each buffer lies within its
// batch's body) before arrow-go's reader, which trusts them, reads it:
// for every parser of outside Arrow IPC bytes.
func Verify(data []byte) error { return verify(data) }

// verify checks an IPC file's footer, schema and record batch messages.
func verify(data []byte) error {
	if len(data) >= 4 && binary.LittleEndian.Uint32(data) == continuation {
		return errStream
	}
	if len(data) < 18 || string(data[:6]) != magic {
		return fmt.Errorf("%w: no ARROW1 at the start", errCorrupt)
	}
	n, err := footerLen(data[len(data)-10:], int64(len(data)))
	if err != nil {
		return err
	}
	return verifyFooter(data[len(data)-10-n:len(data)-10], int64(len(data)), func(off, metaLen, body int64) ([]byte, []byte, bool) {
		return data[off : off+metaLen], data[off+metaLen : off+metaLen+body], true
	})
}

const magic = "ARROW1"

// continuation starts each message of an IPC stream, and so the stream.
const continuation = 0xFFFFFFFF

// errStream is an IPC stream given as a file: what Hugging Face datasets
// writes as .arrow.
var errStream = fmt.Errorf("%w: it is an Arrow IPC stream, not a file (Hugging Face datasets writes its .arrow files so): "+
	"read a datasets folder with format huggingface, or write an IPC file (pyarrow.ipc.new_file)", errCorrupt)

// footerLen reads the footer length from a file's last 10 bytes.
func footerLen(last10 []byte, size int64) (int, error) {
	if len(last10) == 10 && binary.LittleEndian.Uint32(last10[2:]) == continuation && binary.LittleEndian.Uint32(last10[6:]) == 0 {
		return 0, errStream // a stream's end-of-stream marker
	}
	if len(last10) != 10 || string(last10[4:]) != magic {
		return 0, fmt.Errorf("%w: no ARROW1 at the end", errCorrupt)
	}
	n := int(int32(binary.LittleEndian.Uint32(last10)))
	if n <= 0 || int64(n) > size-18 {
		return 0, fmt.Errorf("%w: footer length %d", errCorrupt, n)
	}
	return n, nil
}

// verifyFooter checks a footer and, for every record batch whose message
// meta returns, that message.
func verifyFooter(footerBytes []byte, size int64, meta func(off, metaLen, body int64) (msg, bodyBytes []byte, ok bool)) error {
	data := struct{ n int64 }{size}
	f := &fbuf{b: footerBytes}
	root, err := f.u32(0)
	if err != nil {
		return err
	}
	footer, err := f.table(root)
	if err != nil {
		return err
	}
	schema, ok, err := footer.subtable(1)
	if err != nil || !ok {
		return fmt.Errorf("%w: footer without a schema", errCorrupt)
	}
	if err := checkSchema(schema); err != nil {
		return err
	}
	if _, _, err := footer.vector(2, 24); err != nil { // dictionaries
		return err
	}
	start, count, err := footer.vector(3, 24)
	if err != nil {
		return err
	}
	for i := range count {
		b := start + 24*i
		off, _ := f.i64(b)
		metaLen := int64(int32(binary.LittleEndian.Uint32(f.b[b+8:])))
		body, _ := f.i64(b + 16)
		if off < 8 || metaLen < 8 || body < 0 || off > data.n || metaLen > data.n-off || body > data.n-off-metaLen {
			return fmt.Errorf("%w: record batch %d spans past the file", errCorrupt, i)
		}
		if m, bodyBytes, ok := meta(off, metaLen, body); ok {
			if err := checkMessage(m, body, bodyBytes); err != nil {
				return fmt.Errorf("record batch %d: %w", i, err)
			}
		}
	}
	return nil
}

// checkSchema checks a Schema table: its fields (recursively), its
// metadata and its features.
func checkSchema(schema fbTable) error {
	if err := schema.tables(1, func(fl fbTable) error { return checkField(fl, 0) }); err != nil {
		return err
	}
	if err := checkKeyValues(schema, 2); err != nil {
		return err
	}
	_, _, err := schema.vector(3, 8)
	return err
}

// checkMessage checks a record batch message: its nodes and buffers fit,
// and every buffer lies inside the body.
func checkMessage(meta []byte, body int64, bodyBytes []byte) error {
	p := 0
	if len(meta) >= 4 && binary.LittleEndian.Uint32(meta) == 0xFFFFFFFF {
		p = 4
	}
	if p+4 > len(meta) {
		return errCorrupt
	}
	n := int(int32(binary.LittleEndian.Uint32(meta[p:])))
	if n <= 0 || n > len(meta)-p-4 {
		return errCorrupt
	}
	f := &fbuf{b: meta[p+4 : p+4+n]}
	root, err := f.u32(0)
	if err != nil {
		return err
	}
	msg, err := f.table(root)
	if err != nil {
		return err
	}
	if err := checkKeyValues(msg, 4); err != nil {
		return err
	}
	hdr, ok, err := msg.subtable(2)
	if err != nil || !ok {
		return errCorrupt
	}
	if _, _, err := hdr.vector(1, 16); err != nil { // nodes
		return err
	}
	start, count, err := hdr.vector(2, 16) // buffers
	if err != nil {
		return err
	}
	_, compressed, err := hdr.subtable(3)
	if err != nil {
		return err
	}
	for i := range count {
		off, _ := f.i64(start + 16*i)
		n, _ := f.i64(start + 16*i + 8)
		if off < 0 || n < 0 || off > body || n > body-off {
			return fmt.Errorf("%w: buffer %d outside the body", errCorrupt, i)
		}
		// A compressed buffer begins with its uncompressed length, which
		// arrow-go allocates before it decompresses a byte.
		if compressed && n > 0 && bodyBytes != nil {
			if n < 8 || int64(len(bodyBytes)) < off+8 {
				return fmt.Errorf("%w: compressed buffer %d of %d bytes", errCorrupt, i, n)
			}
			if u := int64(binary.LittleEndian.Uint64(bodyBytes[off:])); u != -1 && (u < 0 || u > maxBufferBytes) {
				return fmt.Errorf("%w: compressed buffer %d claims %d bytes (at most %d)", errCorrupt, i, u, int64(maxBufferBytes))
			}
		}
	}
	_, _, err = hdr.vector(4, 8)
	return err
}

// maxBufferBytes bounds what one decompressed buffer may claim.
const maxBufferBytes = 1 << 30

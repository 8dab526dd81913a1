package lancefile

// Worked examples: each layout and encoding of the package doc's byte
// layout stated from a few bytes. The recorded oracle
// (../lancetable/testdata/golden) proves the same decoders against
// pylance's files; these say what each step does.

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
)

func u16s(v ...uint16) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint16(b, x)
	}
	return b
}

func u32s(v ...uint32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, x)
	}
	return b
}

func values(t *testing.T, b block) []string {
	t.Helper()
	if err := b.check(); err != nil {
		t.Fatal(err)
	}
	out := make([]string, b.n)
	for i := range b.n {
		out[i] = string(b.value(i))
	}
	return out
}

func ints(b block) []uint64 {
	out := make([]uint64, b.n)
	for i := range b.n {
		out[i] = b.get(i)
	}
	return out
}

func TestWorkedFooter(t *testing.T) {
	b := binary.LittleEndian.AppendUint64(nil, 1000) // column metadata start
	b = binary.LittleEndian.AppendUint64(b, 1200)    // column metadata offset table
	b = binary.LittleEndian.AppendUint64(b, 1232)    // global buffer offset table
	b = binary.LittleEndian.AppendUint32(b, 1)       // global buffers
	b = binary.LittleEndian.AppendUint32(b, 2)       // columns
	b = append(b, u16s(2, 1)...)                     // major, minor
	b = append(b, "LANC"...)
	f, err := ParseFooter(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Footer{ColumnMetaStart: 1000, ColumnMetaTable: 1200, GlobalTable: 1232, GlobalBuffers: 1, Columns: 2, Major: 2, Minor: 1}
	if f != want || f.Version() != "2.1" || f.CheckVersion() != nil {
		t.Fatalf("footer %+v (version %s), want %+v", f, f.Version(), want)
	}
	// 2.0 files say 0.3; 2.3 is refused, naming the rewrite.
	copy(b[32:], u16s(0, 3))
	if f, _ := ParseFooter(b); f.Version() != "2.0" || f.CheckVersion() != nil {
		t.Fatalf("a 0.3 footer is version %s (%v), want 2.0", f.Version(), f.CheckVersion())
	}
	copy(b[32:], u16s(2, 3))
	if f, _ := ParseFooter(b); !errors.Is(f.CheckVersion(), ErrUnsupported) {
		t.Fatalf("a 2.3 footer: %v, want ErrUnsupported", f.CheckVersion())
	}
	if _, err := ParseFooter(append(b[:36:36], "LANX"...)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a footer without LANC: %v", err)
	}
}

// A mini-block page's chunk table: one u16 a chunk (u32 in 2.2's large
// chunks), its bytes 8·(e>>4 + 1) and its values 2^(e&15), the last
// chunk's values what the page's items leave.
func TestWorkedChunkTable(t *testing.T) {
	table := u16s(1<<4|3, 2<<4) // 16 bytes of 8 values, then 24 bytes of the rest
	file := append(append(table, make([]byte, 4)...), make([]byte, 40)...)
	p := &Page{Offsets: []uint64{0, 8}, Sizes: []uint64{4, 40}, Rows: 11, Layout: &Layout{Items: 11}}
	got, err := p.chunks(memSource(file))
	if err != nil {
		t.Fatal(err)
	}
	want := []chunk{{off: 8, size: 16, values: 8}, {off: 24, size: 24, values: 3}}
	if !slices.Equal(got, want) {
		t.Fatalf("chunks %+v, want %+v", got, want)
	}
	p.Sizes[1] = 32 // the second chunk would end past its buffer
	if _, err := p.chunks(memSource(file)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a chunk past its buffer: %v", err)
	}
}

// A mini-block chunk: a u16 level count, a u16 size for the repetition and
// for the definition levels (where the page has them), one size a value
// buffer, then each buffer 8-byte aligned.
func TestWorkedMiniBlockChunk(t *testing.T) {
	chunk := u16s(3, 6, 12)                 // 3 levels, 6 bytes of definition levels, 12 bytes of values
	chunk = append(chunk, 0, 0)             // to 8 bytes
	chunk = append(chunk, u16s(0, 1, 0)...) // definition levels: the second item null
	chunk = append(chunk, 0, 0)             // to 16 bytes
	chunk = append(chunk, u32s(7, 0, 9)...) // values, a slot for the null
	flat := func(bits uint64) *Encoding { return &Encoding{Kind: Flat, Bits: bits} }
	p := &Page{Layout: &Layout{Def: flat(16), Values: flat(32), Buffers: 1}}
	mc, err := p.decodeChunk(chunk, chunk2(3))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(mc.def, []uint16{0, 1, 0}) || !slices.Equal(ints(mc.vals), []uint64{7, 0, 9}) || mc.rep != nil {
		t.Fatalf("levels %v, values %v", mc.def, ints(mc.vals))
	}
	if _, err := p.decodeChunk(chunk[:20], chunk2(3)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a chunk cut short: %v", err)
	}
}

func chunk2(values uint64) chunk { return chunk{values: values} }

// Variable: n+1 offsets (u32 or u64) into the buffer itself, the values'
// bytes after them.
func TestWorkedVariable(t *testing.T) {
	buf := append(u32s(12, 13, 16), "abcd"...)
	b, err := variableMini(&Encoding{Kind: Variable, Child: &Encoding{Kind: Flat, Bits: 32}}, buf, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := values(t, b); !slices.Equal(got, []string{"a", "bcd"}) {
		t.Fatalf("values %q", got)
	}
	if _, err := variableMini(&Encoding{Kind: Variable, Child: &Encoding{Kind: Flat, Bits: 32}}, append(u32s(12, 17, 16), "abcd"...), 2); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("descending offsets: %v", err)
	}
}

// FSST: each code a symbol of the page's table (its bytes from the low
// byte), 255 a literal byte; the header's bit 24 off means uncompressed.
func TestWorkedFsst(t *testing.T) {
	table := make([]byte, fsstTableSize)
	binary.LittleEndian.PutUint64(table, 0x46535354<<32|1<<24|2) // "FSST", on, 2 symbols
	binary.LittleEndian.PutUint64(table[8:], uint64('t')|uint64('h')<<8)
	binary.LittleEndian.PutUint64(table[16:], uint64('e')|uint64(' ')<<8|uint64('a')<<16)
	table[24], table[25] = 2, 3 // the symbols' lengths, after the n symbols
	in := block{n: 2, offsets: []uint64{0, 4, 7}, data: []byte{0, 1, 255, 'x', 1, 0, 0}}
	out, err := fsstDecode(table, in)
	if err != nil {
		t.Fatal(err)
	}
	if got := values(t, out); !slices.Equal(got, []string{"the ax", "e athth"}) {
		t.Fatalf("values %q", got)
	}
	binary.LittleEndian.PutUint64(table, 0x46535354<<32|2) // off: stored as they are
	if out, err := fsstDecode(table, in); err != nil || string(out.data) != string(in.data) {
		t.Fatalf("an FSST table marked off changed the values: %q, %v", out.data, err)
	}
	binary.LittleEndian.PutUint64(table, 0x46535354<<32|1<<24|2)
	bad := block{n: 1, offsets: []uint64{0, 1}, data: []byte{5}} // code 5 of a 2-symbol table
	if _, err := fsstDecode(table, bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a code past the table: %v", err)
	}
}

// Rle: the run values (Flat) in one buffer, their u8 run lengths in the
// other; runs past n values are cut, fewer than n refused.
func TestWorkedRle(t *testing.T) {
	e := &Encoding{Kind: Rle, Child: &Encoding{Kind: Flat, Bits: 32}}
	b, err := rle(e, u32s(7, 9), []byte{3, 2}, 5)
	if err != nil {
		t.Fatal(err)
	}
	if got := ints(b); !slices.Equal(got, []uint64{7, 7, 7, 9, 9}) {
		t.Fatalf("values %v", got)
	}
	if _, err := rle(e, u32s(7, 9), []byte{3, 2}, 6); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("runs of 5 values read as 6: %v", err)
	}
}

// ByteStreamSplit: byte k of every value together, stream after stream.
func TestWorkedByteStreamSplit(t *testing.T) {
	split := block{n: 2, bits: 16, fixed: []byte{0x01, 0x03, 0x02, 0x04}} // low bytes, then high bytes
	b, err := unsplit(split)
	if err != nil {
		t.Fatal(err)
	}
	if got := ints(b); !slices.Equal(got, []uint64{0x0201, 0x0403}) {
		t.Fatalf("values %#x", got)
	}
}

// A dictionary page: indices (here 8-bit) into the dictionary's values.
func TestWorkedDictionary(t *testing.T) {
	dict := block{n: 3, offsets: []uint64{0, 3, 6, 10}, data: []byte("catdogbird")}
	out, err := lookup(dict, block{n: 4, bits: 8, fixed: []byte{2, 0, 0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if got := values(t, out); !slices.Equal(got, []string{"bird", "cat", "cat", "dog"}) {
		t.Fatalf("values %q", got)
	}
	if _, err := lookup(dict, block{n: 1, bits: 8, fixed: []byte{3}}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("an index past the dictionary: %v", err)
	}
}

package lancefile

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// block is a decoded data block: n fixed-width values of bits each
// (bits 1: a bitmap, least significant bit first), or n variable-width
// values (offsets, n+1 of them, into data).
type block struct {
	n       int
	bits    int
	fixed   []byte
	offsets []uint64
	data    []byte
	// itemValid is the validity bitmap of a fixed-size list's items
	// (nil: all valid), dim items a value.
	itemValid []byte
	dim       int
	// allNull: the values are n nulls, of no width.
	allNull bool
}

func (b block) variable() bool { return b.offsets != nil }

// check refuses a block whose offsets or bytes do not hold its n values
// (what a hostile page's decoding could otherwise index out of range).
func (b block) check() error {
	switch {
	case b.allNull:
		return nil
	case b.variable():
		if len(b.offsets) != b.n+1 {
			return corrupt("%d values with %d offsets", b.n, len(b.offsets))
		}
		for i := 1; i < len(b.offsets); i++ {
			if b.offsets[i] < b.offsets[i-1] {
				return corrupt("value offsets descend (%d after %d)", b.offsets[i], b.offsets[i-1])
			}
		}
		if b.offsets[b.n] > uint64(len(b.data)) {
			return corrupt("values end at byte %d of %d", b.offsets[b.n], len(b.data))
		}
	case len(b.fixed) < fixedBytes(b.n, b.bits):
		return corrupt("%d values of %d bits in %d bytes", b.n, b.bits, len(b.fixed))
	}
	if b.itemValid != nil && len(b.itemValid) < fixedBytes(b.n*max(b.dim, 1), 1) {
		return corrupt("%d items' validity in %d bytes", b.n*max(b.dim, 1), len(b.itemValid))
	}
	return nil
}

// value returns variable value i.
func (b block) value(i int) []byte { return b.data[b.offsets[i]:b.offsets[i+1]] }

// get returns fixed value i of a block of 8 to 64 bits.
func (b block) get(i int) uint64 {
	w := b.bits / 8
	var v [8]byte
	copy(v[:], b.fixed[i*w:(i+1)*w])
	return binary.LittleEndian.Uint64(v[:])
}

// fixedBytes is the size of n values of bits each.
func fixedBytes(n, bits int) int { return (n*bits + 7) / 8 }

// checkCount bounds a count of values a page claims.
func checkCount(n, bits int) error {
	if n < 0 || bits < 0 || bits > 1<<20 || int64(n)*int64(max(bits, 8))/8 > MaxPageBytes {
		return corrupt("%d values of %d bits exceed what a page may hold", n, bits)
	}
	return nil
}

// decompressBuffer undoes General or buffer compression: LZ4 is a u32
// uncompressed length and an LZ4 block; zstd a u64 length and a frame, or
// a bare frame (older writers).
func decompressBuffer(scheme int, in []byte) ([]byte, error) {
	switch scheme {
	case 0:
		return in, nil
	case LZ4:
		if len(in) < 4 {
			return nil, corrupt("an LZ4 buffer of %d bytes", len(in))
		}
		n := binary.LittleEndian.Uint32(in)
		// An LZ4 block expands at most 255-fold: a larger claim is a lie
		// that would allocate before failing.
		if n > MaxPageBytes || uint64(n) > 255*uint64(len(in))+16 {
			return nil, corrupt("an LZ4 buffer of %d bytes claims %d", len(in), n)
		}
		out := make([]byte, n)
		got, err := lz4.UncompressBlock(in[4:], out)
		if err != nil || got != int(n) {
			return nil, corrupt("an LZ4 buffer does not decompress to its %d bytes (%v)", n, err)
		}
		return out, nil
	case Zstd:
		return unzstd(in)
	}
	return nil, corrupt("compression scheme %d", scheme)
}

var zstdDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxPageBytes))

func unzstd(in []byte) ([]byte, error) {
	frame, n := in, uint64(0)
	raw := len(in) >= 8 && binary.LittleEndian.Uint32(in) == 0xFD2FB528 && in[4]&0x10 == 0
	if !raw {
		if len(in) < 8 {
			return nil, corrupt("a zstd buffer of %d bytes", len(in))
		}
		n, frame = binary.LittleEndian.Uint64(in), in[8:]
		if n > MaxPageBytes {
			return nil, corrupt("a zstd buffer claims %d bytes", n)
		}
	}
	// The claim sizes the output only up to what the frame could plausibly
	// hold: beyond, it grows as the decoder writes (bounded by its limit).
	out, err := zstdDecoder.DecodeAll(frame, make([]byte, 0, min(n, 64*uint64(len(frame))+1024)))
	if err != nil {
		return nil, corrupt("a zstd buffer: %v", err)
	}
	if !raw && uint64(len(out)) != n {
		return nil, corrupt("a zstd buffer decompresses to %d bytes, not its %d", len(out), n)
	}
	return out, nil
}

// decodeMini decodes n values of a mini-block chunk from its value
// buffers, checked to hold them.
func decodeMini(e *Encoding, bufs [][]byte, n int) (block, error) {
	b, err := decodeMiniValues(e, bufs, n)
	if err == nil {
		err = b.check()
	}
	return b, err
}

func decodeMiniValues(e *Encoding, bufs [][]byte, n int) (block, error) {
	if e == nil {
		return block{}, corrupt("a page has no value encoding")
	}
	if err := checkCount(n, 8); err != nil {
		return block{}, err
	}
	need := func(k int) error {
		if len(bufs) < k {
			return corrupt("%s needs %d buffers, the chunk has %d", e.Kind, k, len(bufs))
		}
		return nil
	}
	switch e.Kind {
	case Flat:
		if err := need(1); err != nil {
			return block{}, err
		}
		return flat(e, bufs[0], n)
	case InlineBitpacking:
		if err := need(1); err != nil {
			return block{}, err
		}
		in, err := decompressBuffer(e.Scheme, bufs[0])
		if err != nil {
			return block{}, err
		}
		return inlineBitpacked(int(e.Bits), in, n) //nolint:gosec // checked there
	case OutOfLineBitpacking:
		return outOfLine(e, bufs, n)
	case Variable:
		if err := need(1); err != nil {
			return block{}, err
		}
		return variableMini(e, bufs[0], n)
	case Fsst:
		inner, err := decodeMini(e.Child, bufs, n)
		if err != nil {
			return block{}, err
		}
		return fsstDecode(e.Symbols, inner)
	case Rle:
		if err := need(2); err != nil {
			return block{}, err
		}
		return rle(e, bufs[0], bufs[1], n)
	case General:
		if err := need(1); err != nil {
			return block{}, err
		}
		in, err := decompressBuffer(e.Scheme, bufs[0])
		if err != nil {
			return block{}, err
		}
		return decodeMini(e.Child, append([][]byte{in}, bufs[1:]...), n)
	case ByteStreamSplit:
		inner, err := decodeMini(e.Child, bufs, n)
		if err != nil {
			return block{}, err
		}
		return unsplit(inner)
	case FixedSizeList:
		return fixedSizeList(e, bufs, n)
	case ConstantValue:
		return constant(e.Value, n)
	case PackedStruct: // blob v1's descriptors
		if err := blobDescriptors(e); err != nil {
			return block{}, err
		}
		return decodeMini(e.Child, bufs, n)
	}
	return block{}, fmt.Errorf("%w: %s values in a mini-block page", ErrUnsupported, e.Kind)
}

func flat(e *Encoding, buf []byte, n int) (block, error) {
	bits := int(e.Bits) //nolint:gosec // checked below
	if bits <= 0 || (bits != 1 && bits%8 != 0) || bits > 1<<16 {
		return block{}, corrupt("flat values of %d bits", e.Bits)
	}
	if err := checkCount(n, bits); err != nil {
		return block{}, err
	}
	in, err := decompressBuffer(e.Scheme, buf)
	if err != nil {
		return block{}, err
	}
	size := fixedBytes(n, bits)
	if len(in) < size {
		return block{}, corrupt("%d values of %d bits in %d bytes", n, bits, len(in))
	}
	return block{n: n, bits: bits, fixed: in[:size]}, nil
}

func inlineBitpacked(t int, in []byte, n int) (block, error) {
	if t != 8 && t != 16 && t != 32 && t != 64 {
		return block{}, corrupt("bit-packed values of %d bits", t)
	}
	out := make([]byte, 0, n*t/8)
	var vals [blockValues]uint64
	for done := 0; done < n; done += blockValues {
		if len(in) < t/8 {
			return block{}, corrupt("a bit-packed block has no width")
		}
		w64 := word(in, t, 0)
		if w64 > uint64(t) {
			return block{}, corrupt("a bit-packed block of width %d in %d-bit values", w64, t)
		}
		w := int(w64) //nolint:gosec // at most 64
		in = in[t/8:]
		size := packedBytes(w)
		if len(in) < size {
			return block{}, corrupt("a bit-packed block of width %d in %d bytes", w, len(in))
		}
		unpack(in[:size], t, w, &vals)
		in = in[size:]
		for i := range min(blockValues, n-done) {
			out = putWord(out, t, vals[i])
		}
	}
	return block{n: n, bits: t, fixed: out}, nil
}

// outOfLine decodes values bit-packed to a width the encoding gives, in
// blocks of 1024; a last short block is packed too, or stored unpacked.
func outOfLine(e *Encoding, bufs [][]byte, n int) (block, error) {
	t := int(e.Bits) //nolint:gosec // checked
	if (t != 8 && t != 16 && t != 32 && t != 64) || e.Child == nil || e.Child.Kind != Flat || len(bufs) < 1 {
		return block{}, fmt.Errorf("%w: out-of-line bit-packing of %d bits over %s", ErrUnsupported, e.Bits, e.Child)
	}
	w := int(e.Child.Bits) //nolint:gosec // checked
	if w < 0 || w > t {
		return block{}, corrupt("bit-packing %d-bit values to %d bits", t, w)
	}
	in, err := decompressBuffer(e.Child.Scheme, bufs[0])
	if err != nil {
		return block{}, err
	}
	whole, tail := n/blockValues, n%blockValues
	size := packedBytes(w)
	out := make([]byte, 0, n*t/8)
	var vals [blockValues]uint64
	for range whole {
		if len(in) < size {
			return block{}, corrupt("bit-packed levels end early")
		}
		unpack(in[:size], t, w, &vals)
		in = in[size:]
		for i := range blockValues {
			out = putWord(out, t, vals[i])
		}
	}
	if tail > 0 {
		switch {
		case len(in) >= size && size > 0 && len(in) != tail*t/8:
			unpack(in[:size], t, w, &vals)
			for i := range tail {
				out = putWord(out, t, vals[i])
			}
		case len(in) >= tail*t/8:
			out = append(out, in[:tail*t/8]...) // the short block, unpacked
		default:
			return block{}, corrupt("bit-packed levels end early")
		}
	}
	return block{n: n, bits: t, fixed: out}, nil
}

// variableMini decodes a mini-block's variable values: one buffer of n+1
// offsets (32 or 64 bits) into itself, then the bytes.
func variableMini(e *Encoding, buf []byte, n int) (block, error) {
	if e.Child == nil || e.Child.Kind != Flat || (e.Child.Bits != 32 && e.Child.Bits != 64) {
		return block{}, fmt.Errorf("%w: variable values with %s offsets", ErrUnsupported, e.Child)
	}
	buf, err := decompressBuffer(e.Scheme, buf)
	if err != nil {
		return block{}, err
	}
	w := int(e.Child.Bits / 8)
	if len(buf) < (n+1)*w {
		return block{}, corrupt("%d variable values with %d bytes of offsets", n, len(buf))
	}
	offs := make([]uint64, n+1)
	for i := range offs {
		if w == 4 {
			offs[i] = uint64(binary.LittleEndian.Uint32(buf[4*i:]))
		} else {
			offs[i] = binary.LittleEndian.Uint64(buf[8*i:])
		}
	}
	base := offs[0]
	for i := range offs {
		if offs[i] < base || offs[i] > uint64(len(buf)) || (i > 0 && offs[i] < offs[i-1]) {
			return block{}, corrupt("variable value offsets are not ascending within their %d bytes", len(buf))
		}
		offs[i] -= base
	}
	return block{n: n, offsets: offs, data: buf[base : offs[n]+base]}, nil
}

// rle expands runs: values and u8 run lengths, until n values.
func rle(e *Encoding, vals, lens []byte, n int) (block, error) {
	if e.Child == nil || e.Child.Kind != Flat || e.Child.Bits%8 != 0 || e.Child.Bits == 0 || e.Child.Bits > 128 {
		return block{}, fmt.Errorf("%w: run-length values of %s", ErrUnsupported, e.Child)
	}
	w := int(e.Child.Bits / 8)
	if len(vals) < len(lens)*w {
		return block{}, corrupt("%d runs with %d bytes of values", len(lens), len(vals))
	}
	out := make([]byte, 0, n*w)
	for r, l := range lens {
		for range int(l) {
			if len(out) == n*w {
				break
			}
			out = append(out, vals[r*w:(r+1)*w]...)
		}
	}
	if len(out) != n*w {
		return block{}, corrupt("runs of %d values, not %d", len(out)/w, n)
	}
	return block{n: n, bits: w * 8, fixed: out}, nil
}

// unsplit joins byte streams back into values.
func unsplit(b block) (block, error) {
	if b.variable() || b.bits%8 != 0 {
		return block{}, corrupt("a byte stream split over non-byte values")
	}
	w := b.bits / 8
	out := make([]byte, len(b.fixed))
	for i := range b.n {
		for k := range w {
			out[i*w+k] = b.fixed[k*b.n+i]
		}
	}
	b.fixed = out
	return b, nil
}

// fixedSizeList flattens fixed-size lists: n lists of Bits items each,
// the items' validity bitmap first where they have one.
func fixedSizeList(e *Encoding, bufs [][]byte, n int) (block, error) {
	dim := int(e.Bits) //nolint:gosec // checked
	if dim <= 0 || dim > 1<<20 {
		return block{}, corrupt("fixed-size lists of %d items", e.Bits)
	}
	var valid []byte
	if e.HasValidity {
		if len(bufs) < 2 {
			return block{}, corrupt("fixed-size lists with validity need two buffers")
		}
		valid = bufs[0]
		if len(valid) < (n*dim+7)/8 {
			return block{}, corrupt("fixed-size list item validity of %d bytes for %d items", len(valid), n*dim)
		}
		bufs = bufs[1:]
	}
	inner, err := decodeMini(e.Child, bufs, n*dim)
	if err != nil {
		return block{}, err
	}
	if inner.variable() {
		return block{}, fmt.Errorf("%w: fixed-size lists of variable-width items", ErrUnsupported)
	}
	return block{n: n, bits: inner.bits * dim, fixed: inner.fixed, itemValid: valid, dim: dim}, nil
}

func constant(v []byte, n int) (block, error) {
	if len(v) == 0 || len(v) > 32 {
		return block{}, corrupt("a constant of %d bytes", len(v))
	}
	out := bytes.Repeat(v, n)
	return block{n: n, bits: 8 * len(v), fixed: out}, nil
}

// decodeWhole decodes n values stored as one buffer (a dictionary): a
// variable block is [u32 bits per offset][u32 or u64 start of the bytes]
// [offsets][bytes].
func decodeWhole(e *Encoding, buf []byte, n int) (block, error) {
	if e == nil {
		return block{}, corrupt("a dictionary has no encoding")
	}
	switch e.Kind {
	case General:
		in, err := decompressBuffer(e.Scheme, buf)
		if err != nil {
			return block{}, err
		}
		return decodeWhole(e.Child, in, n)
	case Variable:
		return variableWhole(buf, n)
	}
	return decodeMini(e, [][]byte{buf}, n)
}

func variableWhole(buf []byte, n int) (block, error) {
	le := binary.LittleEndian
	if len(buf) < 8 {
		return block{}, corrupt("a variable block of %d bytes", len(buf))
	}
	bits := le.Uint32(buf)
	var start, at uint64
	switch bits {
	case 32:
		start, at = uint64(le.Uint32(buf[4:])), 8
	case 64:
		if len(buf) < 16 {
			return block{}, corrupt("a variable block of %d bytes", len(buf))
		}
		start, at = le.Uint64(buf[8:]), 16
	default:
		return block{}, corrupt("a variable block of %d-bit offsets", bits)
	}
	w := uint64(bits / 8)
	if start > uint64(len(buf)) || start < at || (start-at)/w < uint64(n)+1 {
		return block{}, corrupt("a variable block's offsets do not hold its %d values", n)
	}
	data := buf[start:]
	offs := make([]uint64, n+1)
	for i := range offs {
		if w == 4 {
			offs[i] = uint64(le.Uint32(buf[at+4*uint64(i):]))
		} else {
			offs[i] = le.Uint64(buf[at+8*uint64(i):])
		}
		if offs[i] > uint64(len(data)) || (i > 0 && offs[i] < offs[i-1]) {
			return block{}, corrupt("a variable block's offsets are not ascending within its bytes")
		}
	}
	base := offs[0]
	for i := range offs {
		offs[i] -= base
	}
	return block{n: n, offsets: offs, data: data[base : base+offs[n]]}, nil
}

package orcfile

import (
	"encoding/binary"
	"fmt"
	"io"
)

// The run-length encodings of the specification. Each decoder appends to
// dst until it holds want values and fails if the stream ends first: the
// count of values always comes from the stripe, never from the stream.

// byteRLE decodes the byte run-length encoding: a control byte c < 128 is
// a run of c+3 copies of the next byte, c >= 128 a literal of 256-c bytes.
func byteRLE(dst []byte, b []byte, want int) ([]byte, error) {
	for len(dst) < want {
		if len(b) == 0 {
			return nil, errCorrupt("byte run-length stream", io.ErrUnexpectedEOF)
		}
		c := int(b[0])
		b = b[1:]
		if c < 128 {
			if len(b) == 0 {
				return nil, errCorrupt("byte run", io.ErrUnexpectedEOF)
			}
			n := min(c+3, want-len(dst))
			for range n {
				dst = append(dst, b[0])
			}
			b = b[1:]
			continue
		}
		n := 256 - c
		if n > len(b) {
			return nil, errCorrupt("byte literal", io.ErrUnexpectedEOF)
		}
		dst = append(dst, b[:min(n, want-len(dst))]...)
		b = b[n:]
	}
	return dst, nil
}

// booleans decodes want booleans: byte run-length encoded bytes, most
// significant bit first.
func booleans(b []byte, want int) ([]bool, error) {
	packed, err := byteRLE(nil, b, (want+7)/8)
	if err != nil {
		return nil, err
	}
	out := make([]bool, want)
	for i := range out {
		out[i] = packed[i/8]&(0x80>>(i%8)) != 0
	}
	return out, nil
}

// intReader decodes a stream of integers in RLE v1 or v2.
type intReader struct {
	b      []byte
	signed bool
	v2     bool
}

func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) } //nolint:gosec // the zigzag decoding

// read appends want integers to dst.
func (r *intReader) read(dst []int64, want int) ([]int64, error) {
	for len(dst) < want {
		if len(r.b) == 0 {
			return nil, errCorrupt("integer run-length stream", io.ErrUnexpectedEOF)
		}
		var err error
		if r.v2 {
			dst, err = r.runV2(dst)
		} else {
			dst, err = r.runV1(dst, want)
		}
		if err != nil {
			return nil, err
		}
	}
	return dst[:want], nil
}

func (r *intReader) varint() (int64, error) {
	u, n := binary.Uvarint(r.b)
	if n <= 0 {
		return 0, errCorrupt("varint", io.ErrUnexpectedEOF)
	}
	r.b = r.b[n:]
	if r.signed {
		return unzigzag(u), nil
	}
	return int64(u), nil //nolint:gosec // unsigned values above 2^63 wrap, as in ORC's Java reader
}

// runV1: a control byte c < 128 is a run of c+3 values from a base varint
// by a signed byte delta; c >= 128 is a literal of 256-c varints.
func (r *intReader) runV1(dst []int64, want int) ([]int64, error) {
	c := int(r.b[0])
	r.b = r.b[1:]
	if c < 128 {
		if len(r.b) == 0 {
			return nil, errCorrupt("integer run", io.ErrUnexpectedEOF)
		}
		delta := int64(int8(r.b[0])) //nolint:gosec // a signed byte
		r.b = r.b[1:]
		base, err := r.varint()
		if err != nil {
			return nil, err
		}
		for i := range min(c+3, want-len(dst)) {
			dst = append(dst, base+int64(i)*delta)
		}
		return dst, nil
	}
	for range 256 - c {
		v, err := r.varint()
		if err != nil {
			return nil, err
		}
		dst = append(dst, v)
	}
	return dst, nil
}

// widths decodes the 5-bit width of RLE v2.
var widths = [32]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 26, 28, 30, 32, 40, 48, 56, 64}

// closestFixedBits rounds a bit width up to one RLE v2 can write.
func closestFixedBits(n int) int {
	for _, w := range widths {
		if w >= n {
			return w
		}
	}
	return 64
}

// runV2 decodes one run: short repeat, direct, patched base or delta, by
// the top two bits of its header.
func (r *intReader) runV2(dst []int64) ([]int64, error) {
	h := r.b[0]
	switch h >> 6 {
	case 0: // short repeat: 3-10 copies of one value of 1-8 bytes
		w, n := int(h>>3&7)+1, int(h&7)+3
		if len(r.b) < 1+w {
			return nil, errCorrupt("short repeat run", io.ErrUnexpectedEOF)
		}
		var u uint64
		for _, c := range r.b[1 : 1+w] {
			u = u<<8 | uint64(c)
		}
		r.b = r.b[1+w:]
		v := int64(u) //nolint:gosec // two's complement of an unsigned value
		if r.signed {
			v = unzigzag(u)
		}
		for range n {
			dst = append(dst, v)
		}
		return dst, nil
	case 1: // direct: n values of w bits
		if len(r.b) < 2 {
			return nil, errCorrupt("direct run header", io.ErrUnexpectedEOF)
		}
		w, n := widths[h>>1&31], (int(h&1)<<8|int(r.b[1]))+1
		r.b = r.b[2:]
		start := len(dst)
		var err error
		if dst, err = r.unpack(dst, n, w); err != nil {
			return nil, err
		}
		if r.signed {
			for i := start; i < len(dst); i++ {
				dst[i] = unzigzag(uint64(dst[i])) //nolint:gosec // the bits as read
			}
		}
		return dst, nil
	case 2:
		return r.patchedBase(dst)
	}
	return r.delta(dst)
}

// unpack appends n big-endian values of w bits each, aligned to a byte at
// the end.
func (r *intReader) unpack(dst []int64, n, w int) ([]int64, error) {
	nbytes := (n*w + 7) / 8
	if nbytes > len(r.b) {
		return nil, errCorrupt(fmt.Sprintf("%d values of %d bits", n, w), io.ErrUnexpectedEOF)
	}
	b := r.b[:nbytes]
	r.b = r.b[nbytes:]
	var acc uint64 // bits not yet used, right-aligned
	have := 0
	for range n {
		var u uint64
		need := w
		for need > 0 {
			if have == 0 {
				acc, have = uint64(b[0]), 8
				b = b[1:]
			}
			take := min(need, have)
			u = u<<take | (acc>>(have-take))&(1<<take-1)
			have -= take
			need -= take
		}
		dst = append(dst, int64(u)) //nolint:gosec // the bits as read
	}
	return dst, nil
}

// patchedBase: values of w bits above a base, with a list of patches that
// set the high bits of a few of them.
func (r *intReader) patchedBase(dst []int64) ([]int64, error) {
	if len(r.b) < 4 {
		return nil, errCorrupt("patched base header", io.ErrUnexpectedEOF)
	}
	h := r.b
	w, n := widths[h[0]>>1&31], (int(h[0]&1)<<8|int(h[1]))+1
	bw, pw := int(h[2]>>5)+1, widths[h[2]&31]
	pgw, pll := int(h[3]>>5)+1, int(h[3]&31)
	r.b = r.b[4:]
	if len(r.b) < bw {
		return nil, errCorrupt("patched base", io.ErrUnexpectedEOF)
	}
	var ubase uint64
	for _, c := range r.b[:bw] {
		ubase = ubase<<8 | uint64(c)
	}
	r.b = r.b[bw:]
	// The base's most significant bit is its sign.
	sign := uint64(1) << (bw*8 - 1)
	base := int64(ubase &^ sign) //nolint:gosec // below 2^63
	if ubase&sign != 0 {
		base = -base
	}
	start := len(dst)
	var err error
	if dst, err = r.unpack(dst, n, w); err != nil {
		return nil, err
	}
	if pgw+pw > 64 {
		return nil, errCorrupt(fmt.Sprintf("patch of %d+%d bits", pgw, pw), nil)
	}
	patches, err := r.unpack(nil, pll, closestFixedBits(pgw+pw))
	if err != nil {
		return nil, err
	}
	i := start
	for _, p := range patches {
		u := uint64(p) //nolint:gosec // the bits as read
		gap, patch := int(u>>pw), u&(1<<pw-1)
		i += gap
		if patch == 0 && gap == 255 { // a gap longer than 255 is split
			continue
		}
		if i >= len(dst) || w+pw > 64 {
			return nil, errCorrupt("patch outside its run", nil)
		}
		dst[i] |= int64(patch << w) //nolint:gosec // the bits of the patched value
	}
	for j := start; j < len(dst); j++ {
		dst[j] += base
	}
	return dst, nil
}

// delta: a base and a first delta, then n-2 deltas of w bits with the first
// delta's sign (or none when w is 0: every delta is the first).
func (r *intReader) delta(dst []int64) ([]int64, error) {
	if len(r.b) < 2 {
		return nil, errCorrupt("delta run header", io.ErrUnexpectedEOF)
	}
	enc := int(r.b[0] >> 1 & 31)
	n := (int(r.b[0]&1)<<8 | int(r.b[1])) + 1
	r.b = r.b[2:]
	base, err := r.varint()
	if err != nil {
		return nil, err
	}
	u, k := binary.Uvarint(r.b)
	if k <= 0 {
		return nil, errCorrupt("delta base", io.ErrUnexpectedEOF)
	}
	r.b = r.b[k:]
	d := unzigzag(u)
	dst = append(dst, base)
	if n == 1 {
		return dst, nil
	}
	dst = append(dst, base+d)
	if enc == 0 {
		for range n - 2 {
			dst = append(dst, dst[len(dst)-1]+d)
		}
		return dst, nil
	}
	start := len(dst)
	if dst, err = r.unpack(dst, n-2, widths[enc]); err != nil {
		return nil, err
	}
	for i := start; i < len(dst); i++ {
		if d < 0 {
			dst[i] = dst[i-1] - dst[i]
		} else {
			dst[i] = dst[i-1] + dst[i]
		}
	}
	return dst, nil
}

package lancefile

import "encoding/binary"

// FastLanes bit-packing (Lance's bitpacking crate): 1024 values of a T-bit
// type in 1024/T lanes of T rows, each lane packing its rows' low W bits
// into W words of its own, the words of all lanes interleaved. A lane's
// rows are not its values in order: row r of lane l holds value
// flOrder[r/8]·16 + (r%8)·128 + l.

const blockValues = 1024

var flOrder = [8]int{0, 4, 2, 6, 1, 5, 3, 7}

// word reads the i-th T-bit little-endian word of b.
func word(b []byte, t, i int) uint64 {
	switch t {
	case 8:
		return uint64(b[i])
	case 16:
		return uint64(binary.LittleEndian.Uint16(b[2*i:]))
	case 32:
		return uint64(binary.LittleEndian.Uint32(b[4*i:]))
	default:
		return binary.LittleEndian.Uint64(b[8*i:])
	}
}

// packedBytes is the size of a block of 1024 T-bit values packed to w bits.
func packedBytes(w int) int { return w * blockValues / 8 }

// unpack unpacks one block of 1024 T-bit values packed to w bits (in
// packedBytes(w) bytes) into out.
func unpack(in []byte, t, w int, out *[blockValues]uint64) {
	if w == 0 {
		*out = [blockValues]uint64{}
		return
	}
	lanes := blockValues / t
	mask := uint64(1)<<uint(w) - 1
	if w == 64 {
		mask = ^uint64(0)
	}
	for lane := range lanes {
		for row := range t {
			bit := row * w
			k, sh := bit/t, bit%t
			v := word(in, t, k*lanes+lane) >> uint(sh)
			if sh+w > t {
				v |= word(in, t, (k+1)*lanes+lane) << uint(t-sh)
			}
			out[flOrder[row/8]*16+(row%8)*128+lane] = v & mask
		}
	}
}

// putWord appends v as a little-endian value of t bits.
func putWord(dst []byte, t int, v uint64) []byte {
	switch t {
	case 8:
		return append(dst, byte(v))
	case 16:
		return binary.LittleEndian.AppendUint16(dst, uint16(v)) //nolint:gosec // t bits
	case 32:
		return binary.LittleEndian.AppendUint32(dst, uint32(v)) //nolint:gosec // t bits
	default:
		return binary.LittleEndian.AppendUint64(dst, v)
	}
}

package lancefile

import (
	"encoding/binary"
	"errors"
	"testing"
)

// memSource reads a file held in memory.
type memSource []byte

func (m memSource) ReadAt(off, n uint64) ([]byte, error) {
	if off > uint64(len(m)) || n > uint64(len(m))-off {
		return nil, errors.New("past the end")
	}
	return m[off : off+n], nil
}

// FuzzFile feeds hostile bytes to the tail's parser and, where a tail
// parses, to every page's decoder: an error, never a panic or an
// unbounded allocation.
func FuzzFile(f *testing.F) {
	f.Add(footer(0, 0, 0, 0, 0, 2, 2))
	f.Add(append(make([]byte, 64), footer(0, 32, 16, 1, 0, 2, 1)...))
	f.Fuzz(fuzzFile)
}

// fuzzFile parses b as a Lance file and decodes each of its pages.
func fuzzFile(t *testing.T, b []byte) {
	size := int64(len(b))
	start, err := TailStart(b, size)
	if err != nil {
		return
	}
	if start < 0 || start > size {
		t.Fatalf("TailStart = %d of a file of %d bytes", start, size)
	}
	tail, err := ParseTail(b[start:], start, size)
	if err != nil {
		return
	}
	for c := range tail.Columns {
		for i := range tail.Columns[c].Pages {
			p := &tail.Columns[c].Pages[i]
			if p.Rows > 1<<16 {
				continue
			}
			switch {
			case p.Enc20 != nil && p.Enc20.Kind == List20:
				_, _, _, _ = p.ends20(memSource(b), p.Enc20.Indices, p.Enc20.NullAdjustment, 0, p.Rows)
			case p.Enc20 != nil:
				_, _ = p.decode20(memSource(b), p.Enc20, 0, p.Rows)
				if p.Rows > 2 {
					_, _ = p.decode20(memSource(b), p.Enc20, 1, p.Rows-1)
				}
			default:
				_, _ = p.decode(memSource(b), 0, p.Rows)
			}
		}
		if tail.Rows <= 1<<16 && !tail.Is20() { // each column read as a blob column's descriptors
			blob := &Node{Field: Field{Name: "b", Blob: true}}
			_, _ = tail.ReadBlobRefs(memSource(b), blob, Columns{0: c}, 0, tail.Rows)
		}
	}
}

// footer builds a 2.x footer.
func footer(metaStart, metaTable, globalTable uint64, globals, columns uint32, major, minor uint16) []byte {
	b := binary.LittleEndian.AppendUint64(nil, metaStart)
	b = binary.LittleEndian.AppendUint64(b, metaTable)
	b = binary.LittleEndian.AppendUint64(b, globalTable)
	b = binary.LittleEndian.AppendUint32(b, globals)
	b = binary.LittleEndian.AppendUint32(b, columns)
	b = binary.LittleEndian.AppendUint16(b, major)
	b = binary.LittleEndian.AppendUint16(b, minor)
	return append(b, "LANC"...)
}

// FuzzBitpacking checks unpack against a straightforward packer of the
// FastLanes layout, for every width and word size.
func FuzzBitpacking(f *testing.F) {
	f.Add(uint8(3), uint8(1), int64(7))
	f.Fuzz(func(t *testing.T, tsel, w uint8, seed int64) {
		tbits := []int{8, 16, 32, 64}[tsel%4]
		width := int(w) % (tbits + 1)
		var vals [blockValues]uint64
		x := uint64(seed)
		for i := range vals {
			x = x*6364136223846793005 + 1442695040888963407
			if width < 64 {
				vals[i] = x & (1<<uint(width) - 1)
			} else {
				vals[i] = x
			}
		}
		packed := pack(vals, tbits, width)
		var got [blockValues]uint64
		unpack(packed, tbits, width, &got)
		if got != vals {
			t.Fatalf("T=%d W=%d: unpack(pack(v)) != v", tbits, width)
		}
	})
}

// pack is the reference packer: lane l's rows in order, each row's value
// flOrder[r/8]·16 + (r%8)·128 + l, w bits after another in the lane's
// words.
func pack(vals [blockValues]uint64, t, w int) []byte {
	lanes := blockValues / t
	words := make([]uint64, w*lanes)
	for lane := range lanes {
		for row := range t {
			v := vals[flOrder[row/8]*16+(row%8)*128+lane]
			for bit := range w {
				pos := row*w + bit
				if v>>uint(bit)&1 == 1 {
					words[(pos/t)*lanes+lane] |= 1 << uint(pos%t)
				}
			}
		}
	}
	var out []byte
	for _, x := range words {
		out = putWord(out, t, x)
	}
	return out
}

func TestBitpackingEveryWidth(t *testing.T) {
	for _, tbits := range []int{8, 16, 32, 64} {
		for w := 0; w <= tbits; w++ {
			var vals [blockValues]uint64
			for i := range vals {
				v := uint64(i)*2654435761 + uint64(w)
				if w < 64 {
					v &= 1<<uint(w) - 1
				}
				vals[i] = v
			}
			var got [blockValues]uint64
			packed := pack(vals, tbits, w)
			if len(packed) != packedBytes(w) {
				t.Fatalf("T=%d W=%d: %d packed bytes, want %d", tbits, w, len(packed), packedBytes(w))
			}
			unpack(packed, tbits, w, &got)
			if got != vals {
				t.Fatalf("T=%d W=%d: unpack(pack(v)) != v", tbits, w)
			}
		}
	}
}

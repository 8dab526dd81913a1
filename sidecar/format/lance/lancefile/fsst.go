package lancefile

import "encoding/binary"

// FSST (Fast Static Symbol Table) strings: each code is a symbol of up to
// 8 bytes from the page's table, or 255 and one literal byte. The table
// (a buffer of fsstTableSize bytes) is a u64 header (the symbol count n in
// its low byte; "FSST" in its high 32 bits), n u64 symbols (their bytes in
// order from the low byte), then their n u8 lengths; bit 24 of the header
// off means the values were stored uncompressed.

const (
	fsstEscape    = 255
	fsstTableSize = 8 + 256*8 + 256
)

type fsstTable struct {
	n    int
	on   bool
	syms [256]uint64
	lens [256]uint8
}

func parseFsst(b []byte) (*fsstTable, error) {
	if len(b) < fsstTableSize {
		return nil, corrupt("an FSST symbol table of %d bytes", len(b))
	}
	h := binary.LittleEndian.Uint64(b)
	if h>>32 != 0x46535354 && h>>32 != 0x54535346 {
		return nil, corrupt("an FSST symbol table without its magic")
	}
	t := &fsstTable{n: int(h & 0xff), on: h&(1<<24) != 0}
	for i := range t.n {
		t.syms[i] = binary.LittleEndian.Uint64(b[8+8*i:])
		t.lens[i] = b[8+8*t.n+i]
		if t.lens[i] > 8 || t.lens[i] == 0 {
			return nil, corrupt("an FSST symbol of %d bytes", t.lens[i])
		}
	}
	return t, nil
}

// fsstDecode expands each compressed value of in.
func fsstDecode(table []byte, in block) (block, error) {
	if !in.variable() {
		return block{}, corrupt("FSST over fixed-width values")
	}
	if err := in.check(); err != nil {
		return block{}, err
	}
	t, err := parseFsst(table)
	if err != nil || !t.on {
		return in, err
	}
	out := block{n: in.n, offsets: make([]uint64, in.n+1), data: make([]byte, 0, 3*len(in.data))}
	for i := range in.n {
		v := in.value(i)
		for k := 0; k < len(v); k++ {
			c := v[k]
			if c == fsstEscape {
				if k++; k == len(v) {
					return block{}, corrupt("an FSST value ends in an escape")
				}
				out.data = append(out.data, v[k])
				continue
			}
			l := t.lens[c]
			if int(c) >= t.n {
				return block{}, corrupt("FSST code %d of a %d-symbol table", c, t.n)
			}
			s := t.syms[c]
			for j := range int(l) {
				out.data = append(out.data, byte(s>>(8*j)))
			}
		}
		if len(out.data) > MaxPageBytes {
			return block{}, corrupt("FSST values expand past %d bytes", MaxPageBytes)
		}
		out.offsets[i+1] = uint64(len(out.data))
	}
	return out, nil
}

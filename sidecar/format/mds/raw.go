package mds

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"

	"github.com/shardfeed/shardfeed/sidecar/format"
)

// An uncompressed MDS shard keeps every value of a numeric, fixed-shape
// ndarray, bytes or str column as the bytes Arrow would hold: the sidecar
// serves them from the cached file (mapped, not copied to its heap).

// RawShard implements format.RawReader: the columns of an uncompressed
// shard whose encodings store Arrow's bytes, after checking every sample's
// layout (and that str values are UTF-8) as decoding would.
func (r reader) RawShard(i int, parts [][]byte, columns []string) (format.RawShard, error) {
	e := &r.x.Shards[i]
	if e.Compression != nil && *e.Compression != "" {
		return nil, nil
	}
	sh, err := ReadShard(parts[0], e, columns)
	if err != nil {
		return nil, err
	}
	rs := &rawShard{s: sh}
	var utf8Cols []int
	for _, c := range sh.columns {
		if c.size < 0 {
			rs.header += 4
		}
	}
	for _, k := range sh.proj {
		c := sh.columns[k]
		if c.raw == notRaw {
			continue
		}
		rc := rawColumn{size: c.size, varIndex: -1}
		for _, b := range sh.columns[:k] {
			if b.size >= 0 {
				rc.fixedBefore += b.size
			} else {
				rc.varBefore++
			}
		}
		if c.size < 0 {
			rc.varIndex = rc.varBefore
		}
		rs.names = append(rs.names, c.name)
		rs.cols = append(rs.cols, rc)
		if c.raw == rawUTF8 {
			utf8Cols = append(utf8Cols, k)
		}
	}
	if len(rs.cols) == 0 {
		return nil, nil
	}
	// Check each sample as decoding would: a shard whose bytes do not
	// hold its values is refused here, not served.
	var buf [65]int
	for j := range sh.n {
		data := sh.sample(j)
		starts, err := sh.starts(data, j, buf[:0])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.RawData.Basename, err)
		}
		for _, k := range utf8Cols {
			if !utf8.Valid(data[starts[k]:starts[k+1]]) {
				return nil, fmt.Errorf("%s: sample %d: column %q: %s value is not UTF-8", e.RawData.Basename, j, sh.columns[k].name, sh.columns[k].encoding)
			}
		}
	}
	return rs, nil
}

// rawShard finds its columns' values in a shard's samples, each of which
// starts with the sizes of the variable-size columns (header bytes).
type rawShard struct {
	s      *Shard
	header int
	names  []string
	cols   []rawColumn
}

// rawColumn is a column's place in a sample: after the header, the
// fixed-size columns before it (fixedBefore bytes) and the variable-size
// ones (varBefore, whose sizes the header gives).
type rawColumn struct {
	fixedBefore, varBefore int
	// size of every value; -1: the header's entry varIndex says.
	size, varIndex int
}

func (r *rawShard) Columns() []string { return r.names }

// Row implements format.RawShard. The bytes were checked when the shard
// was opened; they are checked again here, bound by bound, since a mapped
// file can change under its reader.
func (r *rawShard) Row(row int, vals [][]byte) bool {
	s := r.s
	if row < 0 || row >= s.n || len(vals) < len(r.cols) {
		return false
	}
	lo := uint64(binary.LittleEndian.Uint32(s.offsets[4*row:]))
	hi := uint64(binary.LittleEndian.Uint32(s.offsets[4*row+4:]))
	if lo > hi || hi > uint64(len(s.raw)) {
		return false
	}
	data := s.raw[lo:hi]
	if r.header > len(data) {
		return false
	}
	// The prefix sums of the variable sizes, from the header.
	var sums [17]uint64
	prefix := sums[:0]
	if r.header <= 4*16 {
		prefix = append(prefix, 0)
		for k := 0; k < r.header; k += 4 {
			prefix = append(prefix, prefix[len(prefix)-1]+uint64(binary.LittleEndian.Uint32(data[k:])))
		}
	}
	for k, c := range r.cols {
		start := uint64(r.header + c.fixedBefore)
		if len(prefix) > 0 {
			start += prefix[c.varBefore]
		} else {
			for j := range c.varBefore {
				start += uint64(binary.LittleEndian.Uint32(data[4*j:]))
			}
		}
		size := uint64(c.size) //nolint:gosec // negative only when varIndex is used
		if c.varIndex >= 0 {
			size = uint64(binary.LittleEndian.Uint32(data[4*c.varIndex:]))
		}
		if start+size > uint64(len(data)) {
			return false
		}
		vals[k] = data[start : start+size]
	}
	return true
}

package lancefile

import (
	"encoding/binary"
	"fmt"
)

// Blob columns keep only a descriptor of each value in their pages; the
// bytes lie elsewhere:
//
//	blob v1 (file version 2.1): a blob page (BlobLayout) around a
//	  mini-block page of PackedStruct[u64 position, u64 size]: the value
//	  is bytes [position, +size) of the data file itself. Size 0 and a
//	  position other than 0 is a null.
//	blob v2 (2.2, the lance.blob.v2 extension): a full-zip page of
//	  VariablePackedStruct[u8 kind, u64 position, u64 size, u32 blob id,
//	  u32-length-prefixed uri], nulls in its control words. Kind 0
//	  (inline): bytes of the data file; 1 (packed) and 2 (dedicated):
//	  bytes of the data file's blob file of that id,
//	  data/{data file's stem}/{id in 32 binary digits, least significant
//	  first}.blob; 3 (external): bytes of a URI outside the dataset.

// blobKind says where a blob's bytes lie.
type blobKind uint8

// The kinds of blob v2 descriptors (v1's are all blobInline).
const (
	blobInline blobKind = iota
	blobPacked
	blobDedicated
	blobExternal
)

// MaxBlobBytes bounds one blob value.
const MaxBlobBytes = 1 << 30

// BlobRef is a blob column's descriptor of one row.
type BlobRef struct {
	Null bool
	// Position and Size are the bytes' in the data file or, InBlobFile,
	// in the data file's blob file of ID.
	Position, Size uint64
	InBlobFile     bool
	ID             uint32
	// External: the descriptor names a URI (kind 3), not its bytes.
	External bool
}

// ReadBlobRefs decodes the descriptors of rows [from, to) of a blob
// column.
func (t *Tail) ReadBlobRefs(src Source, n *Node, cols Columns, from, to uint64) ([]BlobRef, error) {
	if !n.Blob {
		return nil, fmt.Errorf("column %q is not a blob column", n.Name)
	}
	if from > to || to > t.Rows {
		return nil, corrupt("rows [%d, %d) of a file of %d", from, to, t.Rows)
	}
	if t.Is20() {
		return nil, fmt.Errorf("%w: column %q: a blob column in a 2.0 file", ErrUnsupported, n.Name)
	}
	lf, err := t.readLeaf(src, n, cols, from, to)
	if err != nil {
		return nil, err
	}
	rows := int(to - from) //nolint:gosec // bounded by the file's rows
	out := make([]BlobRef, rows)
	if lf.vals.allNull {
		for i := range out {
			out[i].Null = true
		}
		return out, nil
	}
	if lf.vals.n != rows || lf.def != nil && len(lf.def) != rows {
		return nil, corrupt("column %q: %d blob descriptors for %d rows", n.Name, lf.vals.n, rows)
	}
	for i := range out {
		if lf.def != nil && lf.def[i] != defValid {
			out[i].Null = true
			continue
		}
		if out[i], err = blobRef(lf.vals, i); err != nil {
			return nil, fmt.Errorf("column %q, row %d: %w", n.Name, from+uint64(i), err) //nolint:gosec // i < rows
		}
		if out[i].Size > MaxBlobBytes {
			return nil, fmt.Errorf("%w: column %q, row %d: a blob of %d bytes, more than the %d shardfeed serves as one value", ErrUnsupported, n.Name, from+uint64(i), out[i].Size, MaxBlobBytes) //nolint:gosec // i < rows
		}
	}
	return out, nil
}

// blobRef reads descriptor i: v1's 16 bytes, or v2's packed row.
func blobRef(b block, i int) (BlobRef, error) {
	le := binary.LittleEndian
	if !b.variable() {
		if b.bits != 128 {
			return BlobRef{}, corrupt("blob descriptors of %d bits", b.bits)
		}
		d := b.fixed[16*i : 16*i+16]
		pos, size := le.Uint64(d), le.Uint64(d[8:])
		return BlobRef{Null: size == 0 && pos != 0, Position: pos, Size: size}, nil
	}
	d := b.value(i)
	if len(d) < 25 {
		return BlobRef{}, corrupt("a blob descriptor of %d bytes", len(d))
	}
	r := BlobRef{Position: le.Uint64(d[1:]), Size: le.Uint64(d[9:]), ID: le.Uint32(d[17:])}
	if uriLen := le.Uint32(d[21:]); uint64(uriLen) != uint64(len(d)-25) {
		return BlobRef{}, corrupt("a blob descriptor's uri of %d bytes in %d", uriLen, len(d)-25)
	}
	switch kind := blobKind(d[0]); kind {
	case blobInline:
	case blobPacked, blobDedicated:
		r.InBlobFile = true
	case blobExternal:
		r.External = true
	default:
		return BlobRef{}, fmt.Errorf("%w: a blob descriptor of kind %d (written by a newer Lance)", ErrUnsupported, kind)
	}
	return r, nil
}

// BlobFileName is the name of a data file's blob file of an id, in the
// directory named after the data file: 32 binary digits, least
// significant first.
func BlobFileName(id uint32) string {
	var b [32]byte
	for i := range b {
		b[i] = '0' + byte(id>>i&1)
	}
	return string(b[:]) + ".blob"
}

// blobDescriptors checks a blob page's descriptor encoding: v1's
// PackedStruct of two u64s, v2's VariablePackedStruct of u8, u64, u64,
// u32 and a u32-length-prefixed string, every field stored plain.
func blobDescriptors(e *Encoding) error {
	switch e.Kind {
	case PackedStruct:
		if len(e.Widths) != 2 || e.Widths[0] != 64 || e.Widths[1] != 64 || e.Child == nil || e.Child.Kind != Flat || e.Child.Bits != 128 || e.Child.Scheme != 0 {
			return fmt.Errorf("%w: blob descriptors encoded %s %v, not two plain u64s", ErrUnsupported, e, e.Widths)
		}
		return nil
	case VariablePackedStruct:
		want := []uint64{8, 64, 64, 32}
		if len(e.Fields) != 5 {
			return fmt.Errorf("%w: blob descriptors of %d fields, not 5", ErrUnsupported, len(e.Fields))
		}
		for k, f := range e.Fields {
			v := f.Value
			plain := v != nil && v.Scheme == 0
			if k < 4 {
				plain = plain && v.Kind == Flat && v.Bits == want[k] && f.Bits == want[k] && f.LengthBits == 0
			} else {
				plain = plain && v.Kind == Variable && v.Child != nil && v.Child.Kind == Flat && v.Child.Bits == 32 && v.Child.Scheme == 0 && f.LengthBits == 32 && f.Bits == 0
			}
			if !plain {
				return fmt.Errorf("%w: blob descriptor field %d encoded %s (%d bits, length %d bits), not stored plain", ErrUnsupported, k, v, f.Bits, f.LengthBits)
			}
		}
		return nil
	}
	return fmt.Errorf("%w: blob descriptors encoded %s", ErrUnsupported, e)
}

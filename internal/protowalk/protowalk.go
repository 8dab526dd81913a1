// Package protowalk decodes protobuf messages field by field, for the
// readers of file formats whose metadata is protobuf (ORC, Lance): each
// reads only the fields it needs and skips the others, with no generated
// code and nothing allocated for fields it does not keep.
package protowalk

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// ErrMalformed is the error of bytes that are not a protobuf message.
var ErrMalformed = errors.New("malformed protobuf")

// Fields calls fn for each field of msg in order: its number, wire type
// and value (a varint or fixed integer in v, or the bytes of a
// length-delimited field in b). Groups are skipped.
func Fields(msg []byte, fn func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return fmt.Errorf("%w: tag: %w", ErrMalformed, protowire.ParseError(n))
		}
		msg = msg[n:]
		var (
			v uint64
			b []byte
		)
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(msg)
		case protowire.BytesType:
			b, n = protowire.ConsumeBytes(msg)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(msg)
		case protowire.Fixed32Type:
			var v32 uint32
			v32, n = protowire.ConsumeFixed32(msg)
			v = uint64(v32)
		default:
			n = protowire.ConsumeFieldValue(num, typ, msg)
		}
		if n < 0 {
			return fmt.Errorf("%w: field %d: %w", ErrMalformed, num, protowire.ParseError(n))
		}
		msg = msg[n:]
		if err := fn(num, typ, v, b); err != nil {
			return err
		}
	}
	return nil
}

// Uints appends the values of a repeated integer field, packed or not.
func Uints(dst []uint64, typ protowire.Type, v uint64, b []byte) ([]uint64, error) {
	if typ != protowire.BytesType {
		return append(dst, v), nil
	}
	for len(b) > 0 {
		x, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return nil, fmt.Errorf("%w: packed varints: %w", ErrMalformed, protowire.ParseError(n))
		}
		dst, b = append(dst, x), b[n:]
	}
	return dst, nil
}

// Message returns b, the bytes of a length-delimited field, checking that
// the field has that wire type.
func Message(num protowire.Number, typ protowire.Type, b []byte) ([]byte, error) {
	if typ != protowire.BytesType {
		return nil, fmt.Errorf("%w: field %d is not a message (wire type %d)", ErrMalformed, num, typ)
	}
	return b, nil
}

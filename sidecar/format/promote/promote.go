// Package promote decides whether the columns of two streams, which may be
// stored in different formats, can be served as one Arrow type, and which
// (docs/formats.md, "Promotions between formats").
package promote

import "github.com/apache/arrow-go/v18/arrow"

// Types returns the type both a and b are served as, and false when no
// promotion joins them. The rules, and nothing else: large and small
// offsets are the same (utf8, binary, list); a narrower integer joins int64
// and a narrower float joins float64 (uint64 never joins a signed type); a
// fixed-size list joins a list of the same element type; lists, fixed-size
// lists of one length and structs with the same field names join element by
// element.
func Types(a, b arrow.DataType) (arrow.DataType, bool) {
	a, b = normal(a), normal(b)
	if arrow.TypeEqual(a, b) {
		return a, true
	}
	switch {
	case isInt(a) && b.ID() == arrow.INT64 && a.ID() != arrow.UINT64:
		return b, true
	case isInt(b) && a.ID() == arrow.INT64 && b.ID() != arrow.UINT64:
		return a, true
	case isFloat(a) && b.ID() == arrow.FLOAT64:
		return b, true
	case isFloat(b) && a.ID() == arrow.FLOAT64:
		return a, true
	}
	la, aList := a.(arrow.ListLikeType)
	lb, bList := b.(arrow.ListLikeType)
	if aList && bList && a.ID() != arrow.MAP && b.ID() != arrow.MAP {
		elem, ok := Types(la.Elem(), lb.Elem())
		if !ok {
			return nil, false
		}
		fa, aFixed := a.(*arrow.FixedSizeListType)
		fb, bFixed := b.(*arrow.FixedSizeListType)
		if aFixed && bFixed && fa.Len() == fb.Len() {
			return arrow.FixedSizeListOf(fa.Len(), elem), true
		}
		return arrow.ListOf(elem), true
	}
	sa, aStruct := a.(*arrow.StructType)
	sb, bStruct := b.(*arrow.StructType)
	if aStruct && bStruct && sa.NumFields() == sb.NumFields() {
		fields := make([]arrow.Field, sa.NumFields())
		for i := range fields {
			x, y := sa.Field(i), sb.Field(i)
			if x.Name != y.Name {
				return nil, false
			}
			t, ok := Types(x.Type, y.Type)
			if !ok {
				return nil, false
			}
			fields[i] = arrow.Field{Name: x.Name, Type: t, Nullable: x.Nullable || y.Nullable}
		}
		return arrow.StructOf(fields...), true
	}
	return nil, false
}

// normal maps large-offset types to their small-offset twins.
func normal(t arrow.DataType) arrow.DataType {
	switch tt := t.(type) {
	case *arrow.LargeStringType:
		return arrow.BinaryTypes.String
	case *arrow.LargeBinaryType:
		return arrow.BinaryTypes.Binary
	case *arrow.LargeListType:
		return arrow.ListOf(normal(tt.Elem()))
	}
	return t
}

func isInt(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return true
	}
	return false
}

func isFloat(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64:
		return true
	}
	return false
}

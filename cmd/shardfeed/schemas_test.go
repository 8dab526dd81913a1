package main

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// What plan --summary says a column arrives as is what the Python client
// makes of it (test/python checks the client; this, the table).
func TestDeliveredSaysWhatTheClientMakesOfAColumn(t *testing.T) {
	for _, tt := range []struct {
		t    arrow.DataType
		want string
	}{
		{arrow.PrimitiveTypes.Float32, "tensor float32 [rows] (a null: NaN, or fill_null)"},
		{arrow.PrimitiveTypes.Uint16, "tensor uint16 [rows] (a null: 0, or fill_null)"},
		{arrow.FixedWidthTypes.Boolean, "tensor bool [rows] (a null: False, or fill_null)"},
		{arrow.FixedSizeListOf(3, arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int16)), "tensor int16 [rows, 3, 2] (a null: filled, or fill_null)"},
		{arrow.BinaryTypes.String, "list of str (a null: None)"},
		{arrow.BinaryTypes.Binary, "list of bytes (a null: None)"},
		{arrow.ListOf(arrow.PrimitiveTypes.Int64), "list of arrays, one per row (variable length)"},
		{arrow.StructOf(arrow.Field{Name: "k", Type: arrow.PrimitiveTypes.Int64}), "list of Python values"},
	} {
		if got := delivered(tt.t); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.t, got, tt.want)
		}
	}
}

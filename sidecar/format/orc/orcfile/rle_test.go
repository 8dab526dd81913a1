package orcfile

import (
	"errors"
	"slices"
	"testing"
)

// The examples of the ORC specification's run-length encodings.
func TestRunLengthEncodingsDecodeTheSpecificationsExamples(t *testing.T) {
	tests := []struct {
		name   string
		v2     bool
		signed bool
		in     []byte
		want   []int64
	}{
		{"v2 short repeat", true, false, []byte{0x0a, 0x27, 0x10}, []int64{10000, 10000, 10000, 10000, 10000}},
		{"v2 direct", true, false, []byte{0x5e, 0x03, 0x5c, 0xa1, 0xab, 0x1e, 0xde, 0xad, 0xbe, 0xef}, []int64{23713, 43806, 57005, 48879}},
		{"v2 patched base", true, false, []byte{0x8e, 0x13, 0x2b, 0x21, 0x07, 0xd0, 0x1e, 0x00, 0x14, 0x70, 0x28, 0x32, 0x3c, 0x46, 0x50, 0x5a,
			0x64, 0x6e, 0x78, 0x82, 0x8c, 0x96, 0xa0, 0xaa, 0xb4, 0xbe, 0xfc, 0xe8},
			[]int64{2030, 2000, 2020, 1000000, 2040, 2050, 2060, 2070, 2080, 2090, 2100, 2110, 2120, 2130, 2140, 2150, 2160, 2170, 2180, 2190}},
		{"v2 delta", true, false, []byte{0xc6, 0x09, 0x02, 0x02, 0x22, 0x42, 0x42, 0x46}, []int64{2, 3, 5, 7, 11, 13, 17, 19, 23, 29}},
		{"v2 signed short repeat", true, true, []byte{0x02, 0x03}, []int64{-2, -2, -2}},
		{"v1 run", false, false, []byte{0x61, 0x00, 0x07}, slices.Repeat([]int64{7}, 100)},
		{"v1 run with a delta", false, false, []byte{0x02, 0xff, 0x0a}, []int64{10, 9, 8, 7, 6}},
		{"v1 literals", false, false, []byte{0xfb, 0x02, 0x03, 0x06, 0x07, 0x0b}, []int64{2, 3, 6, 7, 11}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &intReader{b: tt.in, v2: tt.v2, signed: tt.signed}
			got, err := r.read(nil, len(tt.want))
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("read = %v, %v; want %v", got, err, tt.want)
			}
			if len(r.b) != 0 {
				t.Errorf("%d bytes left over", len(r.b))
			}
		})
	}
}

func TestByteAndBooleanRunLengths(t *testing.T) {
	got, err := byteRLE(nil, []byte{0x61, 0x00, 0xfe, 0x44, 0x45}, 102)
	if err != nil || len(got) != 102 || got[99] != 0 || got[100] != 0x44 || got[101] != 0x45 {
		t.Fatalf("byteRLE = %v, %v", got, err)
	}
	bools, err := booleans([]byte{0xfe, 0x80, 0x00}, 9) // a literal of two bytes: 1000 0000, 0000 0000
	if err != nil || !slices.Equal(bools, []bool{true, false, false, false, false, false, false, false, false}) {
		t.Fatalf("booleans = %v, %v", bools, err)
	}
}

// A stream that ends before the values the stripe counts is an error,
// whatever the run it is in.
func TestShortStreamsAreCorrupt(t *testing.T) {
	for _, in := range [][]byte{{}, {0x0a, 0x27}, {0x5e, 0x03, 0x5c}, {0x8e, 0x13, 0x2b}, {0xc6, 0x09}, {0xc6, 0x09, 0x02, 0x02, 0x22}} {
		r := &intReader{b: in, v2: true}
		if _, err := r.read(nil, 20); !errors.Is(err, ErrCorrupt) {
			t.Errorf("% x: %v, want ErrCorrupt", in, err)
		}
	}
	if _, err := byteRLE(nil, []byte{0xfe, 0x44}, 2); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a short byte literal: %v", err)
	}
}

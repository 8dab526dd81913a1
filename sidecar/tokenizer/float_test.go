package tokenizer

import (
	"encoding/json"
	"strconv"
	"testing"
)

// serdeFloat parses as serde_json does by default, which (for 17 digits
// and more) rounds twice and can land a unit off the nearest float64:
// these are scores of a Unigram vocabulary tokenizers trained, where that
// unit changed a segmentation.
func TestSerdeFloat(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"-2.6668636002596386", "-2.666863600259638"},
		{"-9.118388128734585", "-9.118388128734583"},
		{"-3.110650988344144", "-3.110650988344144"},
		{"0", "0"},
		{"-0.0", "-0"},
		{"12", "12"},
		{"1e3", "1000"},
		{"1.5E-2", "0.015"},
		{"-1e-320", "-1e-320"},
	} {
		got, err := serdeFloat(json.Number(c.in))
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if s := strconv.FormatFloat(got, 'g', -1, 64); s != c.want {
			t.Errorf("serdeFloat(%s) = %s, want %s", c.in, s, c.want)
		}
	}
	// Past what a u64 holds serde_json drops the digits: what tokenizers
	// 0.23.3 read these as (a Unigram score, written back by to_str).
	for _, c := range []struct{ in, want string }{
		{"-0.00001993219279999999964", "-1.9932192800000003e-05"},
		{"-9.9660964e-06", "-9.9660964e-06"},
		{"123456789012345678901234", "1.2345678901234567e+23"},
		{"18446744073709551615", "1.8446744073709552e+19"},
		{"18446744073709551616", "1.8446744073709552e+19"},
		{"-184467440737095516159.5", "-1.844674407370955e+20"},
		{"0.1844674407370955161599", "0.1844674407370955"},
		{"-2.66686360025963861234567", "-2.6668636002596386"},
		{"1.00000000000000000000000001", "1.0"},
		{"-0.000000000000000000000000000001234567890123456789", "-1.2345678901234567e-30"},
		{"99999999999999999999e-20", "1.0"},
		{"-3.14159265358979323846264338327950288", "-3.141592653589793"},
	} {
		got, err := serdeFloat(json.Number(c.in))
		want, _ := strconv.ParseFloat(c.want, 64)
		if err != nil || got != want {
			t.Errorf("serdeFloat(%s) = %v (%v), tokenizers reads %s", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "-", "1.2.3", "1e", "1x", "1e999"} {
		if _, err := serdeFloat(json.Number(bad)); err == nil {
			t.Errorf("serdeFloat(%q) parsed", bad)
		}
	}
}

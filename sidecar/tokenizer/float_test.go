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
	// Past 19 digits (no score has them) strconv's nearest float64.
	if got, _ := serdeFloat("123456789012345678901234"); got != 123456789012345678901234 {
		t.Errorf("serdeFloat of 24 digits = %g", got)
	}
	for _, bad := range []string{"", "-", "1.2.3", "1e", "1x", "1e999"} {
		if _, err := serdeFloat(json.Number(bad)); err == nil {
			t.Errorf("serdeFloat(%q) parsed", bad)
		}
	}
}

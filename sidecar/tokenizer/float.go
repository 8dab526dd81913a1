package tokenizer

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// pow10 are 1e0 … 1e308, each the float64 nearest it.
var pow10 = func() [309]float64 {
	var out [309]float64
	for i := range out {
		out[i], _ = strconv.ParseFloat("1e"+strconv.Itoa(i), 64)
	}
	return out
}()

// serdeFloat parses a JSON number as tokenizers does (serde_json's
// default parser): the digits as an integer, made a float64, then one
// multiplication or division by a power of ten. It can differ from the
// float64 nearest the number by a unit in the last place, and a
// Unigram model's best segmentation of a long run (many paths of nearly
// equal scores) can turn on that unit: scores are parsed as tokenizers
// parses them, not as Go's strconv would.
func serdeFloat(n json.Number) (float64, error) {
	s := string(n)
	neg := false
	if s != "" && s[0] == '-' {
		neg, s = true, s[1:]
	}
	// The significand takes digits while it fits a u64; past that,
	// serde_json drops the digits (an integer's raise the exponent).
	var sig uint64
	full := false
	exp, digits, i := 0, 0, 0
	take := func(d uint64) bool {
		if full || sig > (math.MaxUint64-d)/10 {
			full = true
			return false
		}
		sig = sig*10 + d
		return true
	}
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		digits++
		if !take(uint64(s[i] - '0')) {
			exp++
		}
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			digits++
			if take(uint64(s[i] - '0')) {
				exp--
			}
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil {
			return 0, fmt.Errorf("the number %q", string(n))
		}
		exp += e
		i = len(s)
	}
	if i != len(s) || digits == 0 {
		return 0, fmt.Errorf("the number %q", string(n))
	}
	f := float64(sig)
	for {
		if exp >= 0 && exp < len(pow10) {
			f *= pow10[exp]
			break
		}
		if exp < 0 && -exp < len(pow10) {
			f /= pow10[-exp]
			break
		}
		if f == 0 || exp > 0 {
			if exp > 0 {
				return 0, fmt.Errorf("the number %q is out of range", string(n))
			}
			break
		}
		f /= 1e308
		exp += 308
	}
	if neg {
		f = -f
	}
	return f, nil
}

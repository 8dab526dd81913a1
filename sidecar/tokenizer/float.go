package tokenizer

import (
	"encoding/json"
	"fmt"
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
	var sig uint64
	exp, digits, i := 0, 0, 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		sig, digits = sig*10+uint64(s[i]-'0'), digits+1
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			sig, digits, exp = sig*10+uint64(s[i]-'0'), digits+1, exp-1
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
	if digits > 19 { // past a u64 serde_json takes another path; so does this
		return strconv.ParseFloat(string(n), 64)
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

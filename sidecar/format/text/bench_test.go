package text

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// BenchmarkDecodeJSONL decodes token samples (2048 integers per line).
func BenchmarkDecodeJSONL(b *testing.B) {
	var sb strings.Builder
	toks := make([]string, 2048)
	for i := range toks {
		toks[i] = fmt.Sprint(i * 7919 % 50257)
	}
	line := `{"id": %d, "tokens": [` + strings.Join(toks, ",") + "]}\n"
	for i := range 256 {
		fmt.Fprintf(&sb, line, i)
	}
	data := []byte(sb.String())
	fields, _, err := Scan(bytes.NewReader(data), JSONL, 1<<30, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		recs, err := Decode(data, JSONL, fields, nil)
		if err != nil {
			b.Fatal(err)
		}
		release(recs)
	}
	b.ReportMetric(float64(256*b.N)/b.Elapsed().Seconds(), "samples/s")
}

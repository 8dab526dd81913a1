package jobrecords

import (
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/index/indexparts"
)

// FuzzParseRecords reads arbitrary bytes as the records a run's pods
// leave for the operator: never out of bounds, never unprintable.
func FuzzParseRecords(f *testing.F) {
	f.Add([]byte(`{"run":"0123456789abcdef","objects":10,"bytes":100,"parts":2}`), 0)
	f.Add([]byte(`{"run":"0123456789abcdef","part":1,"objects":10,"bytes":100,"objectsDone":4,"bytesDone":40}`), 1)
	f.Add([]byte(`{"step":"part","part":1,"run":"0123456789abcdef","time":"2026-01-01T00:00:00Z","error":"x"}`), 2)
	const run = "0123456789abcdef"
	f.Fuzz(func(t *testing.T, data []byte, which int) {
		switch which % 3 {
		case 0:
			if l, err := ParseListed(data); err == nil && (l.Parts < 1 && !l.Unchanged || l.Objects < 0 || l.Bytes < 0 || l.Unchanged && l.Run != "") {
				t.Fatalf("a named run out of bounds was read: %+v", l)
			}
		case 1:
			if p, err := ParseProgress(data, run, 1); err == nil && (p.ObjectsDone > p.Objects || p.BytesDone > p.Bytes || p.Part != 1) {
				t.Fatalf("a progress out of bounds was read: %+v", p)
			}
		default:
			if f, err := ParseFailure(data); err == nil && (len(f.Error) > MaxFailureText || strings.ContainsAny(f.Error, "\n\x1b\x00")) {
				t.Fatalf("a failure's error was read unbounded or unprintable: %q", f.Error)
			}
		}
	})
}

func TestNamedRunsAndProgressAreReadStrictly(t *testing.T) {
	run := "0123456789abcdef"
	for _, tc := range []struct {
		name, data string
		progress   bool
		ok         bool
	}{
		{name: "listed", data: `{"run":"` + run + `","objects":10,"bytes":100,"parts":2}`, ok: true},
		{name: "unchanged", data: `{"run":"","objects":10,"bytes":100,"parts":0,"unchanged":true}`, ok: true},
		{name: "unchanged with a run", data: `{"run":"` + run + `","objects":10,"bytes":100,"parts":2,"unchanged":true}`},
		{name: "listed, no parts", data: `{"run":"` + run + `","objects":10,"bytes":100,"parts":0}`},
		{name: "listed, too many parts", data: `{"run":"` + run + `","objects":10,"bytes":100,"parts":100001}`},
		{name: "listed, negative", data: `{"run":"` + run + `","objects":-1,"bytes":100,"parts":2}`},
		{name: "listed, bad run", data: `{"run":"../x","objects":1,"bytes":1,"parts":2}`},
		{name: "listed, unknown field", data: `{"run":"` + run + `","objects":1,"bytes":1,"parts":2,"x":1}`},
		{name: "progress", progress: true, data: `{"run":"` + run + `","part":1,"objects":10,"bytes":100,"objectsDone":4,"bytesDone":40}`, ok: true},
		{name: "progress of another part", progress: true, data: `{"run":"` + run + `","part":2,"objects":10,"bytes":100,"objectsDone":4,"bytesDone":40}`},
		{name: "progress past its objects", progress: true, data: `{"run":"` + run + `","part":1,"objects":10,"bytes":100,"objectsDone":11,"bytesDone":40}`},
		{name: "progress past its bytes", progress: true, data: `{"run":"` + run + `","part":1,"objects":10,"bytes":100,"objectsDone":1,"bytesDone":101}`},
		{name: "progress too large", progress: true, data: `{"run":"` + run + `","part":1,"objects":10,"bytes":100,"objectsDone":1,"bytesDone":1}` + strings.Repeat(" ", indexparts.MaxRecordBytes)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.progress {
				_, err = ParseProgress([]byte(tc.data), run, 1)
			} else {
				_, err = ParseListed([]byte(tc.data))
			}
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok = %v", err, tc.ok)
			}
		})
	}
	for name, ok := range map[string]bool{"ns.ds-0123-index-list": true, "a": true, "": false, "A": false, "a/b": false, "-a": false, "a.": false, strings.Repeat("a", 201): false} {
		if err := CheckName(name); (err == nil) != ok {
			t.Errorf("CheckName(%q) = %v, want ok = %v", name, err, ok)
		}
	}
}

func TestAFailuresErrorIsOneBoundedPrintableLine(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"plain", "s3://b/x.parquet is 10 bytes", "s3://b/x.parquet is 10 bytes"},
		{"lines and escapes", "a\nb\x1b[31mc\x00", "a b[31mc"},
		{"long", strings.Repeat("é", MaxFailureText), strings.Repeat("é", (MaxFailureText-len("…"))/2) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FailureText(tc.in); got != tc.want || len(got) > MaxFailureText {
				t.Errorf("FailureText = %.60q (%d bytes), want %.60q", got, len(got), tc.want)
			}
		})
	}
	for _, bad := range []string{`{"step":"rm","part":0,"time":"2026-01-01T00:00:00Z","error":"x"}`, `{"step":"part","part":-1,"time":"2026-01-01T00:00:00Z","error":"x"}`,
		`{"step":"part","part":1,"run":"../x","time":"2026-01-01T00:00:00Z","error":"x"}`} {
		if _, err := ParseFailure([]byte(bad)); err == nil {
			t.Errorf("ParseFailure(%s) read it", bad)
		}
	}
}

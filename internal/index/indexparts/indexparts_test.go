package indexparts

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
)

func objects(sizes ...int64) []store.Object {
	out := make([]store.Object, len(sizes))
	for i, s := range sizes {
		out[i] = store.Object{Key: fmt.Sprintf("o-%04d", i), Size: s}
	}
	return out
}

func TestPlanCutsContiguousBalancedDeterministicParts(t *testing.T) {
	cases := []struct {
		name  string
		sizes []int64
		n     int
		want  []int // objects per part
	}{
		{"no object", nil, 3, []int{0, 0, 0}},
		{"one object", []int64{10}, 1, []int{1}},
		{"more parts than objects", []int64{5, 7}, 4, []int{1, 1, 0, 0}},
		{"equal sizes", []int64{1, 1, 1, 1, 1, 1}, 3, []int{2, 2, 2}},
		{"one large object alone", []int64{1000, 1, 1, 1, 1, 1}, 2, []int{1, 5}},
		{"every part an object", []int64{1, 1, 1, 1000}, 4, []int{1, 1, 1, 1}},
		{"zero sizes by count", []int64{0, 0, 0, 0}, 2, []int{2, 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs := objects(c.sizes...)
			got := Plan(objs, c.n)
			if again := Plan(objs, c.n); !reflect.DeepEqual(got, again) {
				t.Fatal("two plans of the same objects differ")
			}
			var counts []int
			next := 0
			for _, s := range got {
				if s.First != next {
					t.Fatalf("part starts at %d, want %d: %+v", s.First, next, got)
				}
				next += s.Objects
				counts = append(counts, s.Objects)
			}
			if next != len(objs) || !reflect.DeepEqual(counts, c.want) {
				t.Fatalf("parts of %v objects, want %v: %+v", counts, c.want, got)
			}
		})
	}
}

func TestPlanBalancesManyObjectsWithinTheLargest(t *testing.T) {
	var sizes []int64
	for i := range 10_000 {
		sizes = append(sizes, int64(i%97)*1000+int64(i%13))
	}
	objs := objects(sizes...)
	for _, n := range []int{2, 7, 64} {
		spans := Plan(objs, n)
		var total, largestObj int64
		for _, o := range objs {
			total += o.Size
			largestObj = max(largestObj, o.Size)
		}
		mean := total / int64(len(objs))
		for k, s := range spans {
			weight := s.Bytes + int64(s.Objects)*mean
			ideal := (total + int64(len(objs))*mean) / int64(n)
			if d := weight - ideal; d > largestObj+mean || -d > largestObj+mean {
				t.Fatalf("%d parts: part %d weighs %d, ideal %d", n, k, weight, ideal)
			}
		}
	}
}

// manifestOf is a run of objs in n parts, and its object lists.
func manifestOf(objs []store.Object, n int) (*Manifest, [][]byte) {
	l := &indexfile.Listing{Objects: len(objs), Digest: "sha256:00"}
	m := &Manifest{Version: Version, Run: RunID("opts", l, n), Format: "jsonl", Options: "opts", Listing: *l, Objects: len(objs),
		Head: []Object{ObjectOf(objs[0])}, Parts: Plan(objs, n)}
	var lists [][]byte
	for _, s := range m.Parts {
		data := EncodeObjects(objs[s.First : s.First+s.Objects])
		lists = append(lists, data)
		m.Digests = append(m.Digests, Digest(data))
		m.Bytes += s.Bytes
	}
	return m, lists
}

func TestAManifestAndItsObjectListsReadBackAndRefuseTampering(t *testing.T) {
	objs := objects(3, 1, 4, 1, 5)
	m, lists := manifestOf(objs, 2)
	data, err := jsonOf(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseManifest(data)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("manifest read back: %v\n%+v\n%+v", err, got, m)
	}
	back, err := ParseObjects(lists[1], got, 1)
	if err != nil || !reflect.DeepEqual(back, objs[m.Parts[0].Objects:]) {
		t.Fatalf("part 1's objects: %v %v", back, err)
	}
	if _, err := ParseObjects(lists[0], got, 1); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("part 0's list as part 1's: %v", err)
	}
	bad := *m
	bad.Parts = append([]Span(nil), m.Parts...)
	bad.Parts[1].First++
	if data, _ := jsonOf(&bad); true {
		if _, err := ParseManifest(data); err == nil {
			t.Fatal("a manifest whose parts overlap was read")
		}
	}
	if _, err := ParseRecord([]byte(`{"run":"`+m.Run+`","part":1,"shards":0}`), m.Run, 2); err == nil {
		t.Fatal("part 1's record read as part 2's")
	}
}

// FuzzParseRun reads arbitrary bytes as what the pods of a run write
// (a manifest, a part's object list, its record, the run pointer): no
// panic, and what reads back is checked.
func FuzzParseRun(f *testing.F) {
	m, lists := manifestOf(objects(3, 1, 4, 1, 5), 2)
	data, _ := jsonOf(m)
	f.Add(data, 0)
	f.Add(lists[0], 1)
	f.Add([]byte(`{"run":"`+m.Run+`","part":1,"shards":2,"sha256":"`+strings.Repeat("a", 64)+`"}`), 2)
	f.Add([]byte(`{"run":"`+m.Run+`"}`), 3)
	f.Fuzz(func(t *testing.T, data []byte, which int) {
		switch which % 7 {
		case 0:
			if got, err := ParseManifest(data); err == nil {
				if err := got.check(); err != nil {
					t.Fatal(err)
				}
			}
		case 1:
			// The fuzzed list as part 0's, its digest the manifest's.
			mm := *m
			mm.Digests = append([]string{Digest(data)}, m.Digests[1:]...)
			if objs, err := ParseObjects(data, &mm, 0); err == nil && len(objs) != mm.Parts[0].Objects {
				t.Fatalf("%d objects read, the part holds %d", len(objs), mm.Parts[0].Objects)
			}
		case 2:
			_, _ = ParseRecord(data, m.Run, 1)
		case 3:
			if l, err := ParseListed(data); err == nil && (CheckRun(l.Run) != nil || l.Parts < 1 || l.Objects < 0) {
				t.Fatalf("a named run out of bounds was read: %+v", l)
			}
		case 5:
			if f, err := ParseFailure(data); err == nil && (len(f.Error) > MaxFailureText || strings.ContainsAny(f.Error, "\n\x1b\x00")) {
				t.Fatalf("a failure's error was read unbounded or unprintable: %q", f.Error)
			}
		case 4:
			if p, err := ParseProgress(data, m.Run, 1); err == nil && (p.ObjectsDone > p.Objects || p.BytesDone > p.Bytes || p.Part != 1) {
				t.Fatalf("a progress out of bounds was read: %+v", p)
			}
		default:
			if c, err := ParseCurrent(data); err == nil && CheckRun(c.Run) != nil {
				t.Fatal("a run pointer naming no run was read")
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
		{name: "listed, no parts", data: `{"run":"` + run + `","objects":10,"bytes":100,"parts":0}`},
		{name: "listed, too many parts", data: `{"run":"` + run + `","objects":10,"bytes":100,"parts":100001}`},
		{name: "listed, negative", data: `{"run":"` + run + `","objects":-1,"bytes":100,"parts":2}`},
		{name: "listed, bad run", data: `{"run":"../x","objects":1,"bytes":1,"parts":2}`},
		{name: "listed, unknown field", data: `{"run":"` + run + `","objects":1,"bytes":1,"parts":2,"x":1}`},
		{name: "progress", progress: true, data: `{"run":"` + run + `","part":1,"objects":10,"bytes":100,"objectsDone":4,"bytesDone":40}`, ok: true},
		{name: "progress of another part", progress: true, data: `{"run":"` + run + `","part":2,"objects":10,"bytes":100,"objectsDone":4,"bytesDone":40}`},
		{name: "progress past its objects", progress: true, data: `{"run":"` + run + `","part":1,"objects":10,"bytes":100,"objectsDone":11,"bytesDone":40}`},
		{name: "progress past its bytes", progress: true, data: `{"run":"` + run + `","part":1,"objects":10,"bytes":100,"objectsDone":1,"bytesDone":101}`},
		{name: "progress too large", progress: true, data: `{"run":"` + run + `","part":1,"objects":10,"bytes":100,"objectsDone":1,"bytesDone":1}` + strings.Repeat(" ", MaxRecordBytes)},
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

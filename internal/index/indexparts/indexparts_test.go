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
		switch which % 4 {
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
		default:
			if c, err := ParseCurrent(data); err == nil && CheckRun(c.Run) != nil {
				t.Fatal("a run pointer naming no run was read")
			}
		}
	})
}

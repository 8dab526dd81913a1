package compact

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/planner"
)

// compactCases are indexes of every shape a writer makes: name rules,
// tables of names and hashes, footers, deletes, partitions.
var compactCases = []struct{ name, json string }{
	{"parquet", `{"shardfeed": 1, "format": "parquet", "shards": [
		{"name": "a.parquet#0", "object": "a.parquet", "part": 0, "offset": 4, "length": 100, "samples": 10, "hash": "xxh64:0123456789abcdef", "objectSize": 300, "footerOffset": 204, "footerLength": 96},
		{"name": "a.parquet#1", "object": "a.parquet", "part": 1, "offset": 104, "length": 100, "samples": 9, "hash": "xxh64:00000000000000ff", "objectSize": 300, "footerOffset": 204, "footerLength": 96},
		{"name": "b.parquet#0", "object": "b.parquet", "part": 0, "offset": 4, "length": 70000, "samples": 1000, "hash": "xxh64:ffffffffffffffff", "objectSize": 70200, "footerOffset": 70004, "footerLength": 196}]}`},
	{"jsonl with a schema", `{"shardfeed": 1, "format": "jsonl", "schema": [{"name": "x", "type": "int64"}, {"name": "t", "type": "utf8"}], "shards": [
		{"name": "a.jsonl#0", "object": "a.jsonl", "part": 0, "offset": 0, "length": 12, "samples": 2, "hash": "xxh3_64:00"},
		{"name": "a.jsonl#1", "object": "a.jsonl", "part": 1, "offset": 12, "length": 1, "samples": 1, "hash": "xxh3_64:01"}]}`},
	{"objects named as shards", `{"shardfeed": 1, "format": "webdataset", "shards": [
		{"name": "s-0.tar", "object": "s-0.tar", "part": 0, "offset": 0, "length": 10240, "samples": 3, "hash": "sha256:` + strings.Repeat("ab", 32) + `"},
		{"name": "s-1.tar", "object": "s-1.tar", "part": 0, "offset": 0, "length": 20480, "samples": 7, "hash": "sha256:` + strings.Repeat("cd", 32) + `"}]}`},
	{"names of their own, hashes of many forms", `{"shardfeed": 1, "format": "parquet", "shards": [
		{"name": "first", "object": "a.parquet", "part": 0, "offset": 4, "length": 100, "samples": 10, "hash": "xxh64:ABCDEF0123456789"},
		{"name": "second ☃", "object": "a.parquet", "part": 1, "offset": 104, "length": 100, "samples": 10, "hash": ""},
		{"name": "third", "object": "b.parquet", "part": 0, "offset": 4, "length": 100, "samples": 10, "hash": "sha256:00"}]}`},
	{"iceberg with deletes", `{"shardfeed": 1, "format": "iceberg", "table": {"catalog": "rest http://rest:8181", "name": "db.t", "location": "s3://wh/db/t",
		"snapshot": 42, "schemaID": 0, "arrowSchema": "AAAA", "root": "s3://wh/", "deleteFiles": [{"path": "s3://wh/db/t/data/d.parquet", "content": "position", "rows": 3}]},
		"shards": [{"name": "db/t/data/a.parquet#0", "object": "db/t/data/a.parquet", "part": 0, "offset": 4, "length": 100, "samples": 7, "hash": "xxh64:00",
		"objectSize": 200, "footerOffset": 104, "footerLength": 96, "rows": 10, "deleted": [[0, 1], [5, 7]]}]}`},
	{"partitions", `{"shardfeed": 1, "format": "parquet", "partitions": {"columns": [{"name": "lang", "type": "utf8"}, {"name": "year", "type": "int32"}], "select": "year > 2020"}, "shards": [
		{"name": "lang=en/year=2021/a.parquet#0", "object": "lang=en/year=2021/a.parquet", "part": 0, "offset": 4, "length": 100, "samples": 10, "hash": "xxh64:0000000000000001", "partition": ["en", "2021"]},
		{"name": "lang=__HIVE_DEFAULT_PARTITION__/year=2022/b.parquet#0", "object": "lang=__HIVE_DEFAULT_PARTITION__/year=2022/b.parquet", "part": 0, "offset": 4, "length": 100, "samples": 10, "hash": "xxh64:0000000000000002", "partition": [null, "2022"]}]}`},
}

func mustFile(t testing.TB, data string) *indexfile.File {
	t.Helper()
	f, err := indexfile.Parse([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Every shape of index reads back from its compact form as it was, with
// the content hash of its JSON form: a plan's fingerprint does not
// depend on the form.
func TestCompactIndexReadsBackAsItsJSON(t *testing.T) {
	for _, tt := range compactCases {
		t.Run(tt.name, func(t *testing.T) {
			want := mustFile(t, tt.json)
			data, err := Encode(want)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Parse(data)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				a, _ := json.Marshal(got)
				b, _ := json.Marshal(want)
				t.Fatalf("read back\n%s\nwant\n%s", a, b)
			}
			if !reflect.DeepEqual(got.StreamIndex(), want.StreamIndex()) || got.StreamIndex().ContentHash() != want.StreamIndex().ContentHash() {
				t.Fatal("the planner's view differs from the JSON index's")
			}
			jsonData, _ := json.Marshal(want)
			t.Logf("%d bytes compact, %d as JSON", len(data), len(jsonData))
		})
	}
}

// The compact form holds every field of an Entry: a field added to indexfile.Entry
// must be given a column or a place among the extras.
func TestCompactIndexHoldsEveryFieldOfAnEntry(t *testing.T) {
	held := []string{"Name", "Object", "Hash", "Samples"}
	for _, f := range intFields[1:] {
		held = append(held, strings.ToUpper(f.name[:1])+f.name[1:])
	}
	for f := range reflect.TypeFor[entryExtras]().Fields() {
		held = append(held, f.Name)
	}
	for f := range reflect.TypeFor[indexfile.Entry]().Fields() {
		if !slices.Contains(held, f.Name) {
			t.Errorf("Entry.%s is in no column of the compact index, and not among its extras", f.Name)
		}
	}
}

// bigFile is a Parquet-like index of n shards, in n/4 objects, with
// varying counts.
func bigFile(n int) *indexfile.File {
	f := &indexfile.File{Shardfeed: indexfile.Version, Format: datav1alpha1.FormatParquet}
	for i := range n {
		obj := fmt.Sprintf("data/part-%07d.parquet", i/4)
		f.Shards = append(f.Shards, indexfile.Entry{Name: fmt.Sprintf("%s#%d", obj, i%4), Object: obj, Part: i % 4,
			Offset: 4 + int64(i%4)*5000, Length: 5000, Samples: 900 + int64(i%200), Hash: fmt.Sprintf("xxh64:%016x", uint64(i)*0x9e3779b97f4a7c15),
			ObjectSize: 20200, FooterOffset: 20004, FooterLength: 196})
	}
	return f
}

// memReader reads a compact index in memory, counting requests.
type memReader struct {
	data     []byte
	requests atomic.Int64
}

func (m *memReader) readAt(off, n int64) ([]byte, error) {
	m.requests.Add(1)
	if off < 0 || n < 0 || off+n > int64(len(m.data)) {
		return nil, fmt.Errorf("read [%d, +%d) past %d", off, n, len(m.data))
	}
	return m.data[off : off+n], nil
}

// A reader of a few shards of a large index fetches its header and a
// block or two of each column, not the index.
func TestCompactIndexIsReadInParts(t *testing.T) {
	const n = 200_000
	f := bigFile(n)
	data, err := Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	jsonData, _ := json.Marshal(f)
	t.Logf("%d shards: %d bytes compact (%.1f per shard), %d as JSON", n, len(data), float64(len(data))/n, len(jsonData))
	if len(data)*4 > len(jsonData) {
		t.Errorf("the compact index is %d bytes, more than a quarter of the JSON's %d", len(data), len(jsonData))
	}
	for _, r := range []struct{ lo, hi int64 }{{0, 1}, {123_456, 123_556}, {n - 7, n}} {
		m := &memReader{data: data}
		cr, err := NewReader(int64(len(data)), m.readAt, 0)
		if err != nil {
			t.Fatal(err)
		}
		if cr.Shards() != n || cr.ContentHash() != f.StreamIndex().ContentHash() || cr.Samples() != f.StreamIndex().Samples() {
			t.Fatalf("header: %d shards, %d samples, hash %s", cr.Shards(), cr.Samples(), cr.ContentHash())
		}
		head := cr.Read
		got, err := cr.Entries(r.lo, r.hi)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, f.Shards[r.lo:r.hi]) {
			t.Fatalf("shards [%d, %d) read back as %+v", r.lo, r.hi, got[0])
		}
		// Each column of values read: at most two blocks of it.
		if limit := head + 2*6*BlockSize; cr.Read > limit {
			t.Errorf("shards [%d, %d): read %d bytes (header %d), more than %d", r.lo, r.hi, cr.Read, head, limit)
		}
		t.Logf("shards [%d, %d): %d bytes read (%d of them the header) of %d, in %d requests", r.lo, r.hi, cr.Read, head, len(data), m.requests.Load())
	}
}

// corrupt rewrites a compact index's header and sections by edit.
func corrupt(t *testing.T, data []byte, edit func(h map[string]any, sections []byte) []byte) []byte {
	t.Helper()
	hlen := int(binary.LittleEndian.Uint32(data[8:]))
	var h map[string]any
	if err := json.Unmarshal(data[compactPrelude:compactPrelude+hlen], &h); err != nil {
		t.Fatal(err)
	}
	sections := edit(h, slices.Clone(data[compactPrelude+hlen:]))
	header, _ := json.Marshal(h)
	out := slices.Clone(data[:compactPrelude])
	binary.LittleEndian.PutUint32(out[8:], uint32(len(header))) //nolint:gosec // small
	return append(append(out, header...), sections...)
}

func metaOf(h map[string]any) map[string]any { return h["compact"].(map[string]any) }

// A compact index that is cut short, corrupt, or whose header claims what
// its bytes do not hold is refused with what is wrong, before anything of
// the claimed size is allocated.
func TestCompactIndexRefusesWhatItsWriterNeverWrites(t *testing.T) {
	f := mustFile(t, compactCases[0].json)
	good, err := Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		data    func() []byte
		wantErr string
	}{
		{"cut short", func() []byte { return good[:len(good)-3] }, "not within"},
		{"prelude only", func() []byte { return good[:10] }, "shorter than its 16-byte prelude"},
		{"another version", func() []byte { b := slices.Clone(good); b[7] = 9; return b }, "version 9 is not supported"},
		{"a flipped byte", func() []byte { b := slices.Clone(good); b[len(b)-1] ^= 1; return b }, "does not hash to its header's hash"},
		{"a header past the end", func() []byte {
			b := slices.Clone(good)
			binary.LittleEndian.PutUint32(b[8:], uint32(len(b)))
			return b
		}, "runs past its end"},
		{"an unknown key", func() []byte {
			return corrupt(t, good, func(h map[string]any, s []byte) []byte { metaOf(h)["extra"] = 1; return s })
		}, `unknown field "extra"`},
		{"shards in the header", func() []byte {
			return corrupt(t, good, func(h map[string]any, s []byte) []byte { h["index"].(map[string]any)["shards"] = []any{}; return s })
		}, "lists shards"},
		{"a billion shards", func() []byte {
			return corrupt(t, good, func(h map[string]any, s []byte) []byte { metaOf(h)["shards"] = 1e9; return s })
		}, "1000000000 shards in"},
		{"another content hash", func() []byte {
			return corrupt(t, good, func(h map[string]any, s []byte) []byte {
				metaOf(h)["contentHash"] = strings.Repeat("0", 64)
				return s
			})
		}, "its header says 0000"},
		{"a width of 3", func() []byte {
			return corrupt(t, good, func(h map[string]any, s []byte) []byte {
				metaOf(h)["sampleCounts"].(map[string]any)["width"] = 3
				return s
			})
		}, "width 3 is not 0, 1, 2, 4 or 8"},
		{"a rehashed object id past the objects", func() []byte {
			return corrupt(t, good, func(h map[string]any, s []byte) []byte {
				// Object ids 0, 0, 1, the first byte of records of 24
				// bytes: make the last 7, and hash its block again, as
				// a careful forger would.
				rec := metaOf(h)["records"].(map[string]any)
				sec := rec["section"].(map[string]any)
				off := int(sec["offset"].(float64))
				if n := int(sec["length"].(float64)); n != 3*24 {
					t.Fatalf("records of %d bytes, want 3 of 24", n)
				}
				s[off+2*24] = 7
				sum := sha256.Sum256(s[off : off+3*24])
				sec["blocks"] = base64.StdEncoding.EncodeToString(sum[:])
				return s
			})
		}, "object 7 is not one of its 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.data())
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("read = %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}

// FuzzReadCompact: any bytes after the compact magic are refused with an
// error or read as an index that encodes back to the same shards.
func FuzzReadCompact(f *testing.F) {
	for _, c := range compactCases {
		data, err := Encode(mustFile(f, c.json))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(compactMagic + "\x02\x00\x00\x00\x00\x00\x00\x00{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fl, err := Parse(data)
		if err != nil {
			return
		}
		again, err := Encode(fl)
		if err != nil {
			t.Fatalf("an index read back does not encode: %v", err)
		}
		f2, err := Parse(again)
		if err != nil || !reflect.DeepEqual(f2, fl) {
			t.Fatalf("an index read back does not read back again: %v", err)
		}
	})
}

// BenchmarkReadCompact reads a compact index of a million shards whole,
// as a sidecar does: its bytes, and the heap it leaves.
func BenchmarkReadCompact(b *testing.B) {
	data, err := Encode(bigFile(1_000_000))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(data)), "index-bytes")
	b.ResetTimer()
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeCompact writes it.
func BenchmarkEncodeCompact(b *testing.B) {
	f := bigFile(1_000_000)
	b.ResetTimer()
	for b.Loop() {
		if _, err := Encode(f); err != nil {
			b.Fatal(err)
		}
	}
}

// A sidecar's plan from a compact index's header and counts alone, with
// the entries of its own pod's shards fetched as it needs them, is the
// plan of the whole index, for a few percent of the index's bytes.
func TestAPodPlansFromTheCountsAndItsShardsEntries(t *testing.T) {
	const n = 200_000
	f := bigFile(n)
	data, err := Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	m := &memReader{data: data}
	r, err := NewReader(int64(len(data)), m.readAt, 0)
	if err != nil {
		t.Fatal(err)
	}
	lean, counts, err := r.Lean()
	if err != nil {
		t.Fatal(err)
	}
	planned := r.Read
	params := func(x planner.StreamIndex) planner.Params {
		return planner.Params{Streams: []planner.Stream{{Name: "web", Index: x}}, Seed: 3, NumSplits: 64, Shuffle: true,
			BlockSize: 1 << 16, GlobalBatchSize: 64 * 8, DropLast: true}
	}
	whole, err := planner.New(params(f.StreamIndex()))
	if err != nil {
		t.Fatal(err)
	}
	pl, err := planner.New(params(lean))
	if err != nil {
		t.Fatal(err)
	}
	if pl.Fingerprint().Sum != whole.Fingerprint().Sum || pl.Steps() != whole.Steps() {
		t.Fatalf("the plan of the counts: %s, %d steps; of the index: %s, %d steps", pl.Fingerprint().Sum, pl.Steps(), whole.Fingerprint().Sum, whole.Steps())
	}
	first, splits, err := pl.PodSplits(5, 16)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := pl.EpochOf(1, first, splits)
	if err != nil {
		t.Fatal(err)
	}
	// At start: the shards of the pod's first two steps.
	var early []int64
	for k := range int64(2) {
		batch, _ := ep.SplitsBatch(nil, k, first, splits)
		for _, x := range batch {
			early = append(early, int64(x.Shard))
		}
	}
	if err := counts.Resolve(early); err != nil {
		t.Fatal(err)
	}
	started := r.Read
	for _, h := range early {
		if e, ok := counts.Entry(h); !ok || !reflect.DeepEqual(e, f.Shards[h]) {
			t.Fatalf("shard %d resolved as %+v", h, e)
		}
	}
	// Over the epoch: every shard of the pod's pieces.
	var hs []int64
	for _, s := range ep.ShardsOf(first, splits) {
		hs = append(hs, int64(s.Shard))
	}
	// Resolved by four goroutines at once, as a sidecar's fetchers do.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for g := range 4 {
		wg.Go(func() { errs[g] = counts.Resolve(hs[g*len(hs)/4 : (g+1)*len(hs)/4]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	wep, err := whole.Epoch(1)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ep.ShardsNeeded(first, splits), wep.ShardsNeeded(first, splits); !slices.Equal(got, want) {
		t.Fatalf("the pod's needs from its resolved shards differ from the whole index's")
	}
	for k := int64(0); k < pl.Steps(); k += pl.Steps() / 7 {
		got, _ := ep.SplitsBatch(nil, k, first, splits)
		want, _ := wep.SplitsBatch(nil, k, first, splits)
		if !slices.Equal(got, want) {
			t.Fatalf("step %d of the pod differs", k)
		}
	}
	distinct := int64(len(slices.Compact(slices.Sorted(slices.Values(early)))))
	t.Logf("%d shards, %d bytes compact: %d read to plan (header and counts), %d with the entries of the %d shards of the pod's first 2 steps, %d with all %d of its epoch's (%d requests)",
		n, len(data), planned, started, distinct, r.Read, counts.Resolved(), m.requests.Load())
	// A shard's entry: a block of records, of the objects' offsets and of
	// their keys, at most; every block once over the epoch (a few twice,
	// where two fetchers asked for it at once).
	if started-planned > 3*BlockSize*distinct || r.Read > int64(len(data))+16*BlockSize {
		t.Errorf("a pod of 16 read %d bytes at start (%d to plan) and %d in all of an index of %d", started, planned, r.Read, len(data))
	}
}

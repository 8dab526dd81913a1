package lancetable

// Tables written by pylance and what pylance reads of them, recorded in
// testdata/golden (test/oracle/lance_oracle.py record; make golden): every
// recorded case, in each file version shardfeed reads, read row for row
// as pylance reads it at the latest version and at each tag, deleted rows
// absent, and every encoding path pylance writes exercised.

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/format/lance/lancefile"
)

// recorded is the recording's manifest: each case (VERSION/CASE) and the
// table versions its answers were read at.
type recorded struct {
	Cases map[string]struct {
		Tags   map[string]uint64 `json:"tags"`
		Latest uint64            `json:"latest"`
		Read   []uint64          `json:"read"`
	} `json:"cases"`
}

func recording(t *testing.T) (string, recorded) {
	t.Helper()
	golden := testenv.Golden(t)
	var r recorded
	if err := json.Unmarshal(testenv.GoldenFile(t, golden, "manifest.json"), &r); err != nil {
		t.Fatalf("the recording's manifest: %v", err)
	}
	return golden, r
}

// goldenCases are the recorded cases (lance_oracle.py's RECORDED), and
// those recorded in some file versions only.
var (
	goldenCases  = []string{"tab", "media", "nested", "opts", "evolve", "dels", "edges", "lead-struct", "lead-list"}
	versionCases = map[string][]string{"2.1": {"blobs"}, "2.2": {"blobs"}}
)

func TestPylanceTablesReadRowForRow(t *testing.T) {
	golden, r := recording(t)
	for _, version := range []string{"2.0", "2.1", "2.2"} {
		var mu sync.Mutex
		seen := map[string]bool{}
		t.Run(version, func(t *testing.T) {
			for _, kase := range append(slices.Clone(goldenCases), versionCases[version]...) {
				c, ok := r.Cases[version+"/"+kase]
				if !ok {
					t.Fatalf("the recording has no case %s/%s (make golden)", version, kase)
				}
				t.Run(kase, func(t *testing.T) {
					t.Parallel()
					for _, v := range append(slices.Collect(maps.Values(c.Tags)), c.Latest) {
						if !slices.Contains(c.Read, v) {
							t.Fatalf("the recording read versions %v, not %d (the latest, %d, or a tag's, %v)", c.Read, v, c.Latest, c.Tags)
						}
					}
					dir := filepath.Join(golden, version, kase)
					for _, v := range c.Read {
						got := readTable(t, dir, v, func(names []string) {
							mu.Lock()
							defer mu.Unlock()
							for _, n := range names {
								seen[n] = true
							}
						})
						name := fmt.Sprintf("%s/%s.v%d.jsonl", version, kase, v)
						testenv.CompareHashed(t, name, got, testenv.GoldenFile(t, golden, name))
					}
				})
			}
		})
		var got []string
		for k := range seen {
			got = append(got, k)
		}
		sort.Strings(got)
		t.Logf("file version %s: the tables' pages use %s", version, strings.Join(got, ", "))
		for _, want := range wantEncodings[version] {
			if !seen[want] {
				t.Errorf("file version %s: no table exercised %q (the cases should force every encoding path pylance writes; saw %v)", version, want, got)
			}
		}
	}
}

// fileSource reads a local file's bytes, counting them.
type fileSource struct {
	data []byte
	read int
}

func (f *fileSource) ReadAt(off, n uint64) ([]byte, error) {
	if off+n > uint64(len(f.data)) {
		return nil, fmt.Errorf("[%d, +%d) past %d", off, n, len(f.data))
	}
	f.read += int(n)
	return f.data[off : off+n], nil
}

// readTable reads every live row of version v of the table in dir, as the
// oracle prints them.
func readTable(t *testing.T, dir string, v uint64, seen func([]string)) []string {
	t.Helper()
	var data []byte
	for _, k := range ManifestKeys(v) {
		if b, err := os.ReadFile(filepath.Join(dir, k)); err == nil {
			data = b
			break
		}
	}
	if data == nil {
		t.Fatalf("no manifest of version %d", v)
	}
	m, err := ManifestAt(data, 0, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != v {
		t.Fatalf("manifest of version %d says %d", v, m.Version)
	}
	if err := m.CheckFlags(); err != nil {
		t.Fatal(err)
	}
	nodes, err := lancefile.Tree(m.Fields)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, frag := range m.Fragments {
		files := fragmentFiles(t, dir, frag, seen)
		deleted := map[uint32]bool{}
		if frag.Deletion != nil {
			b, err := os.ReadFile(filepath.Join(dir, frag.Deletion.Path(frag.ID)))
			if err != nil {
				t.Fatal(err)
			}
			del, err := Deleted(frag.Deletion, frag.PhysicalRows, b)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range del {
				deleted[r] = true
			}
		}
		arrs := make([]arrow.Array, len(nodes))
		for i, n := range nodes {
			if arrs[i], err = ReadRows(n, files, 0, frag.PhysicalRows); err != nil {
				t.Fatalf("fragment %d, field %q: %v", frag.ID, n.Name, err)
			}
			defer arrs[i].Release()
		}
		// Row ranges cut anywhere (as shards are) read what the whole
		// fragment's read holds there: pages, mini-block chunks and the
		// chunks of lists found by the repetition index, entered midway.
		rng := rand.New(rand.NewSource(int64(frag.ID)))
		for range 6 {
			a := uint64(rng.Int63n(int64(frag.PhysicalRows)))
			b := a + 1 + uint64(rng.Int63n(int64(frag.PhysicalRows-a)))
			for i, n := range nodes {
				sub, err := ReadRows(n, files, a, b)
				if err != nil {
					t.Fatalf("fragment %d, field %q, rows [%d, %d): %v", frag.ID, n.Name, a, b, err)
				}
				whole := array.NewSlice(arrs[i], int64(a), int64(b))
				if !array.Equal(sub, whole) {
					t.Fatalf("fragment %d, field %q: rows [%d, %d) read alone differ from the fragment's read", frag.ID, n.Name, a, b)
				}
				sub.Release()
				whole.Release()
			}
		}
		for r := range int(frag.PhysicalRows) {
			if deleted[uint32(r)] {
				continue
			}
			row := map[string]any{"_rowaddr": frag.ID<<32 | uint64(r)}
			for i, n := range nodes {
				row[n.Name] = plain(arrs[i], r)
			}
			rows = append(rows, testenv.Canonical(t, row))
		}
	}
	return rows
}

func plain(a arrow.Array, i int) any { return testenv.Plain(a, i) }

// wantEncodings are the layouts and encodings the cases must exercise in
// each file version: every path pylance 14 writes for the types shardfeed
// reads (lance-scope.md §3), so that a writer change that stops forcing
// one fails here rather than leaving a decoder unchecked.
var wantEncodings = map[string][]string{
	"2.0": {"2.0 binary", "2.0 dictionary", "2.0 fixed_size_list", "2.0 flat", "2.0 list", "2.0 nullable all",
		"2.0 nullable none", "2.0 nullable some", "2.0 struct", "2.0 zstd"},
	"2.1": append(slices.Clone(v21Encodings), "blob", "PackedStruct"),
	"2.2": append(slices.Clone(v21Encodings), "VariablePackedStruct"),
}

var v21Encodings = []string{"miniblock", "fullzip", "constant", "dictionary", "ByteStreamSplit", "FixedSizeList", "Flat",
	"Fsst", "General", "InlineBitpacking", "OutOfLineBitpacking", "Rle", "Variable", "lz4", "zstd"}

// fragmentFiles opens a fragment's data files in dir, passing each file's
// encodings to seen.
func fragmentFiles(t *testing.T, dir string, frag Fragment, seen func([]string)) []FileView {
	t.Helper()
	var files []FileView
	for _, df := range frag.Files {
		b, err := os.ReadFile(filepath.Join(dir, "data", df.Path))
		if err != nil {
			t.Fatal(err)
		}
		start, err := lancefile.TailStart(b[max(0, len(b)-65536):], int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		tail, err := lancefile.ParseTail(b[start:], start, int64(len(b)))
		if err != nil {
			t.Fatalf("%s: %v", df.Path, err)
		}
		seen(tail.Encodings())
		cols, _ := df.ColumnsOf()
		blobs := func(id uint32) (lancefile.Source, error) {
			b, err := os.ReadFile(filepath.Join(dir, "data", strings.TrimSuffix(df.Path, ".lance"), lancefile.BlobFileName(id)))
			return &fileSource{data: b}, err
		}
		files = append(files, FileView{Tail: tail, Source: &fileSource{data: b}, Columns: cols, Blobs: blobs})
	}
	return files
}

// Tables pylance writes that this reader does not decode are refused with
// the reason, never read as other values (an independent review found
// both read silently wrong: a packed struct as all nulls, a 2.0 column of
// an Arrow dictionary shifted by one).
func TestPylanceTablesItDoesNotReadAreRefusedWithTheReason(t *testing.T) {
	golden, r := recording(t)
	for _, tc := range []struct{ name, want string }{
		{"packed", "a packed struct"},
		{"dict", "an Arrow dictionary column in Lance file version 2.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := r.Cases["refused/"+tc.name]
			if !ok {
				t.Fatalf("the recording has no case refused/%s (make golden)", tc.name)
			}
			dir := filepath.Join(golden, "refused", tc.name)
			var data []byte
			for _, k := range ManifestKeys(c.Latest) {
				if b, err := os.ReadFile(filepath.Join(dir, k)); err == nil {
					data = b
					break
				}
			}
			m, err := ManifestAt(data, 0, int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			var refusals []error
			nodes, err := lancefile.Tree(m.Fields)
			if err != nil {
				refusals = append(refusals, err)
			}
			for _, frag := range m.Fragments {
				files := fragmentFiles(t, dir, frag, func([]string) {})
				for _, n := range nodes {
					if n.Err != nil {
						refusals = append(refusals, n.Err)
						continue
					}
					arr, err := ReadRows(n, files, 0, frag.PhysicalRows)
					if err != nil {
						refusals = append(refusals, err)
						continue
					}
					arr.Release()
				}
			}
			if len(refusals) == 0 || !errors.Is(refusals[0], lancefile.ErrUnsupported) && !errors.Is(refusals[0], ErrUnsupported) || !strings.Contains(refusals[0].Error(), tc.want) {
				t.Fatalf("refusals %v, want one saying %q", refusals, tc.want)
			}
		})
	}
}

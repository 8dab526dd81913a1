//go:build integration

package lancetable

// Tables written by pylance (test/oracle/lance_oracle.py, bin/venv-oracle)
// read here row for row as pylance reads them: every case of the fixture
// matrix, in each file version shardfeed reads, at the latest version and
// at a tag, deleted rows absent.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/format/lance/lancefile"
)

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

type written struct {
	Versions []uint64          `json:"versions"`
	Tags     map[string]uint64 `json:"tags"`
	Latest   uint64            `json:"latest"`
}

func oracleWrite(t *testing.T, dir, kase, version string) written {
	t.Helper()
	var w written
	out := testenv.PythonScript(t, "venv-oracle", "test/oracle/lance_oracle.py", "write", dir, "--case", kase, "--version", version)
	if err := json.Unmarshal(out, &w); err != nil {
		t.Fatalf("oracle write: %v: %s", err, out)
	}
	return w
}

func oracleRead(t *testing.T, args ...string) []string {
	t.Helper()
	out := testenv.PythonScript(t, "venv-oracle", "test/oracle/lance_oracle.py", append([]string{"read"}, args...)...)
	var rows []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<28)
	for sc.Scan() {
		var m map[string]any
		d := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		d.UseNumber() // u64s whole
		if err := d.Decode(&m); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, testenv.Canonical(t, m))
	}
	return rows
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
			files = append(files, FileView{Tail: tail, Source: &fileSource{data: b}, Columns: cols})
		}
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

func TestPylanceTablesReadRowForRow(t *testing.T) {
	cases := []string{"tab", "media", "nested", "opts", "evolve"}
	for _, version := range []string{"2.0", "2.1", "2.2"} {
		var mu sync.Mutex
		seen := map[string]bool{}
		t.Run(version, func(t *testing.T) {
			for _, kase := range cases {
				t.Run(kase, func(t *testing.T) {
					t.Parallel()
					dir := filepath.Join(t.TempDir(), kase+".lance")
					w := oracleWrite(t, dir, kase, version)
					check := func(v uint64, args ...string) {
						want := oracleRead(t, append([]string{dir}, args...)...)
						got := readTable(t, dir, v, func(names []string) {
							mu.Lock()
							defer mu.Unlock()
							for _, n := range names {
								seen[n] = true
							}
						})
						if len(got) != len(want) {
							t.Fatalf("version %d: %d rows, pylance reads %d", v, len(got), len(want))
						}
						bad := 0
						for i := range want {
							if got[i] != want[i] {
								if bad++; bad <= 3 {
									t.Errorf("version %d row %d: %s", v, i, diff(got[i], want[i]))
								}
							}
						}
						if bad > 0 {
							t.Fatalf("version %d: %d of %d rows differ", v, bad, len(want))
						}
					}
					check(w.Latest)
					tags := make([]string, 0, len(w.Tags))
					for tag := range w.Tags {
						tags = append(tags, tag)
					}
					sort.Strings(tags)
					for _, tag := range tags {
						check(w.Tags[tag], "--tag", tag)
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

// wantEncodings are the layouts and encodings the cases must exercise in
// each file version: every path pylance 14 writes for the types shardfeed
// reads (lance-scope.md §3), so that a writer change that stops forcing
// one fails here rather than leaving a decoder unchecked.
var wantEncodings = map[string][]string{
	"2.0": {"2.0 binary", "2.0 dictionary", "2.0 fixed_size_list", "2.0 flat", "2.0 list", "2.0 nullable all",
		"2.0 nullable none", "2.0 nullable some", "2.0 struct", "2.0 zstd"},
	"2.1": v21Encodings,
	"2.2": v21Encodings,
}

var v21Encodings = []string{"miniblock", "fullzip", "constant", "dictionary", "ByteStreamSplit", "FixedSizeList", "Flat",
	"Fsst", "General", "InlineBitpacking", "OutOfLineBitpacking", "Rle", "Variable", "lz4", "zstd"}

// diff names the columns two rows differ in, with both values.
func diff(got, want string) string {
	var g, w map[string]any
	_ = json.Unmarshal([]byte(got), &g)
	_ = json.Unmarshal([]byte(want), &w)
	var out []string
	for k, wv := range w {
		gb, _ := json.Marshal(g[k])
		wb, _ := json.Marshal(wv)
		if string(gb) != string(wb) {
			out = append(out, fmt.Sprintf("%s: got %s, want %s", k, trim(string(gb)), trim(string(wb))))
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		lo := max(0, i-80)
		return fmt.Sprintf("at byte %d: got …%s…, want …%s…", i, got[lo:min(len(got), i+80)], want[lo:min(len(want), i+80)])
	}
	return strings.Join(out, "; ")
}

func trim(s string) string {
	if len(s) > 600 {
		return s[:600] + "…"
	}
	return strings.TrimSpace(s)
}

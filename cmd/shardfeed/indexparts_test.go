package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/index/indexparts"
	"github.com/shardfeed/shardfeed/internal/index/indexparts/jobrecords"
	"github.com/shardfeed/shardfeed/sidecar/sampledata"
)

// textObjects writes objects of unequal sizes (one empty, one with a
// column of its own, one whose id is a string: a schema inferred from
// every record) in a text format.
func textObjects(t *testing.T, dir, ext string) {
	t.Helper()
	sep := map[string]string{"csv": ",", "tsv": "\t"}[ext]
	for i, rows := range []int{40, 0, 300, 7, 120, 1, 60} {
		var b strings.Builder
		if sep != "" && rows > 0 {
			b.WriteString("id" + sep + "t\n")
		}
		for j := range rows {
			id := fmt.Sprint(j)
			if i == 4 && j == 5 {
				id = "x" + id
			}
			switch {
			case sep != "":
				fmt.Fprintf(&b, "%s%s%s\n", id, sep, strings.Repeat("y", j%37))
			case i == 2:
				fmt.Fprintf(&b, "{\"id\": %s, \"t\": %q, \"extra\": 1.5}\n", id, strings.Repeat("y", j%37))
			default:
				fmt.Fprintf(&b, "{\"id\": %q, \"t\": %q}\n", id, strings.Repeat("y", j%37))
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("obj-%02d.%s", i, ext)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// indexFile reads the index a run wrote.
func indexFile(t *testing.T, dir string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, indexfile.Dir, indexfile.FileName))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runCLI(t, args...)
	if err != nil {
		t.Fatalf("shardfeed %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// inParts lists, indexes every part (and one twice) and merges.
func inParts(t *testing.T, args []string, n int) {
	t.Helper()
	mustRun(t, append(args, "--list-parts", fmt.Sprint(n))...)
	for k := range n {
		mustRun(t, append(args, "--part", fmt.Sprint(k))...)
	}
	if out := mustRun(t, append(args, "--part", "0")...); !strings.Contains(out, "done already") {
		t.Fatalf("a part done again was not skipped:\n%s", out)
	}
	mustRun(t, append(args, "--merge-parts")...)
}

func TestIndexInPartsMergesToTheOneRunsIndexByteForByte(t *testing.T) {
	cases := []struct {
		name   string
		format string
		write  func(t *testing.T, dir string)
		flags  []string
	}{
		{"jsonl", "jsonl", func(t *testing.T, dir string) { textObjects(t, dir, "jsonl") }, []string{"--shard-size", "1KiB"}},
		{"csv", "csv", func(t *testing.T, dir string) { textObjects(t, dir, "csv") }, []string{"--shard-size", "1KiB"}},
		{"tsv", "tsv", func(t *testing.T, dir string) { textObjects(t, dir, "tsv") }, []string{"--shard-size", "1KiB", "--hash", "sha256"}},
		{"parquet", "parquet", func(t *testing.T, dir string) {
			if err := sampledata.Parquet(context.Background(), dir, "p", 1000, 170, 40); err != nil {
				t.Fatal(err)
			}
		}, nil},
		{"arrow", "arrow", arrowObjects, []string{"--hash", "sha256"}},
		{"jsonl compact", "jsonl", func(t *testing.T, dir string) { textObjects(t, dir, "jsonl") }, []string{"--shard-size", "1KiB", "--index-form", "compact"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.write(t, dir)
			args := append([]string{"index", "file://" + dir + "/", "--format", c.format, "--concurrency", "3"}, c.flags...)
			mustRun(t, args...)
			key := indexfile.FileName
			if strings.Contains(c.name, "compact") {
				key = "index.sfi"
			}
			want, err := os.ReadFile(filepath.Join(dir, indexfile.Dir, key))
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{1, 2, 3, 5, 12} {
				if err := os.RemoveAll(filepath.Join(dir, indexfile.Dir)); err != nil {
					t.Fatal(err)
				}
				inParts(t, args, n)
				got, err := os.ReadFile(filepath.Join(dir, indexfile.Dir, key))
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != string(want) {
					t.Fatalf("%d parts: the merged index differs from the one run's\n got %.400s\nwant %.400s", n, got, want)
				}
				if left, _ := filepath.Glob(filepath.Join(dir, indexfile.Dir, "parts", "*", "*")); len(left) > 0 {
					t.Fatalf("%d parts: the run's files stay after the merge: %v", n, left)
				}
			}
		})
	}
}

func TestIndexInPartsRefusesAChangedObjectAMissingPartAndAnotherRunsParts(t *testing.T) {
	dir := t.TempDir()
	textObjects(t, dir, "jsonl")
	args := []string{"index", "file://" + dir + "/", "--format", "jsonl", "--shard-size", "1KiB"}
	mustRun(t, append(args, "--list-parts", "3")...)
	mustRun(t, append(args, "--part", "0")...)

	out, err := runCLI(t, append(args, "--merge-parts")...)
	if err == nil || !strings.Contains(err.Error(), "part 1 of run") || !strings.Contains(err.Error(), "--part 1") {
		t.Fatalf("merge with parts missing: %v\n%s", err, out)
	}

	// An object of part 2 grows: the part is refused, naming it.
	if err := os.WriteFile(filepath.Join(dir, "obj-06.jsonl"), []byte("{\"id\": \"1\", \"t\": \"\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runCLI(t, append(args, "--part", "2")...)
	if err == nil || !strings.Contains(err.Error(), "obj-06.jsonl") || !strings.Contains(err.Error(), "--list-parts") {
		t.Fatalf("a part whose object changed: %v\n%s", err, out)
	}

	// Listed again, the changed source is a new run: part 0 of the old one
	// is not taken for the new one's.
	out = mustRun(t, append(args, "--list-parts", "3")...)
	if !strings.Contains(out, "listed 7 objects") {
		t.Fatalf("list again:\n%s", out)
	}
	if out = mustRun(t, append(args, "--part", "0")...); strings.Contains(out, "done already") {
		t.Fatalf("a new run took the old run's part 0:\n%s", out)
	}
	mustRun(t, append(args, "--part", "1")...)
	mustRun(t, append(args, "--part", "2")...)
	mustRun(t, append(args, "--merge-parts", "--keep-parts")...)
	merged := indexFile(t, dir)
	mustRun(t, args...)
	if one := indexFile(t, dir); string(one) != string(merged) {
		t.Fatalf("after a relisting, the merge differs from one run")
	}

	// Other options are not the run's.
	out, err = runCLI(t, "index", "file://"+dir+"/", "--format", "jsonl", "--part", "0")
	if err == nil || !strings.Contains(err.Error(), "no run of these options") {
		t.Fatalf("a part of other options: %v\n%s", err, out)
	}
}

func TestIndexInPartsRefusesWhatIsNotIndexedObjectByObject(t *testing.T) {
	dir := t.TempDir()
	textObjects(t, dir, "jsonl")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"index", "file://" + dir + "/", "--format", "webdataset", "--list-parts", "2"}, "not yet in parts"},
		{[]string{"index", "file://" + dir + "/", "--format", "jsonl", "--list-parts", "2", "--part", "1"}, "one at a time"},
		{[]string{"index", "file://" + dir + "/", "--format", "jsonl", "--list-parts", "2", "--append"}, "not indexed in parts"},
		{[]string{"index", "file://" + dir + "/", "--format", "jsonl", "--merge-parts", "--run", "zz"}, "16 hex"},
		{[]string{"index", "file://" + dir + "/", "--format", "jsonl", "--part", "0", "--selection-only", "--lengths", "t"}, "not indexed in parts"},
		{[]string{"index", "file://" + dir + "/", "--format", "jsonl", "--part", "0", "--run", "../../x"}, "16 hex"},
	} {
		out, err := runCLI(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q\n%s", c.args, err, c.want, out)
		}
	}
	_ = indexparts.Dir
}

// cancelAt is a command's output that cancels it once it says what.
type cancelAt struct {
	strings.Builder
	what   string
	cancel context.CancelFunc
}

func (c *cancelAt) Write(p []byte) (int, error) {
	n, err := c.Builder.Write(p)
	if strings.Contains(c.String(), c.what) {
		c.cancel()
	}
	return n, err
}

func TestAPartStoppedMidwayGoesOnFromItsCheckpointToTheSameIndex(t *testing.T) {
	dir := t.TempDir()
	for i := range 40 {
		var b strings.Builder
		for j := range 10 + i*3 {
			fmt.Fprintf(&b, "{\"id\": %d, \"t\": %q}\n", j, strings.Repeat("z", (i+j)%23))
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("o-%03d.jsonl", i)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"index", "file://" + dir + "/", "--format", "jsonl", "--shard-size", "512", "--concurrency", "1"}
	mustRun(t, args...)
	want := indexFile(t, dir)
	mustRun(t, append(args, "--list-parts", "2")...)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &cancelAt{what: "indexed 8/", cancel: cancel}
	cmd := newRootCommand()
	cmd.SetOut(out)
	cmd.SetErr(out)
	cmd.SetArgs(append(args, "--part", "1"))
	if err := cmd.ExecuteContext(ctx); err == nil {
		t.Fatalf("the part stopped midway ended well:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "kept in a checkpoint") {
		t.Fatalf("the part stopped midway kept no checkpoint:\n%s", out.String())
	}
	if got := mustRun(t, append(args, "--part", "1")...); !strings.Contains(got, "resuming from a checkpoint") {
		t.Fatalf("the part run again did not go on from its checkpoint:\n%s", got)
	}
	mustRun(t, append(args, "--part", "0")...)
	mustRun(t, append(args, "--merge-parts")...)
	if got := indexFile(t, dir); string(got) != string(want) {
		t.Fatal("the index merged from a resumed part differs from the one run's")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, indexfile.Dir, "parts", "*", "*", "*")); len(left) > 0 {
		t.Fatalf("a checkpoint stays after the merge: %v", left)
	}
}

func TestIndexInPartsOfAManifestsStreamWritesItsIndexAndSelectionAsOneRun(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	textObjects(t, filepath.Join(dir, "a"), "jsonl")
	manifest := filepath.Join(dir, "d.yaml")
	m := "apiVersion: data.shardfeed.io/v1alpha1\nkind: TrainingDataset\nmetadata: {name: d}\nspec:\n  numSplits: 1\n  globalBatchSize: 1\n  streams:\n" +
		"  - {name: web, format: mds, source: {uri: m/}}\n  - {name: a, format: jsonl, source: {uri: a/}, filter: \"t != ''\"}\n"
	if err := os.WriteFile(manifest, []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"index", "-f", manifest, "--stream", "a", "--shard-size", "1KiB"}
	mustRun(t, args...)
	idx := filepath.Join(dir, "a")
	want := indexFile(t, idx)
	sels, _ := filepath.Glob(filepath.Join(idx, indexfile.Dir, "filter-*"))
	if len(sels) == 0 {
		t.Fatal("one run wrote no selection")
	}
	wantSel := map[string][]byte{}
	for _, s := range sels {
		wantSel[s], _ = os.ReadFile(s)
	}
	if err := os.RemoveAll(filepath.Join(idx, indexfile.Dir)); err != nil {
		t.Fatal(err)
	}
	inParts(t, args, 4)
	if got := indexFile(t, idx); string(got) != string(want) {
		t.Fatal("-f: the merged index differs from the one run's")
	}
	for s, data := range wantSel {
		if got, err := os.ReadFile(s); err != nil || string(got) != string(data) {
			t.Fatalf("-f: the selection %s after the merge differs from the one run's (%v)", s, err)
		}
	}
}

// arrowObjects writes Arrow IPC files of unequal sizes, a record batch of
// unequal rows each few rows.
func arrowObjects(t *testing.T, dir string) {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	for i, rows := range []int{30, 5, 200, 1, 77} {
		fh, err := os.Create(filepath.Join(dir, fmt.Sprintf("b-%02d.arrow", i)))
		if err != nil {
			t.Fatal(err)
		}
		w, err := ipc.NewFileWriter(fh, ipc.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		for start := 0; start < rows; start += 13 + i {
			b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
			for j := start; j < min(rows, start+13+i); j++ {
				b.Field(0).(*array.Int64Builder).Append(int64(j))
			}
			rec := b.NewRecordBatch()
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
			b.Release()
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := fh.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// The operator's Jobs name the run they list and give it to the parts and
// the merge; the parts write their progress beside their files, and the
// merge removes both.
func TestANamedRunRecordsItsTotalsAndItsPartsProgress(t *testing.T) {
	dir := t.TempDir()
	textObjects(t, dir, "jsonl")
	args := []string{"index", "file://" + dir + "/", "--format", "jsonl", "--shard-size", "1KiB"}
	const name = "ns.ds-index-list"
	mustRun(t, append(args, "--list-parts", "3", "--record-run", name)...)
	parts := filepath.Join(dir, filepath.FromSlash(indexparts.Dir))
	data, err := os.ReadFile(filepath.Join(parts, "named-"+name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	listed, err := jobrecords.ParseListed(data)
	if err != nil {
		t.Fatal(err)
	}
	var objects, bytes int64
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if info, err := e.Info(); err == nil && !e.IsDir() {
			objects, bytes = objects+1, bytes+info.Size()
		}
	}
	if listed.Objects != objects || listed.Bytes != bytes || listed.Parts != 3 {
		t.Fatalf("named run %+v, the stream is %d objects of %d bytes in 3 parts", listed, objects, bytes)
	}
	var sumObjects, sumBytes int64
	for k := range listed.Parts {
		mustRun(t, append(args, "--part", fmt.Sprint(k), "--run", listed.Run)...)
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(jobrecords.ProgressKey(listed.Run, k))))
		if err != nil {
			t.Fatal(err)
		}
		p, err := jobrecords.ParseProgress(data, listed.Run, k)
		if err != nil {
			t.Fatal(err)
		}
		if p.ObjectsDone != p.Objects || p.BytesDone != p.Bytes {
			t.Fatalf("part %d done says %+v", k, p)
		}
		sumObjects, sumBytes = sumObjects+p.Objects, sumBytes+p.Bytes
	}
	if sumObjects != listed.Objects || sumBytes != listed.Bytes {
		t.Fatalf("the parts' progress sums to %d objects of %d bytes, the listing %d of %d", sumObjects, sumBytes, listed.Objects, listed.Bytes)
	}
	mustRun(t, append(args, "--merge-parts", "--run", listed.Run, "--record-run", name)...)
	var left []string
	_ = filepath.WalkDir(parts, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, path)
		}
		return nil
	})
	if len(left) > 0 {
		t.Fatalf("the run's files and records stay after the merge: %v", left)
	}
	for _, bad := range [][]string{{"--list-parts", "2", "--record-run", "../x"}, {"--record-run", "../x"}} {
		if out, err := runCLI(t, append(args, bad...)...); err == nil || !strings.Contains(err.Error(), "--record-run") {
			t.Errorf("%v was not refused naming --record-run: %v\n%s", bad, err, out)
		}
	}
}

// A step of a named run that fails records why, for the operator's
// condition: the step, the part, the run and the error naming the object.
func TestAFailedStepOfANamedRunRecordsWhy(t *testing.T) {
	dir := t.TempDir()
	textObjects(t, dir, "jsonl")
	args := []string{"index", "file://" + dir + "/", "--format", "jsonl", "--shard-size", "1KiB"}
	const name = "ns.ds-index-list"
	mustRun(t, append(args, "--list-parts", "2", "--record-run", name)...)
	listed := listedRecord(t, dir, name)
	// An object of the last part grows after the listing.
	if err := os.WriteFile(filepath.Join(dir, "obj-06.jsonl"), []byte("{\"id\": 1}\n{\"id\": 2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, append(args, "--part", "1", "--run", listed.Run, "--record-run", name)...); err == nil {
		t.Fatal("a part over a changed object was indexed")
	}
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(jobrecords.FailureKey(name))))
	if err != nil {
		t.Fatalf("no failure recorded: %v", err)
	}
	f, err := jobrecords.ParseFailure(data)
	if err != nil {
		t.Fatal(err)
	}
	if f.Step != "part" || f.Part != 1 || f.Run != listed.Run || !strings.Contains(f.Error, "obj-06.jsonl") || !strings.Contains(f.Error, "list the parts again") || time.Since(f.Time) > time.Minute {
		t.Errorf("the failure recorded is %+v: want part 1 of run %s, naming obj-06.jsonl and the fix", f, listed.Run)
	}

	// An index in one run (the operator's Whole Job) records its failure
	// too.
	if err := os.WriteFile(filepath.Join(dir, "obj-03.jsonl"), []byte("{\"id\": 1}\nnot json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, append(args, "--record-run", name)...); err == nil {
		t.Fatal("a stream with an object that is not JSON Lines was indexed")
	}
	data, err = os.ReadFile(filepath.Join(dir, filepath.FromSlash(jobrecords.FailureKey(name))))
	if err != nil {
		t.Fatalf("no failure recorded of the index in one run: %v", err)
	}
	if f, err = jobrecords.ParseFailure(data); err != nil || f.Step != "index" || !strings.Contains(f.Error, "obj-03.jsonl") {
		t.Errorf("the failure recorded of the index in one run is %+v (%v): want step index, naming obj-03.jsonl", f, err)
	}
}

// --if-changed cuts no run over the very objects the index lists, and
// records so; an object added since is a change, and a run is cut.
func TestIfChangedListsAndCutsARunOnlyForAChangedSource(t *testing.T) {
	for _, form := range []string{"json", "compact"} {
		t.Run(form, func(t *testing.T) {
			dir := t.TempDir()
			textObjects(t, dir, "jsonl")
			args := []string{"index", "file://" + dir + "/", "--format", "jsonl", "--shard-size", "1KiB", "--index-form", form}
			check := append(slices.Clone(args), "--list-parts", "2", "--record-run", "ns.check", "--if-changed")
			if out, err := runCLI(t, check...); err != nil || strings.Contains(out, "unchanged") {
				t.Fatalf("a stream with no index was found unchanged (%v):\n%s", err, out)
			}
			mustRun(t, args...)
			listed := func() jobrecords.Listed { return listedRecord(t, dir, "ns.check") }
			if out := mustRun(t, check...); !strings.Contains(out, "unchanged since it was written") {
				t.Fatalf("the indexed stream listed again was not found unchanged:\n%s", out)
			}
			if l := listed(); !l.Unchanged || l.Run != "" || l.Objects != 7 {
				t.Fatalf("recorded %+v, want 7 objects unchanged", l)
			}
			if err := os.WriteFile(filepath.Join(dir, "obj-07.jsonl"), []byte("{\"id\": 1, \"t\": \"y\"}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if out := mustRun(t, check...); strings.Contains(out, "unchanged") {
				t.Fatalf("an object added was not a change:\n%s", out)
			}
			if l := listed(); l.Unchanged || l.Objects != 8 || l.Parts != 2 || indexparts.CheckRun(l.Run) != nil {
				t.Fatalf("recorded %+v, want a run of 8 objects in 2 parts", l)
			}
		})
	}
	if _, err := runCLI(t, "index", "file:///tmp/x/", "--if-changed"); err == nil || !strings.Contains(err.Error(), "--if-changed goes with --list-parts") {
		t.Errorf("--if-changed alone: %v", err)
	}
}

// listedRecord reads the run a listing in dir recorded under name.
func listedRecord(t *testing.T, dir, name string) jobrecords.Listed {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(jobrecords.ListedKey(name))))
	if err != nil {
		t.Fatal(err)
	}
	l, err := jobrecords.ParseListed(data)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A filter and lengths are measured, both, before either is written: a
// lengths that fails (a text column, here) leaves no selection behind.
func TestAFailedLengthsLeavesNoSelectionWritten(t *testing.T) {
	dir := t.TempDir()
	textObjects(t, dir, "jsonl")
	args := []string{"index", "file://" + dir + "/", "--format", "jsonl", "--shard-size", "1KiB"}
	mustRun(t, args...)
	out, err := runCLI(t, append(args, "--selection-only", "--filter", "t != ''", "--lengths", "t")...)
	if err == nil || !strings.Contains(err.Error(), `column "t" is text`) {
		t.Fatalf("lengths of a text column: %v\n%s", err, out)
	}
	written, _ := filepath.Glob(filepath.Join(dir, "_shardfeed", "filter-*"))
	if len(written) > 0 {
		t.Errorf("the failed run wrote %v", written)
	}
	// The filter alone is written.
	mustRun(t, append(args, "--selection-only", "--filter", "t != ''")...)
	if written, _ = filepath.Glob(filepath.Join(dir, "_shardfeed", "filter-*")); len(written) != 2 {
		t.Errorf("the filter alone wrote %v", written)
	}
}

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
)

// writeMDSIndex writes an MDS index.json (format version 2, as
// mosaicml-streaming's MDSWriter writes it) with shards of the given sample
// counts into dir.
func writeMDSIndex(t *testing.T, dir string, samples ...int) {
	t.Helper()
	type file struct {
		Basename string            `json:"basename"`
		Bytes    int               `json:"bytes"`
		Hashes   map[string]string `json:"hashes"`
	}
	type shard struct {
		ColumnEncodings []string `json:"column_encodings"`
		ColumnNames     []string `json:"column_names"`
		ColumnSizes     []*int   `json:"column_sizes"`
		Compression     *string  `json:"compression"`
		Format          string   `json:"format"`
		Hashes          []string `json:"hashes"`
		RawData         file     `json:"raw_data"`
		Samples         int      `json:"samples"`
		SizeLimit       int      `json:"size_limit"`
		Version         int      `json:"version"`
		ZipData         *file    `json:"zip_data"`
	}
	var shards []shard
	eight := 8
	for i, n := range samples {
		shards = append(shards, shard{
			ColumnEncodings: []string{"int", "str"}, ColumnNames: []string{"id", "text"}, ColumnSizes: []*int{&eight, nil},
			Format: "mds", Hashes: []string{"sha1"}, Samples: n, SizeLimit: 1 << 26, Version: 2,
			RawData: file{Basename: fmt.Sprintf("shard.%05d.mds", i), Bytes: 1000 * n, Hashes: map[string]string{"sha1": fmt.Sprintf("%040d", i)}},
		})
	}
	data, err := json.Marshal(map[string]any{"version": 2, "shards": shards})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "index.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// fixture writes two file:// MDS streams and a manifest that mixes them.
func fixture(t *testing.T, specTail string) string {
	t.Helper()
	dir := t.TempDir()
	writeMDSIndex(t, filepath.Join(dir, "web"), 100, 80, 120, 50)
	writeMDSIndex(t, filepath.Join(dir, "code"), 60, 60, 60)
	manifest := fmt.Sprintf(`apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata:
  name: demo
spec:
  streams:
    - name: web
      source: {uri: "file://%s/web/"}
      proportion: "0.7"
    - name: code
      source: {uri: "file://%s/code/"}
      proportion: "0.3"
%s`, dir, dir, specTail)
	path := filepath.Join(dir, "dataset.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := newRootCommand()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

const defaultTail = `  numSplits: 8
  globalBatchSize: 16
  shuffle: {seed: 3, blockSize: 64}
`

func TestPlanSummaryOnFileMDSStreams(t *testing.T) {
	path := fixture(t, defaultTail)
	out, err := runCLI(t, "plan", "-f", path)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		"dataset demo, epoch 0, plan v1-",
		"web     4       350",
		"code    3       180",
		"530 samples in 8 splits of 66; 33 steps of 16 samples",
		"dropped  2 samples per epoch",
		"PODS", "EGRESS", "MIN CACHE/POD",
		// Every served column, with what it arrives as in every batch.
		"COLUMN", "IN EVERY BATCH",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^id\s+int64\s+tensor int64 \[rows\] \(a null: 0, or fill_null\)$`),
		regexp.MustCompile(`(?m)^text\s+utf8\s+list of str`),
	} {
		if !want.MatchString(out) {
			t.Errorf("the columns table lacks %s:\n%s", want, out)
		}
	}

	out, err = runCLI(t, "plan", "-f", path, "-o", "json", "--pods", "1,4")
	if err != nil {
		t.Fatal(err)
	}
	var s summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("summary is not JSON: %v\n%s", err, out)
	}
	if s.Samples != 530 || s.Steps != 33 || len(s.Streams) != 2 || s.Streams[0].PerEpoch+s.Streams[1].PerEpoch != 530 {
		t.Errorf("summary = %+v", s)
	}
	if len(s.Pods) != 2 || s.Pods[0].EgressRatio != 1 || s.Pods[1].Pods != 4 || s.Pods[1].FetchedBytes < s.Pods[1].DistinctBytes {
		t.Errorf("pods = %+v", s.Pods)
	}
}

type idsLine struct {
	Epoch  int64 `json:"epoch"`
	Step   int64 `json:"step"`
	Rank   int   `json:"rank"`
	Pod    *int  `json:"pod"`
	Local  *int  `json:"local"`
	DPRank *int  `json:"dpRank"`
	// With a schedule.
	Phase    *int    `json:"phase"`
	Repeated bool    `json:"repeated"`
	Skipped  bool    `json:"skipped"`
	SkipStep int64   `json:"skipStep"`
	Worker   int     `json:"worker"`
	IDs      []int64 `json:"ids"`
	Pad      []int   `json:"pad"`
}

func readIDs(t *testing.T, out string) []idsLine {
	t.Helper()
	var lines []idsLine
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var l idsLine
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	return lines
}

func TestPlanIDsAreTheSameGlobalBatchesForEveryWorldSize(t *testing.T) {
	path := fixture(t, defaultTail)
	global := func(world int) map[int64][]int64 {
		out, err := runCLI(t, "plan", "-f", path, "--ids", "--world-size", fmt.Sprint(world), "--epoch", "2")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		batches := map[int64][]int64{}
		for _, l := range readIDs(t, out) {
			if l.Epoch != 2 || len(l.IDs) != 16/world || len(l.Pad) != 0 {
				t.Fatalf("W=%d line %+v: want epoch 2, %d ids, no pad", world, l, 16/world)
			}
			batches[l.Step] = append(batches[l.Step], l.IDs...)
		}
		for k := range batches {
			slices.Sort(batches[k])
		}
		return batches
	}
	w1 := global(1)
	if len(w1) != 33 {
		t.Fatalf("%d steps, want 33", len(w1))
	}
	for _, w := range []int{2, 4, 8} {
		if got := global(w); !mapsEqual(got, w1) {
			t.Errorf("world size %d gives other global batches than world size 1", w)
		}
	}
}

func mapsEqual(a, b map[int64][]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

func TestPlanIDsNameWorkersAndPods(t *testing.T) {
	path := fixture(t, `  numSplits: 4
  globalBatchSize: 12
`)
	// 530 samples: 4 splits of 132, 3 per split per step: 44 steps.
	out, err := runCLI(t, "plan", "-f", path, "--ids", "--world-size", "4", "--procs-per-pod", "2", "--workers", "3", "--steps", "40:")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := readIDs(t, out)
	if len(lines) != 4*4 {
		t.Fatalf("%d lines, want 4 steps x 4 ranks", len(lines))
	}
	for i, l := range lines {
		if l.Step != 40+int64(i/4) || l.Rank != i%4 {
			t.Fatalf("line %d is step %d rank %d, want step %d rank %d", i, l.Step, l.Rank, 40+i/4, i%4)
		}
		// The stream starts at step 40: worker w gets 40+w, 43+w, ...
		if l.Worker != int(l.Step-40)%3 || l.Pod == nil || *l.Pod != l.Rank/2 || len(l.IDs) != 3 {
			t.Fatalf("line %+v: want worker (step-40) mod 3, pod rank/2 and 3 ids", l)
		}
	}
}

// TestPlanIDsOfAMesh: with --mesh, ranks of one data-parallel coordinate
// print the same ids, and the data-parallel ranks together print the
// global batches of a world of D ranks, for 2-D and 3-D layouts.
func TestPlanIDsOfAMesh(t *testing.T) {
	path := fixture(t, defaultTail) // numSplits 8, globalBatchSize 16
	out, err := runCLI(t, "plan", "-f", path, "--ids", "--world-size", "4", "--epoch", "2")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := map[int64][]int64{}
	for _, l := range readIDs(t, out) {
		want[l.Step] = append(want[l.Step], l.IDs...)
	}
	for _, tc := range []struct {
		mesh  string
		procs int
		dp    func(rank int) int
	}{
		{"dp=4,tp=2", 2, func(r int) int { return r / 2 }},
		{"pp=2,dp=4,tp=2", 8, func(r int) int { return r / 2 % 4 }},
		{"dp_replicate=2,dp_shard=2,cp=3", 6, func(r int) int { return r / 3 }},
	} {
		out, err := runCLI(t, "plan", "-f", path, "--ids", "--mesh", tc.mesh, "--procs-per-pod", fmt.Sprint(tc.procs), "--epoch", "2")
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.mesh, err, out)
		}
		got := map[int64][]int64{}
		group := map[[2]int64][]int64{} // (step, dp rank) → ids
		for _, l := range readIDs(t, out) {
			if l.DPRank == nil || *l.DPRank != tc.dp(l.Rank) || l.Pod == nil || *l.Pod != l.Rank/tc.procs {
				t.Fatalf("%s: line %+v: want dpRank %d and pod %d", tc.mesh, l, tc.dp(l.Rank), l.Rank/tc.procs)
			}
			key := [2]int64{l.Step, int64(*l.DPRank)}
			if prev, ok := group[key]; ok {
				if !slices.Equal(prev, l.IDs) {
					t.Fatalf("%s: step %d rank %d got other ids than its replication group", tc.mesh, l.Step, l.Rank)
				}
				continue
			}
			group[key] = l.IDs
			got[l.Step] = append(got[l.Step], l.IDs...)
		}
		if !mapsEqual(got, want) {
			t.Errorf("%s: the data-parallel ranks' batches are not those of a world of 4", tc.mesh)
		}
	}
}

const scheduleTail = `  numSplits: 4
  globalBatchSize: 8
  shuffle: {seed: 3, blockSize: 16}
  schedule:
    phases:
    - {startStep: 5, globalBatchSize: 16}
    - {startStep: 10, skipSteps: 2}
    - {startStep: 15, repeatSteps: 3}
    - startStep: 20
      proportions: [{stream: web, proportion: "0"}, {stream: code, proportion: "1"}]
`

// TestPlanIDsOfASchedule: the ramp-up changes the batch size at its step,
// the skipped data is printed and marked before the step that jumps past
// it, repeated steps equal the steps they repeat, the last phase draws
// only code, and no sample is drawn twice.
func TestPlanIDsOfASchedule(t *testing.T) {
	path := fixture(t, scheduleTail) // web ids 0–349, code 350–529
	out, err := runCLI(t, "plan", "-f", path, "--ids", "--world-size", "2", "--steps", "0:25")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	byStep := map[[2]int64][]int64{}
	drawn := map[int64]int{}
	skipped := 0
	for _, l := range readIDs(t, out) {
		if l.Phase == nil {
			t.Fatalf("line %+v has no phase", l)
		}
		if l.Skipped {
			skipped++
			if l.Step != 10 || *l.Phase != 1 || len(l.IDs) != 8 {
				t.Fatalf("skipped line %+v: want step 10, phase 1, 8 ids", l)
			}
		} else {
			byStep[[2]int64{l.Step, int64(l.Rank)}] = l.IDs
		}
		want := map[bool]int{true: 8, false: 4}[l.Step >= 5]
		if len(l.IDs) != want {
			t.Fatalf("step %d rank %d: %d ids, want %d", l.Step, l.Rank, len(l.IDs), want)
		}
		phase := map[bool]int{true: -1}[l.Step < 5]
		for i, start := range []int64{5, 10, 15, 20} {
			if l.Step >= start {
				phase = i
			}
		}
		if *l.Phase != phase || l.Repeated != (l.Step >= 15 && l.Step < 18) {
			t.Fatalf("step %d: phase %d repeated %v, want %d %v", l.Step, *l.Phase, l.Repeated, phase, l.Step >= 15 && l.Step < 18)
		}
		if l.Step >= 20 && slices.IndexFunc(l.IDs, func(id int64) bool { return id < 350 }) >= 0 {
			t.Fatalf("step %d draws web ids %v in a phase of code only", l.Step, l.IDs)
		}
		if !l.Repeated {
			for _, id := range l.IDs {
				drawn[id]++
			}
		}
	}
	if skipped != 2*2 {
		t.Fatalf("%d skipped lines, want 2 steps x 2 ranks", skipped)
	}
	for k := int64(15); k < 18; k++ {
		for r := int64(0); r < 2; r++ {
			if !slices.Equal(byStep[[2]int64{k, r}], byStep[[2]int64{k - 3, r}]) {
				t.Fatalf("step %d rank %d does not repeat step %d", k, r, k-3)
			}
		}
	}
	for id, n := range drawn {
		if n != 1 {
			t.Fatalf("id %d drawn %d times before any stream's pass ends", id, n)
		}
	}
	sum, err := runCLI(t, "plan", "-f", path)
	if err != nil {
		t.Fatalf("%v\n%s", err, sum)
	}
	mustContainAll(t, sum, "scheduled (stratified) batching", "global step = epoch × 66 + step",
		"from step 5: globalBatchSize 16", "from step 10: skip the data of steps 10 to 11", "from step 15: repeat steps 12 to 14",
		"from step 20: proportions web=0 code=1")
}

func mustContainAll(t *testing.T, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("output lacks %q:\n%s", sub, s)
		}
	}
}

func TestPlanIDsPadTheLastBatch(t *testing.T) {
	path := fixture(t, `  numSplits: 4
  globalBatchSize: 20
  dropLast: false
  shuffle: {enabled: false}
`)
	out, err := runCLI(t, "plan", "-f", path, "--ids", "--world-size", "2")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// 530 samples: splits of 132 (2 dropped), 5 per split per step: 27
	// steps, the last with 3 pad rows per split, repeating its start.
	lines := readIDs(t, out)
	if len(lines) != 27*2 {
		t.Fatalf("%d lines, want %d", len(lines), 27*2)
	}
	for _, l := range lines {
		wantPad := 0
		if l.Step == 26 {
			wantPad = 6 // 3 pad rows of each of the rank's 2 splits
		}
		if len(l.Pad) != wantPad || len(l.IDs) != 10 {
			t.Fatalf("step %d rank %d: %d ids, pad %v; want 10 ids, %d pad", l.Step, l.Rank, len(l.IDs), l.Pad, wantPad)
		}
	}
}

func TestPlanRejectsBadInputClearly(t *testing.T) {
	good := fixture(t, defaultTail)
	dir := filepath.Dir(good)
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	data, _ := os.ReadFile(good)
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no file", []string{"plan"}, `required flag(s) "filename"`},
		{"missing file", []string{"plan", "-f", filepath.Join(dir, "nope.yaml")}, "no such file"},
		{"not a dataset", []string{"plan", "-f", write("cm.yaml", "apiVersion: v1\nkind: ConfigMap\n")}, "holds no TrainingDataset"},
		{"wrong version", []string{"plan", "-f", write("v2.yaml", strings.Replace(string(data), "v1alpha1", "v9", 1))}, `apiVersion "data.shardfeed.io/v9"`},
		{"misspelt field", []string{"plan", "-f", write("typo.yaml", strings.Replace(string(data), "globalBatchSize", "globalBatchsize", 1))}, `unknown field "spec.globalBatchsize"`},
		{"s3 stream without index", []string{"plan", "-f", write("s3.yaml", strings.Replace(string(data), "file://"+dir+"/code/", "s3://bucket/code/", 1))}, "give the index with --index-dir"},
		{"batch not multiple", []string{"plan", "-f", write("g.yaml", strings.Replace(string(data), "globalBatchSize: 16", "globalBatchSize: 12", 1))}, "spec.globalBatchSize: must be a multiple of spec.numSplits (8)"},
		{"ids without world", []string{"plan", "-f", good, "--ids"}, "--ids needs --world-size"},
		{"world not dividing", []string{"plan", "-f", good, "--ids", "--world-size", "3"}, "3 ranks do not divide spec.numSplits (8)"},
		{"procs not dividing", []string{"plan", "-f", good, "--ids", "--world-size", "4", "--procs-per-pod", "3"}, "--procs-per-pod 3 does not divide"},
		{"bad steps", []string{"plan", "-f", good, "--ids", "--world-size", "1", "--steps", "5"}, "write A:B"},
		{"steps outside", []string{"plan", "-f", good, "--ids", "--world-size", "1", "--steps", "0:99"}, "outside the epoch's steps 0:33"},
		{"both modes", []string{"plan", "-f", good, "--ids", "--summary"}, "exclude each other"},
		{"mesh without dp", []string{"plan", "-f", good, "--ids", "--mesh", "tp=8"}, "no data-parallel dimension"},
		{"mesh dp not dividing", []string{"plan", "-f", good, "--ids", "--mesh", "dp=3,tp=2"}, "data-parallel size: 3 does not divide spec.numSplits (8)"},
		{"mesh of another size", []string{"plan", "-f", good, "--ids", "--mesh", "dp=4,tp=2", "--world-size", "4"}, "--world-size 4 is not the size of --mesh dp=4,tp=2 (8 ranks)"},
		{"pods not dividing", []string{"plan", "-f", good, "--pods", "3"}, "--pods 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runCLI(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want one with %q\n%s", err, tt.wantErr, out)
			}
		})
	}
}

func TestPlanReadsIndexDirAndPlainIndexes(t *testing.T) {
	good := fixture(t, defaultTail)
	dir := filepath.Dir(good)
	data, _ := os.ReadFile(good)
	s3 := filepath.Join(dir, "s3.yaml")
	if err := os.WriteFile(s3, []byte(strings.Replace(string(data), "file://"+dir+"/code/", "s3://bucket/code/", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(dir, "indexes")
	if err := os.MkdirAll(idx, 0o755); err != nil {
		t.Fatal(err)
	}
	plain := `{"shards": [{"name": "a.jsonl", "samples": 60, "bytes": 6000}, {"name": "b.jsonl", "samples": 60, "bytes": 6000}, {"name": "c.jsonl", "samples": 60, "bytes": 6000}]}`
	if err := os.WriteFile(filepath.Join(idx, "code.json"), []byte(plain), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "plan", "-f", s3, "--index-dir", idx)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "code    3       180") {
		t.Errorf("summary does not use the plain index:\n%s", out)
	}
}

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  bool
	}{
		{"64MiB", 64 << 20, false}, {"64Mi", 64 << 20, false}, {"1GB", 1e9, false}, {"512k", 512e3, false},
		{"1048576", 1 << 20, false}, {"0", 0, true}, {"-1MiB", 0, true}, {"ten", 0, true}, {"9999999TiB", 0, true},
	}
	for _, tt := range tests {
		got, err := parseBytes(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d (error %v)", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestIndexThenPlanAJSONLStream(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&b, "{\"text\": \"sample %d\", \"label\": %d}\n", i, i%5)
	}
	if err := os.WriteFile(filepath.Join(dir, "part-0.jsonl"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "index", "file://"+dir+"/", "--format", "jsonl", "--shard-size", "4KiB")
	if err != nil || !strings.Contains(out, "1000 samples") {
		t.Fatalf("index: %v\n%s", err, out)
	}
	manifest := filepath.Join(dir, "ds.yaml")
	_ = os.WriteFile(manifest, []byte(fmt.Sprintf(`apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {name: chat}
spec:
  streams:
    - name: chat
      format: jsonl
      source: {uri: "file://%s/"}
  numSplits: 4
  globalBatchSize: 8
`, dir)), 0o600)
	out, err = runCLI(t, "plan", "-f", manifest, "--ids", "--world-size", "4")
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	seen := map[int64]bool{}
	for _, l := range readIDs(t, out) {
		for _, id := range l.IDs {
			if seen[id] {
				t.Fatalf("id %d twice", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != 1000 {
		t.Fatalf("plan delivers %d of 1000 records", len(seen))
	}
}

func TestConvertCSVToParquetThenPlanIt(t *testing.T) {
	src, out := t.TempDir(), t.TempDir()
	var b strings.Builder
	b.WriteString("id,label,text\n")
	for i := range 5000 {
		fmt.Fprintf(&b, "%d,%d,\"row %d\"\n", i, i%7, i)
	}
	if err := os.WriteFile(filepath.Join(src, "data.csv"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := runCLI(t, "convert", "file://"+src+"/", "--from", "csv", "--to", "parquet", "--out", "file://"+out+"/", "--shard-size", "8KiB", "--compression", "zstd:3")
	if err != nil || !strings.Contains(res, "5000 samples in") {
		t.Fatalf("convert: %v\n%s", err, res)
	}
	entries, _ := os.ReadDir(out)
	var parts int
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".parquet") {
			parts++
		}
	}
	if parts < 2 {
		t.Fatalf("%d Parquet objects, want several of %d row groups", parts, rowGroupsPerFile)
	}
	manifest := filepath.Join(out, "ds.yaml")
	_ = os.WriteFile(manifest, []byte(fmt.Sprintf(`apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {name: tab}
spec:
  streams:
    - {name: tab, format: parquet, source: {uri: "file://%s/"}}
  numSplits: 5
  globalBatchSize: 10
`, out)), 0o600)
	res, err = runCLI(t, "plan", "-f", manifest, "--ids", "--world-size", "1")
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, res)
	}
	n := 0
	for _, l := range readIDs(t, res) {
		n += len(l.IDs)
	}
	if n != 5000 {
		t.Fatalf("plan delivers %d of 5000 rows", n)
	}
	if _, err := runCLI(t, "convert", "file://"+src+"/", "--from", "csv", "--to", "orc", "--out", "file://"+out+"/"); err == nil || !strings.Contains(err.Error(), "use mds or parquet") {
		t.Fatalf("--to orc: %v", err)
	}
}

func TestIndexPlanAndConvertAnArrowStream(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	for start := 0; start < 600; start += 200 {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for i := start; i < start+200; i++ {
			rb.Field(0).(*array.Int64Builder).Append(int64(i))
		}
		if err := w.Write(rb.NewRecordBatch()); err != nil {
			t.Fatal(err)
		}
	}
	_ = w.Close()
	_ = os.WriteFile(filepath.Join(dir, "a.arrow"), buf.Bytes(), 0o600)
	if res, err := runCLI(t, "index", "file://"+dir+"/", "--format", "arrow"); err != nil || !strings.Contains(res, "3 shards, 600 samples") {
		t.Fatalf("index: %v\n%s", err, res)
	}
	manifest := filepath.Join(out, "ds.yaml")
	_ = os.WriteFile(manifest, []byte(fmt.Sprintf("apiVersion: data.shardfeed.io/v1alpha1\nkind: TrainingDataset\nmetadata: {name: a}\nspec:\n  streams: [{name: a, format: arrow, source: {uri: \"file://%s/\"}}]\n  numSplits: 3\n  globalBatchSize: 3\n", dir)), 0o600)
	res, err := runCLI(t, "plan", "-f", manifest, "-o", "json")
	if err != nil || !strings.Contains(res, `"samples": 600`) {
		t.Fatalf("plan: %v\n%s", err, res)
	}
	if res, err := runCLI(t, "convert", "file://"+dir+"/", "--from", "arrow", "--to", "mds", "--out", "file://"+out+"/mds/"); err != nil || !strings.Contains(res, "600 samples") {
		t.Fatalf("convert: %v\n%s", err, res)
	}
}

func TestIndexWithAGivenSchema(t *testing.T) {
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "a.csv"), []byte("id,score\n1,2\n3,4\n"), 0o600)
	write := func(name, content string) string {
		p := filepath.Join(t.TempDir(), name)
		_ = os.WriteFile(p, []byte(content), 0o600)
		return p
	}
	tests := []struct {
		name, schema, want string
	}{
		{"widens ints to floats", `[{"name": "id", "type": "int64"}, {"name": "score", "type": "float64"}]`, "2 samples"},
		{"type too narrow", `[{"name": "id", "type": "bool"}, {"name": "score", "type": "int64"}]`, `a.csv: line 2: column "id" has a int64 value, the given schema says bool`},
		{"other header", `[{"name": "id", "type": "int64"}, {"name": "points", "type": "int64"}]`, `header column 2 is "score", the given schema says "points"`},
		{"unknown type", `[{"name": "id", "type": "int128"}]`, "int128"},
		{"not a list", `{"id": "int64"}`, "want [{"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runCLI(t, "index", "file://"+dir+"/", "--format", "csv", "--dry-run", "--schema", write("s.json", tt.schema))
			got := out
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, tt.want) {
				t.Fatalf("index --schema = %q, want %q", got, tt.want)
			}
		})
	}
}

// A JSON Lines schema file may give nested types, spelled loosely; the
// index holds them as the index spells types. A column of only nulls fits
// any given type.
func TestIndexWithAGivenNestedSchema(t *testing.T) {
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "a.jsonl"), []byte(`{"id": 1, "meta": {"lang": "en", "tags": ["x"]}, "later": null}`+"\n"+`{"id": 2, "meta": null, "later": null}`+"\n"), 0o600)
	schema := filepath.Join(t.TempDir(), "s.json")
	_ = os.WriteFile(schema, []byte(`[{"name": "id", "type": "int64"}, {"name": "meta", "type": "struct< lang: utf8, tags: list<utf8> >"}, {"name": "later", "type": "float64"}]`), 0o600)
	if out, err := runCLI(t, "index", "file://"+dir+"/", "--format", "jsonl", "--schema", schema); err != nil {
		t.Fatalf("index: %v\n%s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(dir, "_shardfeed", "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f indexfile.File
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	want := []indexfile.Field{{Name: "id", Type: "int64"}, {Name: "meta", Type: `struct<"lang":utf8,"tags":list<utf8>>`}, {Name: "later", Type: "float64"}}
	if !reflect.DeepEqual(f.Schema, want) {
		t.Fatalf("schema = %v, want %v", f.Schema, want)
	}
	_ = os.WriteFile(schema, []byte(`[{"name": "meta", "type": "struct<lang: int64>"}]`), 0o600)
	_, err = runCLI(t, "index", "file://"+dir+"/", "--format", "jsonl", "--dry-run", "--schema", schema)
	if err == nil || !strings.Contains(err.Error(), `a.jsonl: line 1: column "meta" has a struct<"lang":utf8,"tags":list<utf8>> value, the given schema says struct<"lang":int64>`) {
		t.Fatalf("a nested field of another type: %v", err)
	}
	_ = os.WriteFile(schema, []byte(`[{"name": "meta", "type": "struct<lang int64>"}]`), 0o600)
	_, err = runCLI(t, "index", "file://"+dir+"/", "--format", "jsonl", "--dry-run", "--schema", schema)
	if err == nil || !strings.Contains(err.Error(), `column "meta": type "struct<lang int64>": at byte 12: want : after struct field "lang"`) {
		t.Fatalf("a type that does not parse: %v", err)
	}
}

// plan of a folder that grew since it was indexed plans the index as it
// is and says what it does not read, with the command that indexes the
// folder again; after that command, the plan reads it all and says
// nothing.
func TestPlanSaysASourceChangedSinceItWasIndexed(t *testing.T) {
	dir := t.TempDir()
	rows := func(key string, from, n int) {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "{\"id\": %d}\n", from+i)
		}
		if err := os.WriteFile(filepath.Join(dir, key), []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rows("part-0.jsonl", 0, 800)
	manifest := filepath.Join(dir, "ds.yaml")
	_ = os.WriteFile(manifest, []byte(fmt.Sprintf(`apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {name: grown}
spec:
  streams:
    - name: text
      format: jsonl
      source: {uri: "file://%s/"}
  numSplits: 4
  globalBatchSize: 8
`, dir)), 0o600)
	if out, err := runCLI(t, "index", "-f", manifest); err != nil {
		t.Fatalf("index: %v\n%s", err, out)
	}
	planned := func() (int, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		cmd := newRootCommand()
		cmd.SetOut(&stdout)
		cmd.SetErr(&stderr)
		cmd.SetArgs([]string{"plan", "-f", manifest, "--ids", "--world-size", "1"})
		if err := cmd.Execute(); err != nil {
			t.Fatalf("plan: %v\n%s", err, stderr.String())
		}
		n := 0
		for _, l := range readIDs(t, stdout.String()) {
			n += len(l.IDs)
		}
		return n, stderr.String()
	}
	if n, said := planned(); n != 800 || said != "" {
		t.Fatalf("as indexed: %d ids, said %q", n, said)
	}
	rows("part-1.jsonl", 800, 200)
	n, said := planned()
	want := fmt.Sprintf(`warning: stream "text": its source changed since it was indexed: 1 object added (part-1.jsonl).`+
		` The plan is of the index as it was written: it reads no object added since, and a shard of an object removed or changed fails its read;`+
		` to read the source as it is now, index it again (shardfeed index -f %s --stream text) and start a new job`+"\n", manifest)
	if n != 800 || said != want {
		t.Fatalf("grown: %d ids, said\n%s\nwant\n%s", n, said, want)
	}
	if out, err := runCLI(t, "index", "-f", manifest, "--stream", "text"); err != nil {
		t.Fatalf("index again: %v\n%s", err, out)
	}
	if n, said := planned(); n != 1000 || said != "" {
		t.Fatalf("indexed again: %d ids, said %q", n, said)
	}
}

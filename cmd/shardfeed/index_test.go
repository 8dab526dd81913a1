package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/sampledata"
)

// jsonLines writes n records {"x": i} and then last into dir/part-0.jsonl.
func jsonLines(t *testing.T, dir string, n int, last string) {
	t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "{\"x\": %d}\n", i)
	}
	b.WriteString(last + "\n")
	if err := os.WriteFile(filepath.Join(dir, "part-0.jsonl"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The first-hour traps 1 and 2, as a new user meets them on a folder of
// JSON Lines: index, index again, convert; a late float widens the schema;
// a given schema that cannot hold it names the file and line.
func TestIndexOnJSONLinesRunsTwiceCoversEveryRecordAndConvertsAfter(t *testing.T) {
	dir := t.TempDir()
	jsonLines(t, dir, 3000, `{"x": 1.5}`)
	src := "file://" + dir + "/"
	for run := 1; run <= 2; run++ {
		if out, err := runCLI(t, "index", src, "--format", "jsonl"); err != nil {
			t.Fatalf("index, run %d (the second reads its own index.json as data on the old code): %v\n%s", run, err, out)
		}
	}
	fh, err := os.Open(filepath.Join(dir, indexfile.Dir, indexfile.FileName))
	if err != nil {
		t.Fatal(err)
	}
	layout, err := index.ReadLayout(fh)
	_ = fh.Close()
	if err != nil {
		t.Fatal(err)
	}
	f := layout.File
	if f == nil || len(f.Schema) != 1 || f.Schema[0].Type != "float64" || layout.Index.Samples() != 3001 {
		t.Fatalf("index: schema %+v; want 3001 samples and x float64 (the float is record 3001)", f)
	}
	out := t.TempDir()
	res, err := runCLI(t, "convert", src, "--from", "jsonl", "--to", "parquet", "--out", "file://"+out+"/")
	if err != nil || !strings.Contains(res, "3001 samples") {
		t.Fatalf("convert after index: %v\n%s", err, res)
	}

	// Trap 6: what convert and index write is readable by others, and a
	// second convert into the same output neither mixes stale shards with
	// the new ones nor deletes anything unasked.
	for _, p := range []string{filepath.Join(dir, indexfile.Dir, indexfile.FileName), filepath.Join(out, indexfile.Dir, indexfile.FileName)} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v (%v), want 0644", p, fi.Mode().Perm(), err)
		}
	}
	res, err = runCLI(t, "convert", src, "--from", "jsonl", "--to", "mds", "--out", "file://"+out+"/")
	if err == nil || !strings.Contains(err.Error(), "already holds") || !strings.Contains(err.Error(), "--overwrite") {
		t.Fatalf("convert into a non-empty output: %v\n%s", err, res)
	}
	if _, err := os.Stat(filepath.Join(out, indexfile.Dir, indexfile.FileName)); err != nil {
		t.Fatalf("the refused convert touched the output: %v", err)
	}
	res, err = runCLI(t, "convert", src, "--from", "jsonl", "--to", "mds", "--out", "file://"+out+"/", "--overwrite")
	if err != nil || !strings.Contains(res, "3001 samples") {
		t.Fatalf("convert --overwrite: %v\n%s", err, res)
	}
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".parquet") {
			t.Errorf("a stale Parquet shard %s stayed beside the MDS ones", e.Name())
		}
	}
	if _, err := runCLI(t, "convert", src, "--from", "jsonl", "--out", src+"mds/", "--overwrite"); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Errorf("convert into the source's own prefix: %v, want a refusal", err)
	}

	schema := filepath.Join(t.TempDir(), "schema.json")
	b, _ := json.Marshal([]indexfile.Field{{Name: "x", Type: "int64"}})
	if err := os.WriteFile(schema, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{
		{"index", src, "--format", "jsonl", "--schema", schema},
		{"convert", src, "--from", "jsonl", "--to", "mds", "--out", "file://" + t.TempDir() + "/", "--schema", schema},
	} {
		res, err := runCLI(t, cmd...)
		if err == nil || !strings.Contains(err.Error(), `part-0.jsonl: line 3001: column "x" has a float64 value, the given schema says int64`) {
			t.Errorf("%s with an int64 schema: %v\n%s", cmd[0], err, res)
		}
	}
}

// Trap 6: an unreachable store printed nothing for two minutes. Each retry
// is logged with its cause, and --store-timeout bounds the wait.
func TestAnUnreachableStoreIsLoggedAtEachRetryAndGivesUpAtTheTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there now: connections are refused
	dir := t.TempDir()
	creds := map[string]string{"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}
	for name, v := range creds {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err := runCLI(t, "index", "s3://data/web/", "--format", "parquet", "--endpoint", "http://"+addr, "--insecure",
		"--credentials-dir", dir, "--store-timeout", "2s")
	if err == nil || !strings.Contains(err.Error(), "gave up after") {
		t.Fatalf("index of an unreachable store: %v, want it to give up", err)
	}
	if !strings.Contains(out, "A store request failed; retrying") || !strings.Contains(out, "connection refused") ||
		!strings.Contains(out, "--store-timeout") {
		t.Fatalf("no retry logged with its cause:\n%s", out)
	}
	if _, err := runCLI(t, "index", "s3://data/web/", "--format", "parquet", "--store-timeout", "0s"); err == nil ||
		!strings.Contains(err.Error(), "--store-timeout=0s") {
		t.Errorf("--store-timeout 0s: %v, want a refusal", err)
	}
}

// Trap 6: plan and simulate accepted streams that serve refuses (columns
// of types no promotion joins, a misspelt column); they check the same way.
func TestPlanAndSimulateRefuseWhatServeRefuses(t *testing.T) {
	dir := t.TempDir()
	for name, line := range map[string]string{"ints": `{"x": %d}`, "words": `{"x": "w%d"}`} {
		sub := filepath.Join(dir, name)
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for i := range 40 {
			fmt.Fprintf(&b, line+"\n", i)
		}
		if err := os.WriteFile(filepath.Join(sub, "part-0.jsonl"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := runCLI(t, "index", "file://"+sub+"/", "--format", "jsonl"); err != nil {
			t.Fatalf("index %s: %v\n%s", name, err, out)
		}
	}
	manifest := func(second, columns string) string {
		p := filepath.Join(t.TempDir(), "dataset.yaml")
		m := fmt.Sprintf(`apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {name: mixed}
spec:
  streams:
    - name: a
      format: jsonl
      source: {uri: "file://%s/ints/"}
%s    - name: b
      format: jsonl
      source: {uri: "file://%s/%s/"}
  numSplits: 2
  globalBatchSize: 4
`, dir, columns, dir, second)
		if err := os.WriteFile(p, []byte(m), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, second, columns, want string
	}{
		{"types no promotion joins", "words", "", `column "x" is int64 in stream "a" and utf8 in stream "b"`},
		{"a misspelt column", "ints", "      columns: [idd]\n", `stream "a" has no column "idd"`},
	}
	for _, tt := range tests {
		path := manifest(tt.second, tt.columns)
		for _, cmd := range [][]string{{"plan", "-f", path}, {"simulate", "-f", path, "--pods", "2"}} {
			out, err := runCLI(t, cmd...)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "serve would refuse") {
				t.Errorf("%s, %s: %v, want %q\n%s", tt.name, cmd[0], err, tt.want, out)
			}
		}
	}
	if out, err := runCLI(t, "plan", "-f", manifest("ints", "")); err != nil {
		t.Fatalf("two streams of one schema: %v\n%s", err, out)
	}
}

// index -f takes the stream's URI, format and source from the manifest,
// and refuses what is ambiguous, naming the fix.
func TestIndexAStreamOfAManifest(t *testing.T) {
	dir := t.TempDir()
	for _, s := range []string{"a", "b"} {
		if err := os.MkdirAll(filepath.Join(dir, s), 0o755); err != nil {
			t.Fatal(err)
		}
		jsonLines(t, filepath.Join(dir, s), 10, `{"x": 10}`)
	}
	writeManifest := func(name string, streams ...string) string {
		path := filepath.Join(dir, name)
		m := "apiVersion: data.shardfeed.io/v1alpha1\nkind: TrainingDataset\nmetadata: {name: d}\nspec:\n  numSplits: 1\n  globalBatchSize: 1\n  streams:\n"
		for _, s := range streams {
			m += "  - " + s + "\n"
		}
		if err := os.WriteFile(path, []byte(m), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	one := writeManifest("one.yaml", "{name: web, format: mds, source: {uri: m/}}", "{name: a, format: jsonl, source: {uri: a/}}")
	two := writeManifest("two.yaml", "{name: a, format: jsonl, source: {uri: a/}}", "{name: b, format: jsonl, source: {uri: b/}}")
	mds := writeManifest("mds.yaml", "{name: web, source: {uri: m/}}")

	if out, err := runCLI(t, "index", "-f", one); err != nil || !strings.Contains(out, "11 samples") {
		t.Fatalf("index -f with one stream to index: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "a", indexfile.Dir, indexfile.FileName)); err != nil {
		t.Fatalf("index -f wrote no index beside the stream's data (paths are relative to the manifest): %v", err)
	}
	if out, err := runCLI(t, "index", "-f", two, "--stream", "b"); err != nil || !strings.Contains(out, filepath.Join(dir, "b")) {
		t.Fatalf("index -f --stream b: %v\n%s", err, out)
	}
	for _, tt := range []struct {
		args []string
		says string
	}{
		{[]string{"-f", two}, "several streams to index (a, b): name one with --stream"},
		{[]string{"-f", two, "--stream", "c"}, `has no stream "c": its streams are a, b`},
		{[]string{"-f", one, "--stream", "web"}, `stream "web" is MDS, which keeps its own index`},
		{[]string{"-f", mds}, "every stream of " + mds + " is MDS"},
		{[]string{"-f", one, "--format", "csv"}, "--format comes from the manifest's stream"},
		{[]string{"-f", one, "--endpoint", "http://x:9000"}, "--endpoint comes from the manifest's stream"},
		{[]string{"-f", one, "file://" + dir + "/a/"}, "give a URI or -f MANIFEST, not both"},
		{[]string{}, "give the stream's URI"},
	} {
		if out, err := runCLI(t, append([]string{"index"}, tt.args...)...); err == nil || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("index %v: %v\n%s\nwant an error saying %q", tt.args, err, out, tt.says)
		}
	}
}

func TestPartitionFlags(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags partitionFlags
		kind  datav1alpha1.ShardFormat
		want  string // the options, or the error
	}{
		{"none", partitionFlags{}, "parquet", "<nil>"},
		{"a selection", partitionFlags{hive: true, selection: "a == 1"}, "orc", `&{a == 1 []}`},
		{"given types", partitionFlags{hive: true, cols: "date:utf8, bucket:int32"}, "parquet", `&{ [{date utf8} {bucket int32}]}`},
		{"a selection without --hive", partitionFlags{selection: "a == 1"}, "parquet", "add --hive"},
		{"jsonl", partitionFlags{hive: true}, "jsonl", "not jsonl"},
		{"a bad type", partitionFlags{hive: true, cols: "date:date"}, "parquet", `--partition-columns "date:date": each column is name:type`},
		{"no type", partitionFlags{hive: true, cols: "date"}, "parquet", "each column is name:type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts, err := tc.flags.options(tc.kind)
			got := fmt.Sprint(opts)
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("options = %s, want %s", got, tc.want)
			}
		})
	}
}

// The fix-it command printed for a missing or stale filter selection once
// dropped the index's --shard-size: run as printed, it re-sharded a JSON
// Lines stream (39 shards to 3), which changed every fingerprint over the
// stream. It now writes the selection alone, over the index already there.
func TestTheFilterFixItCommandKeepsTheIndex(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "web")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	jsonLines(t, data, 3000, `{"x": 3000}`)
	if out, err := runCLI(t, "index", "file://"+data+"/", "--format", "jsonl", "--shard-size", "1KiB"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	before, err := os.ReadFile(filepath.Join(data, indexfile.Dir, indexfile.FileName))
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(dir, "d.yaml")
	if err := os.WriteFile(manifest, []byte("apiVersion: data.shardfeed.io/v1alpha1\nkind: TrainingDataset\nmetadata: {name: d}\nspec:\n"+
		"  numSplits: 2\n  globalBatchSize: 2\n  streams:\n  - {name: web, format: jsonl, filter: 'x % 2 == 0', source: {uri: web/}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = runCLI(t, "plan", "-f", manifest)
	if err == nil || !strings.Contains(err.Error(), "write it with: shardfeed index ") {
		t.Fatalf("plan without the selection: %v, want the command that writes it", err)
	}
	printed, _, _ := strings.Cut(err.Error()[strings.Index(err.Error(), "write it with: ")+len("write it with: "):], "\n")
	args := shellWords(t, strings.TrimPrefix(printed, "shardfeed "))
	if out, err := runCLI(t, args...); err != nil {
		t.Fatalf("the printed command %q: %v\n%s", printed, err, out)
	}
	after, err := os.ReadFile(filepath.Join(data, indexfile.Dir, indexfile.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Fatalf("the printed command %q rewrote the stream's index", printed)
	}
	if out, err := runCLI(t, "plan", "-f", manifest); err != nil || !strings.Contains(out, "1501") {
		t.Fatalf("plan after the printed command: %v\n%s (want the 1501 matching samples)", err, out)
	}
	if _, err := runCLI(t, "index", "file://"+data+"/", "--selection-only"); err == nil || !strings.Contains(err.Error(), "give --filter") {
		t.Fatalf("--selection-only without a filter: %v", err)
	}
}

// shellWords splits a command as a POSIX shell would, for the single
// quotes the fix-it commands use.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	var cur strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quoted && c == '\'':
			quoted = false
		case quoted:
			cur.WriteByte(c)
		case c == '\'':
			quoted, inWord = true, true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case c == ' ':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unbalanced quotes in %q", s)
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// An empty part file (Spark leaves them) is no shard, as an empty Parquet
// file is; it failed the whole stream's index ("no JSON records",
// "reading the header row: EOF").
func TestAnEmptyPartFileIsNoShard(t *testing.T) {
	for _, tt := range []struct {
		format, full, header string
	}{
		{"jsonl", "{\"a\": 1}\n{\"a\": 2}\n", ""},
		{"csv", "a,b\n1,2\n3,4\n", ""},
		{"csv", "a,b\n1,2\n3,4\n", "a,b\n"},
	} {
		dir := t.TempDir()
		ext := "." + tt.format
		if err := os.WriteFile(filepath.Join(dir, "part-0"+ext), []byte(tt.full), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "part-1"+ext), []byte(tt.header), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := runCLI(t, "index", "file://"+dir+"/", "--format", tt.format)
		if err != nil || !strings.Contains(out, "1 shards, 2 samples") {
			t.Errorf("%s with an empty part (%q): %v\n%s", tt.format, tt.header, err, out)
		}
	}
}

// A tree of key=value folders indexed without --hive: the index is made
// (the files are readable so), and a note says the values are not columns
// and how to make them so.
func TestAHiveTreeIndexedWithoutHiveGetsAHint(t *testing.T) {
	dir := t.TempDir()
	for _, part := range []string{"year=2024/lang=en", "year=2025/lang=de"} {
		if err := os.MkdirAll(filepath.Join(dir, part), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, part, "part-0.jsonl"), []byte("{\"a\": 1}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := runCLI(t, "index", "file://"+dir+"/", "--format", "jsonl")
	if err != nil || !strings.Contains(out, "key=value folders (year, lang)") || !strings.Contains(out, "convert the tree to Parquet and index that with --hive") {
		t.Errorf("no hint at --hive: %v\n%s", err, out)
	}
	pq := t.TempDir()
	if err := sampledata.Parquet(context.Background(), filepath.Join(pq, "day=1"), "p", 10, 10, 10); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(pq, "day=1", indexfile.Dir)); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI(t, "index", "file://"+pq+"/", "--format", "parquet"); err != nil || !strings.Contains(out, "(day): their values are not columns of this index; index with --hive") {
		t.Errorf("no hint at --hive for Parquet: %v\n%s", err, out)
	}
	flat := t.TempDir()
	if err := os.WriteFile(filepath.Join(flat, "part-0.jsonl"), []byte("{\"a\": 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI(t, "index", "file://"+flat+"/", "--format", "jsonl"); err != nil || strings.Contains(out, "--hive") {
		t.Errorf("a flat tree was hinted at --hive: %v\n%s", err, out)
	}
}

// A packed dataset whose packs were not counted is refused with the
// command that counts them over the index already there; once run, plan
// shows the packing and each pack's documents, and simulate what a
// sample is. Packing flags are checked as the CRD checks them.
func TestThePacksFixItCommandCountsThePacks(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "web")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := range 400 {
		toks := make([]string, 1+i%37)
		for j := range toks {
			toks[j] = fmt.Sprint(i*100 + j)
		}
		fmt.Fprintf(&b, "{\"id\": %d, \"tokens\": [%s]}\n", i, strings.Join(toks, ", "))
	}
	if err := os.WriteFile(filepath.Join(data, "part-0.jsonl"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI(t, "index", "file://"+data+"/", "--format", "jsonl", "--shard-size", "2KiB"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	manifest := filepath.Join(dir, "d.yaml")
	if err := os.WriteFile(manifest, []byte("apiVersion: data.shardfeed.io/v1alpha1\nkind: TrainingDataset\nmetadata: {name: d}\nspec:\n"+
		"  numSplits: 2\n  globalBatchSize: 4\n  streams:\n  - {name: web, format: jsonl, source: {uri: web/}}\n"+
		"  packing: {column: tokens, sequenceLength: 40, window: 16}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := runCLI(t, "plan", "-f", manifest)
	if err == nil || !strings.Contains(err.Error(), "count them with: shardfeed index ") {
		t.Fatalf("plan without the packs: %v, want the command that counts them", err)
	}
	printed, _, _ := strings.Cut(err.Error()[strings.Index(err.Error(), "count them with: ")+len("count them with: "):], "\n")
	mustHave(t, printed, "--selection-only", "--lengths 'tokens'", "--pack-length 40", "--pack-window 16")
	if out, err := runCLI(t, shellWords(t, strings.TrimPrefix(printed, "shardfeed "))...); err != nil || !strings.Contains(out, "400 documents") {
		t.Fatalf("the printed command %q: %v\n%s", printed, err, out)
	}
	out, err := runCLI(t, "plan", "-f", manifest)
	if err != nil {
		t.Fatal(err)
	}
	mustHave(t, out, "(version 4,", "packing  tokens: bestFit length=40 window=16 overlong=cut (a sample is a pack)", "web: 400 documents in ")
	ids, err := runCLI(t, "plan", "-f", manifest, "--ids", "--world-size", "2", "--steps", "0:1")
	if err != nil {
		t.Fatal(err)
	}
	mustHave(t, ids, `"docs":[[`)
	sim, err := runCLI(t, "simulate", "-f", manifest, "--pods", "2", "--bandwidth", "100MB/s", "--step-time", "10ms")
	if err != nil {
		t.Fatal(err)
	}
	mustHave(t, sim, "a sample is a pack; 400 documents in ")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--pack-length", "40"}, "give --lengths COLUMN"},
		{[]string{"--lengths", "tokens", "--pack-length", "40", "--pack-method", "worstFit"}, "--pack-method is bestFit, firstFit or concatenate"},
		{[]string{"--lengths", "tokens", "--pack-length", "40", "--pack-window", "0"}, "--pack-window must be 1 to 65536"},
		{[]string{"--lengths", "tokens", "--pack-length", "2000000"}, "--pack-length must be 1 to 1048576"},
		{[]string{"--lengths", "tokens", "--pack-length", "40", "--pack-overlong", "keep"}, "--pack-overlong is cut or drop"},
	} {
		_, err := runCLI(t, append([]string{"index", "file://" + data + "/", "--format", "jsonl", "--selection-only"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("index %v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

func mustHave(t *testing.T, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%q does not say %q", s, sub)
		}
	}
}

func TestProgressRateSaysHowFastAndWhen(t *testing.T) {
	tests := []struct {
		done, total int
		took        time.Duration
		want        string
	}{
		{0, 100, 5 * time.Second, ""},
		{10, 100, 500 * time.Millisecond, ""},
		{10, 100, 2 * time.Second, " (5/s, 18s left)"},
		{250, 1000, 10 * time.Second, " (25/s, 30s left)"},
		{1000, 1000, 40 * time.Second, " (25/s, 40s)"},
	}
	for _, tt := range tests {
		if got := progressRate(tt.done, tt.total, tt.took); got != tt.want {
			t.Errorf("progressRate(%d, %d, %s) = %q, want %q", tt.done, tt.total, tt.took, got, tt.want)
		}
	}
}

// A format's own options (the registry's) are flags of index and convert,
// each refused for another format with the same words as ever, and with
// -f they come from the manifest's stream: a section of another format's
// is refused as its flag is.
func TestFormatsOwnOptionsAreFlagsRefusedForOtherFormats(t *testing.T) {
	dir := t.TempDir()
	jsonLines(t, dir, 3, `{"x": 3}`)
	src := "file://" + dir + "/"
	manifest := func(section string) string {
		path := filepath.Join(t.TempDir(), "d.yaml")
		m := "apiVersion: data.shardfeed.io/v1alpha1\nkind: TrainingDataset\nmetadata: {name: d}\nspec:\n  numSplits: 1\n  globalBatchSize: 1\n  streams:\n" +
			"  - {name: a, format: jsonl, source: {uri: " + src + "}" + section + "}\n"
		if err := os.WriteFile(path, []byte(m), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"index", src, "--format", "jsonl", "--unit", "sequence"}, "--unit is for --format megatron, not jsonl"},
		{[]string{"index", src, "--format", "jsonl", "--block-size", "64"},
			"--block-size 64 is for --format litdata (a dataset written with LitData's TokensLoader), a number of tokens of 1 or more"},
		{[]string{"index", src, "--format", "litdata", "--block-size", "-1"},
			"--block-size -1 is for --format litdata (a dataset written with LitData's TokensLoader), a number of tokens of 1 or more"},
		{[]string{"index", src, "--format", "jsonl", "--split", "train"},
			"--split is for --format huggingface (a DatasetDict's or a datasets cache's split), not jsonl"},
		{[]string{"convert", src, "--from", "jsonl", "--out", "file://" + t.TempDir() + "/", "--unit", "sequence"}, "--unit is for --from megatron, not jsonl"},
		{[]string{"convert", src, "--from", "jsonl", "--out", "file://" + t.TempDir() + "/", "--block-size", "64"},
			"--block-size 64 is for --from litdata (a dataset written with LitData's TokensLoader), a number of tokens of 1 or more"},
		{[]string{"index", "-f", manifest(""), "--unit", "sequence"}, "--unit comes from the manifest's stream with -f"},
		{[]string{"index", "-f", manifest(""), "--split", "train"}, "--split comes from the manifest's stream with -f"},
		{[]string{"index", "-f", manifest(", megatron: {unit: sequence}")}, "--unit is for --format megatron, not jsonl"},
		{[]string{"index", "-f", manifest(", litdata: {blockSize: 64}")}, "--block-size 64 is for --format litdata"},
		{[]string{"index", "-f", manifest(", huggingface: {split: train}")}, "--split is for --format huggingface"},
	} {
		if out, err := runCLI(t, c.args...); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%v: %v\n%s\nwant an error saying %q", c.args, err, out, c.says)
		}
	}
	out, err := runCLI(t, "index", "--help")
	if err != nil {
		t.Fatal(err)
	}
	help := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"--unit string for megatron: what a sample is", "--block-size int for litdata:", "--split string for huggingface: the split to index",
		"Its own option: --unit (spec.streams[].megatron.unit).", "With --format webdataset, URI holds WebDataset tar shards"} {
		if !strings.Contains(help, want) {
			t.Errorf("index --help does not say %q:\n%s", want, help)
		}
	}
}

// An indexing Job's pods check every request against the platform's
// endpoints, given as flags or, as the operator gives them, in the
// environment a sidecar's are in; a laptop's index checks none.
func TestIndexChecksThePlatformsEndpoints(t *testing.T) {
	dir := t.TempDir()
	manifest := filepath.Join(dir, "dataset.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {name: d}
spec:
  streams:
  - name: s
    format: jsonl
    source: {uri: "s3://bucket/p/", endpoint: "http://127.0.0.1:9", insecure: true}
  numSplits: 2
  globalBatchSize: 4
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "a")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "b")
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"flags", nil, []string{"--allowed-endpoints", "minio.storage:9000"}},
		{"the operator's environment", map[string]string{sidecarconfig.EnvAllowedEndpoints: "minio.storage:9000", sidecarconfig.EnvAllowCloudEndpoints: "true"}, nil},
		{"the clouds' alone", map[string]string{sidecarconfig.EnvAllowCloudEndpoints: "true"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			out, err := runCLI(t, append([]string{"index", "-f", manifest, "--stream", "s"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), `"127.0.0.1:9" is a loopback address`) {
				t.Fatalf("an endpoint outside the platform's was not refused: %v\n%s", err, out)
			}
		})
	}
	if _, err := runCLI(t, "index", "s3://bucket/p/", "--identity-dir", dir); err == nil || !strings.Contains(err.Error(), "--identity-dir goes with -f") {
		t.Errorf("--identity-dir without a manifest: %v", err)
	}
}

func TestAWorkloadIdentityStreamReadsWithItsProjectedToken(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "s"), []byte("a-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := datav1alpha1.Stream{Name: "s", Source: datav1alpha1.Source{URI: "s3://bucket/p/",
		WorkloadIdentity: &datav1alpha1.WorkloadIdentity{ServiceAccountName: "reader", RoleARN: "arn:aws:iam::123456789012:role/reader"}}}
	flags := sourceFlags{identityDir: dir}
	var src store.Source
	flags.policy(&src, &s)
	if src.Identity == nil || src.Identity.RoleARN != s.Source.WorkloadIdentity.RoleARN || src.Identity.Audience != "sts.amazonaws.com" {
		t.Fatalf("identity %+v: want the stream's role, for STS", src.Identity)
	}
	if token, err := src.Identity.Token(context.Background()); err != nil || token != "a-token" {
		t.Errorf("the token read is %q, %v: want the file named after the stream", token, err)
	}
	plain := datav1alpha1.Stream{Name: "k", Source: datav1alpha1.Source{URI: "s3://bucket/p/"}}
	var keys store.Source
	flags.policy(&keys, &plain)
	if keys.Identity != nil || keys.Endpoints != nil {
		t.Errorf("a stream read with keys, no policy given: %+v", keys)
	}
}

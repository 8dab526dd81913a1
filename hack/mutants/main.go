// Command mutants proves that the parsers' unit tests bite: for each
// mutant below it breaks one decoding step of one parser (through go
// test -overlay: the working tree is never edited), runs that package's
// unit tests, and fails unless they fail. A mutant whose text is no longer
// in its file fails too: move it to the step's new form.
//
// Usage: go run ./hack/mutants [-run REGEXP]   (make test-mutants)
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// A mutant replaces from, which must occur once in file, with to.
type mutant struct {
	name     string // parser/step
	file     string
	from, to string
}

var mutants = []mutant{
	{"megatron/sequence-lengths", "sidecar/format/megatron/megatron.go",
		"n := int32(binary.LittleEndian.Uint32(lens[4*s:]))", "n := int32(binary.BigEndian.Uint32(lens[4*s:]))"},
	{"litdata/arrow-footer", "sidecar/format/litdata/decode.go",
		"size := int(binary.LittleEndian.Uint32(chunk[n-12:]))", "size := int(binary.LittleEndian.Uint32(chunk[n-12:])) - 1"},
	{"litdata/item-sizes", "sidecar/format/litdata/decode.go",
		"sizes[j] = int(binary.LittleEndian.Uint32(data[4*j:]))", "sizes[j] = int(binary.LittleEndian.Uint32(data[4*j:])) + j%2"},
	{"webdataset/octal-fields", "sidecar/format/webdataset/tar.go",
		"return strconv.ParseInt(s, 8, 64)", "return strconv.ParseInt(s, 10, 64)"},
	{"huggingface/shard-batches", "sidecar/format/huggingface/huggingface.go",
		"e.Length = batches[i].Offset + batches[i].Length - first.Offset", "e.Length = batches[i].Offset - first.Offset"},
	{"mds/int16", "sidecar/format/mds/encoding.go",
		"bb.UnsafeAppend(int16(binary.LittleEndian.Uint16(data[2*i:])))", "bb.UnsafeAppend(int16(binary.BigEndian.Uint16(data[2*i:])))"},
	{"lance/bitpacking", "sidecar/format/lance/lancefile/bitpack.go",
		"out[flOrder[row/8]*16+(row%8)*128+lane] = v & mask", "out[flOrder[row/8]*16+(row%8)*128+lane] = v & (mask >> 1)"},
	{"lance/fsst-symbols", "sidecar/format/lance/lancefile/fsst.go",
		"out.data = append(out.data, byte(s>>(8*j)))", "out.data = append(out.data, byte(s>>(8*(int(l)-1-j))))"},
	{"lance/deletion-rows", "sidecar/format/lance/lancetable/deletion.go",
		"out = append(out, col.Values()...)", "out = append(out, col.Values()[min(1, col.Len()):]...)"},
	{"orc/zigzag", "sidecar/format/orc/orcfile/rle.go",
		"func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }", "func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) + int64(u&2>>1) }"},
	{"orc/patched-base-sign", "sidecar/format/orc/orcfile/rle.go",
		"base = -base", "base = base + 0"},
	{"orc/delta-falling", "sidecar/format/orc/orcfile/rle.go",
		"dst[i] = dst[i-1] - dst[i]", "dst[i] = dst[i-1] + dst[i]"},
	{"orc/chunk-header", "sidecar/format/orc/orcfile/compress.go",
		"n, original := h>>1, h&1 == 1", "n, original := h>>1, h&1 == 0"},
	{"tokenizer/bpe-ties", "sidecar/tokenizer/bpe.go",
		"return h[a].pos < h[b].pos", "return h[a].pos > h[b].pos"},
	{"tokenizer/unigram-best", "sidecar/tokenizer/unigram.go",
		"if score := here + m.scores[id]; best[end].start < 0 || score > best[end].score {",
		"if score := here + m.scores[id]; best[end].start < 0 || score >= best[end].score {"},
	{"chat/trim-blocks", "sidecar/chat/lex.go",
		`trimNext = open != "{{"`, `trimNext = false`},
}

func main() {
	run := flag.String("run", "", "only the mutants whose name matches this regular expression")
	flag.Parse()
	if err := runMutants(*run); err != nil {
		fmt.Fprintf(os.Stderr, "mutants: %v\n", err)
		os.Exit(1)
	}
}

func runMutants(run string) error {
	only, err := regexp.Compile(run)
	if err != nil {
		return fmt.Errorf("-run: %w", err)
	}
	tmp, err := os.MkdirTemp("", "mutants-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	survived := 0
	clean := map[string]bool{} // packages whose tests pass unmutated
	for i, m := range mutants {
		if !only.MatchString(m.name) {
			continue
		}
		// A package whose tests already fail would kill every mutant.
		if pkg := "./" + filepath.Dir(m.file) + "/"; !clean[pkg] {
			if out, err := exec.Command("go", "test", "-count=1", pkg).CombinedOutput(); err != nil {
				return fmt.Errorf("the unit tests of %s fail without a mutant; fix them first:\n%s", pkg, out)
			}
			clean[pkg] = true
		}
		start := time.Now()
		killed, detail, err := try(tmp, i, m)
		switch {
		case err != nil:
			return fmt.Errorf("mutant %s: %w", m.name, err)
		case killed:
			fmt.Printf("mutants: %-32s killed in %4.1f s by %s\n", m.name, time.Since(start).Seconds(), detail)
		default:
			survived++
			fmt.Printf("mutants: %-32s SURVIVED: the unit tests of %s pass with %q in place of %q: they do not check this step\n",
				m.name, filepath.Dir(m.file), m.to, m.from)
		}
	}
	if survived > 0 {
		return fmt.Errorf("%d mutants survived", survived)
	}
	return nil
}

// try runs the package's unit tests with the mutant in place and says
// whether they failed, and the first failing test.
func try(tmp string, i int, m mutant) (bool, string, error) {
	src, err := os.ReadFile(m.file)
	if err != nil {
		return false, "", err
	}
	if n := bytes.Count(src, []byte(m.from)); n != 1 {
		return false, "", fmt.Errorf("%q occurs %d times in %s, want once: the step changed; move the mutant to its new form", m.from, n, m.file)
	}
	mutated := filepath.Join(tmp, fmt.Sprintf("%d-%s", i, filepath.Base(m.file)))
	if err := os.WriteFile(mutated, bytes.Replace(src, []byte(m.from), []byte(m.to), 1), 0o600); err != nil {
		return false, "", err
	}
	abs, err := filepath.Abs(m.file)
	if err != nil {
		return false, "", err
	}
	overlay, err := json.Marshal(map[string]any{"Replace": map[string]string{abs: mutated}})
	if err != nil {
		return false, "", err
	}
	ov := filepath.Join(tmp, fmt.Sprintf("%d-overlay.json", i))
	if err := os.WriteFile(ov, overlay, 0o600); err != nil {
		return false, "", err
	}
	cmd := exec.Command("go", "test", "-count=1", "-overlay", ov, "./"+filepath.Dir(m.file)+"/")
	out, err := cmd.CombinedOutput()
	if err == nil {
		return false, "", nil
	}
	if bytes.Contains(out, []byte("[build failed]")) || bytes.Contains(out, []byte("[setup failed]")) {
		return false, "", fmt.Errorf("the mutant does not build:\n%s", out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "--- FAIL: ") {
			return true, strings.Fields(t)[2], nil
		}
	}
	return true, "a failing run", nil
}

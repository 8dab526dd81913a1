// Command tokbench measures sidecar/tokenizer on a corpus for make bench
// (hack/bench/tokenizer_speed.py): each text of a JSON-lines corpus ({"text":
// …}) encoded with a tokenizer.json, on one core and then on every core,
// and the rate printed as JSON.
//
//	go run ./hack/tokbench -tokenizer gpt2.json -corpus corpus.jsonl [-runs 3]
//	go run ./hack/tokbench -tokenizer gpt2.json -corpus corpus.jsonl -ids
//
// With -ids it measures nothing: it prints each text's ids, with and
// without the special tokens, as a JSON line [[...], [...]] (to compare
// with tokenizers' own by hand).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/shardfeed/shardfeed/sidecar/tokenizer"
)

type result struct {
	Cores  int       `json:"cores"`
	MBps   []float64 `json:"mb_per_s"`
	Tokens []float64 `json:"tokens_per_s"`
}

func main() {
	file := flag.String("tokenizer", "", "a tokenizer.json")
	corpus := flag.String("corpus", "", "JSON lines of {\"text\": …}")
	runs := flag.Int("runs", 3, "runs of each measurement")
	ids := flag.Bool("ids", false, "print each text's ids instead of measuring")
	flag.Parse()
	if *ids {
		if err := printIDs(*file, *corpus); err != nil {
			fmt.Fprintln(os.Stderr, "tokbench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*file, *corpus, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "tokbench:", err)
		os.Exit(1)
	}
}

func run(file, corpus string, runs int) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if _, err := tokenizer.Load(data); err != nil {
		return err
	}
	texts, size, err := readCorpus(corpus)
	if err != nil {
		return err
	}
	var out []result
	for _, cores := range []int{1, runtime.NumCPU()} {
		r := result{Cores: cores}
		for range runs {
			// A tokenizer of its own each run: its cache of words starts
			// empty, as a sidecar's does.
			tk, _ := tokenizer.Load(data)
			start := time.Now()
			tokens := encodeAll(tk, texts, cores)
			d := time.Since(start).Seconds()
			r.MBps = append(r.MBps, float64(size)/d/1e6)
			r.Tokens = append(r.Tokens, float64(tokens)/d)
		}
		out = append(out, r)
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

func printIDs(file, corpus string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	tk, err := tokenizer.Load(data)
	if err != nil {
		return err
	}
	texts, _, err := readCorpus(corpus)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(w)
	for _, t := range texts {
		with, without := append([]int32{}, tk.Encode(t, true)...), append([]int32{}, tk.Encode(t, false)...)
		if err := enc.Encode([2][]int32{with, without}); err != nil {
			return err
		}
	}
	return w.Flush()
}

// encodeAll encodes every text on cores goroutines and counts the tokens.
func encodeAll(tk *tokenizer.Tokenizer, texts []string, cores int) int64 {
	var wg sync.WaitGroup
	counts := make([]int64, cores)
	for w := range cores {
		wg.Go(func() {
			for i := w; i < len(texts); i += cores {
				counts[w] += int64(len(tk.Encode(texts[i], true)))
			}
		})
	}
	wg.Wait()
	var n int64
	for _, c := range counts {
		n += c
	}
	return n
}

func readCorpus(path string) ([]string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = f.Close() }()
	var texts []string
	var size int64
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var row struct{ Text string }
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			return nil, 0, err
		}
		texts = append(texts, row.Text)
		size += int64(len(row.Text))
	}
	return texts, size, sc.Err()
}

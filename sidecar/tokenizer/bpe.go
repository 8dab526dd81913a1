package tokenizer

import (
	"container/heap"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"unicode/utf8"
)

// bpe is the BPE model: a word's characters, merged pair by pair in the
// order of the merges' ranks.
type bpe struct {
	vocab map[string]int32
	// merges: the pair of ids, its rank and the id of their merge.
	merges       map[[2]int32]merge
	unk          int32 // -1: none
	fuseUnk      bool
	byteFallback bool
	ignoreMerges bool
	prefix       string // continuing_subword_prefix
	suffix       string // end_of_word_suffix
	// bytes are the ids of <0x00>…<0xFF> (byte_fallback).
	bytes byteTokens

	cache wordCache
}

// wordCache keeps the ids of words already tokenized, in shards of their
// own locks (a lock for all was the bound on two cores), each shard
// cleared when it is full.
type wordCache struct {
	seed   maphash.Seed
	shards [cacheShards]struct {
		mu    sync.Mutex
		words map[string][]int32
	}
}

const cacheShards = 16

func (c *wordCache) shard(word string) int {
	return int(maphash.String(c.seed, word) % cacheShards)
}

func (c *wordCache) get(word string) ([]int32, bool) {
	sh := &c.shards[c.shard(word)]
	sh.mu.Lock()
	ids, ok := sh.words[word]
	sh.mu.Unlock()
	return ids, ok
}

func (c *wordCache) put(word string, ids []int32) {
	sh := &c.shards[c.shard(word)]
	sh.mu.Lock()
	if sh.words == nil || len(sh.words) >= maxCached/cacheShards {
		sh.words = map[string][]int32{}
	}
	sh.words[word] = ids
	sh.mu.Unlock()
}

type merge struct{ rank, id int32 }

// maxCached bounds the words a model keeps tokenized.
const maxCached = 1 << 16

type bpeJSON struct {
	Type                    string          `json:"type"`
	Dropout                 *float64        `json:"dropout"`
	UnkToken                *string         `json:"unk_token"`
	ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	FuseUnk                 bool            `json:"fuse_unk"`
	ByteFallback            bool            `json:"byte_fallback"`
	IgnoreMerges            bool            `json:"ignore_merges"`
	Vocab                   map[string]int  `json:"vocab"`
	Merges                  json.RawMessage `json:"merges"`
}

func newBPE(raw json.RawMessage) (*bpe, error) {
	var j bpeJSON
	if err := strictUnmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("model BPE: %w", err)
	}
	if j.Dropout != nil && *j.Dropout != 0 {
		return nil, fmt.Errorf("model BPE with dropout %g: dropout makes tokenization random, and a plan must be the same every time; set it to null", *j.Dropout)
	}
	m := &bpe{vocab: make(map[string]int32, len(j.Vocab)), unk: -1, fuseUnk: j.FuseUnk, byteFallback: j.ByteFallback, ignoreMerges: j.IgnoreMerges}
	m.cache.seed = maphash.MakeSeed()
	for tok, id := range j.Vocab {
		if id < 0 || id > maxID {
			return nil, fmt.Errorf("model BPE: token %q has id %d, outside [0, %d]", tok, id, maxID)
		}
		m.vocab[tok] = int32(id) //nolint:gosec // bounded above
	}
	if j.UnkToken != nil {
		id, ok := m.vocab[*j.UnkToken]
		if !ok {
			return nil, fmt.Errorf("model BPE: its unk_token %q is not in its vocab", *j.UnkToken)
		}
		m.unk = id
	}
	if j.ContinuingSubwordPrefix != nil {
		m.prefix = *j.ContinuingSubwordPrefix
	}
	if j.EndOfWordSuffix != nil {
		m.suffix = *j.EndOfWordSuffix
	}
	m.bytes = byteTokensOf(m.vocab)
	pairs, err := mergePairs(j.Merges)
	if err != nil {
		return nil, fmt.Errorf("model BPE: %w", err)
	}
	m.merges = make(map[[2]int32]merge, len(pairs))
	prefixLen := len(m.prefix)
	for rank, pr := range pairs {
		a, okA := m.vocab[pr[0]]
		b, okB := m.vocab[pr[1]]
		second := pr[1]
		if prefixLen > 0 && strings.HasPrefix(second, m.prefix) {
			second = second[prefixLen:]
		}
		id, okM := m.vocab[pr[0]+second]
		if !okA || !okB || !okM {
			return nil, fmt.Errorf("merge %d (%q %q) names a token its vocab lacks", rank, pr[0], pr[1])
		}
		// A pair merged twice keeps its last rank, as tokenizers' map does.
		m.merges[[2]int32{a, b}] = merge{rank: int32(rank), id: id} //nolint:gosec // a JSON list's index
	}
	return m, nil
}

// mergePairs reads merges written either way tokenizers writes them:
// "a b" strings, or [a, b] pairs.
func mergePairs(raw json.RawMessage) ([][2]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("merges: %w", err)
	}
	out := make([][2]string, len(list))
	for i, e := range list {
		var s string
		if json.Unmarshal(e, &s) == nil {
			a, b, ok := strings.Cut(s, " ")
			if !ok || a == "" || b == "" {
				return nil, fmt.Errorf("merge %d %q is not two tokens separated by a space", i, s)
			}
			out[i] = [2]string{a, b}
			continue
		}
		var pr []string
		if err := json.Unmarshal(e, &pr); err != nil || len(pr) != 2 {
			return nil, fmt.Errorf("merge %d is neither \"a b\" nor [a, b]", i)
		}
		out[i] = [2]string{pr[0], pr[1]}
	}
	return out, nil
}

// tokenize appends the ids of word (a pre-token) to ids.
func (m *bpe) tokenize(ids []int32, word string) []int32 {
	if word == "" {
		return ids
	}
	if m.ignoreMerges {
		if id, ok := m.vocab[word]; ok {
			return append(ids, id)
		}
	}
	if cached, ok := m.cache.get(word); ok {
		return append(ids, cached...)
	}
	out := m.merge(m.symbols(word))
	if len(word) < 256 {
		m.cache.put(word, out)
	}
	return append(ids, out...)
}

// symbols is word as the ids of its characters (with the subword prefix
// and word suffix where the model has them), unknown ones as bytes or
// the unk token.
func (m *bpe) symbols(word string) []int32 {
	var out []int32
	// unk is an unknown run not yet written (-1: none): tokenizers writes
	// it before the next known character, fuses the next unknown one into
	// it, and lets byte-fallback tokens go before it.
	unk := int32(-1)
	for i := 0; i < len(word); {
		_, size := utf8.DecodeRuneInString(word[i:])
		s := word[i : i+size]
		if i > 0 && m.prefix != "" {
			s = m.prefix + s
		}
		if i+size == len(word) && m.suffix != "" {
			s += m.suffix
		}
		i += size
		if id, ok := m.vocab[s]; ok {
			if unk >= 0 {
				out, unk = append(out, unk), -1
			}
			out = append(out, id)
			continue
		}
		if m.byteFallback {
			// The bytes of the piece as looked up, prefix and suffix too.
			if ids, ok := m.bytes.appendTo(out, s); ok {
				out = ids
				continue
			}
		}
		if m.unk < 0 {
			continue
		}
		if unk >= 0 && !m.fuseUnk {
			out = append(out, unk)
		}
		unk = m.unk
	}
	if unk >= 0 {
		out = append(out, unk)
	}
	return out
}

// byteTokens are a vocabulary's ids of <0x00>…<0xFF> (-1: missing), which
// byte fallback spells an unknown character in.
type byteTokens [256]int32

func byteTokensOf(vocab map[string]int32) byteTokens {
	var out byteTokens
	for b := range out {
		out[b] = -1
		if id, ok := vocab[fmt.Sprintf("<0x%02X>", b)]; ok {
			out[b] = id
		}
	}
	return out
}

// appendTo appends the byte tokens of s to ids, if every byte has its
// token (tokenizers falls back to unk otherwise).
func (t *byteTokens) appendTo(ids []int32, s string) ([]int32, bool) {
	for k := range len(s) {
		if t[s[k]] < 0 {
			return ids, false
		}
	}
	for k := range len(s) {
		ids = append(ids, t[s[k]])
	}
	return ids, true
}

// merge applies the merges to syms, lowest rank first (the leftmost on a
// tie), in O(n log n): a heap of candidate pairs over a linked list of
// symbols, each candidate checked against the list when it is popped.
func (m *bpe) merge(syms []int32) []int32 {
	n := len(syms)
	if n < 2 {
		return syms
	}
	prev := make([]int, n)
	next := make([]int, n)
	alive := make([]bool, n)
	for i := range syms {
		prev[i], next[i], alive[i] = i-1, i+1, true
	}
	next[n-1] = -1
	h := &pairHeap{}
	push := func(i int) {
		j := next[i]
		if i < 0 || j < 0 {
			return
		}
		if mg, ok := m.merges[[2]int32{syms[i], syms[j]}]; ok {
			heap.Push(h, candidate{rank: mg.rank, pos: i, left: syms[i], right: syms[j]})
		}
	}
	for i := range n - 1 {
		push(i)
	}
	for h.Len() > 0 {
		c := heap.Pop(h).(candidate)
		i := c.pos
		j := next[i]
		if !alive[i] || j < 0 || syms[i] != c.left || syms[j] != c.right {
			continue // stale: a neighbour merged since
		}
		syms[i] = m.merges[[2]int32{c.left, c.right}].id
		alive[j] = false
		next[i] = next[j]
		if next[j] >= 0 {
			prev[next[j]] = i
		}
		if prev[i] >= 0 {
			push(prev[i])
		}
		push(i)
	}
	out := make([]int32, 0, n)
	for i := 0; i >= 0; i = next[i] {
		out = append(out, syms[i])
	}
	return out
}

type candidate struct {
	rank        int32
	pos         int
	left, right int32
}

type pairHeap []candidate

func (h pairHeap) Len() int { return len(h) }
func (h pairHeap) Less(a, b int) bool {
	if h[a].rank != h[b].rank {
		return h[a].rank < h[b].rank
	}
	return h[a].pos < h[b].pos
}
func (h pairHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *pairHeap) Push(x any)   { *h = append(*h, x.(candidate)) }
func (h *pairHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (m *bpe) id(token string) (int32, bool) {
	id, ok := m.vocab[token]
	return id, ok
}

func (m *bpe) size() int { return len(m.vocab) }

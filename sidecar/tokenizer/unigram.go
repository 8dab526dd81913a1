package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"unicode/utf8"
)

// unigram is the Unigram model (SentencePiece's, T5's): the segmentation
// of a word into vocabulary pieces with the highest sum of scores
// (Viterbi over its bytes, SentencePiece's optimized encoder as tokenizers
// runs it), characters no piece covers scored as unk below the lowest
// piece, runs of them fused into one unk.
type unigram struct {
	ids    map[string]int32
	scores []float64
	// pieces are the vocabulary's pieces sorted by their bytes, each with
	// its id (the last of duplicates, as tokenizers): the pieces that start a word at a
	// place are found by narrowing a range of them a byte at a time.
	pieces       []string
	pieceIDs     []int32
	maxPiece     int // bytes of the longest piece
	unk          int32
	unkScore     float64
	byteFallback bool
	bytes        byteTokens
}

// maxUnigramPiece bounds a piece's bytes, which bound the work a byte of
// text costs (SentencePiece's pieces are at most 16 characters, 64
// bytes, by default).
const maxUnigramPiece = 256

// unkPenalty is what an unknown character scores below the lowest piece
// (tokenizers' K_UNK_PENALTY, SentencePiece's kUnkPenalty).
const unkPenalty = 10.0

func newUnigram(raw json.RawMessage) (*unigram, error) {
	var j struct {
		Type         string            `json:"type"`
		UnkID        *int              `json:"unk_id"`
		Vocab        []json.RawMessage `json:"vocab"`
		ByteFallback bool              `json:"byte_fallback"`
	}
	if err := strictUnmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("model Unigram: %w", err)
	}
	if len(j.Vocab) == 0 || len(j.Vocab) > maxID {
		return nil, fmt.Errorf("model Unigram: a vocab of %d pieces", len(j.Vocab))
	}
	m := &unigram{ids: make(map[string]int32, len(j.Vocab)), scores: make([]float64, len(j.Vocab)), unk: -1, byteFallback: j.ByteFallback}
	minScore := math.Inf(1)
	for i, e := range j.Vocab {
		var pair []any
		dec := json.NewDecoder(bytes.NewReader(e))
		dec.UseNumber()
		if err := dec.Decode(&pair); err != nil || len(pair) != 2 {
			return nil, fmt.Errorf("model Unigram: vocab entry %d is not [piece, score]", i)
		}
		piece, okP := pair[0].(string)
		num, okS := pair[1].(json.Number)
		if !okP || !okS {
			return nil, fmt.Errorf("model Unigram: vocab entry %d is not [piece, score]", i)
		}
		score, err := serdeFloat(num)
		if err != nil {
			return nil, fmt.Errorf("model Unigram: vocab entry %d: %w", i, err)
		}
		if len(piece) > maxUnigramPiece {
			return nil, fmt.Errorf("model Unigram: piece %d is %d bytes, above the bound of %d that keeps encoding linear in the text", i, len(piece), maxUnigramPiece)
		}
		if _, dup := m.ids[piece]; !dup {
			m.pieces = append(m.pieces, piece)
		}
		m.ids[piece] = int32(i) //nolint:gosec // bounded above; tokenizers keeps a duplicate's last id

		m.scores[i] = score
		m.maxPiece = max(m.maxPiece, len(piece))
		minScore = min(minScore, score)
	}
	switch {
	case j.UnkID == nil:
		return nil, fmt.Errorf("model Unigram without an unk_id: tokenizers fails on any character its pieces lack; give the model its unk piece")
	case *j.UnkID < 0 || *j.UnkID >= len(j.Vocab):
		return nil, fmt.Errorf("model Unigram: unk_id %d outside its %d pieces", *j.UnkID, len(j.Vocab))
	}
	m.unk = int32(*j.UnkID) //nolint:gosec // bounded above
	slices.Sort(m.pieces)
	m.pieceIDs = make([]int32, len(m.pieces))
	for k, p := range m.pieces {
		m.pieceIDs[k] = m.ids[p]
	}
	m.unkScore = minScore - unkPenalty
	m.bytes = byteTokensOf(m.ids)
	return m, nil
}

type node struct {
	score float64
	start int // -1: not reached
	id    int32
}

func (m *unigram) tokenize(ids []int32, word string) []int32 {
	n := len(word)
	if n == 0 {
		return ids
	}
	best := make([]node, n+1)
	for i := 1; i <= n; i++ {
		best[i].start = -1
	}
	for at := 0; at < n; {
		_, charLen := utf8.DecodeRuneInString(word[at:])
		here := best[at].score
		single := false
		// Every piece that starts here: its prefixes of the word, shortest
		// first (the order of tokenizers' trie search, which keeps the
		// first of equal scores), found by narrowing the sorted pieces
		// that share the prefix read so far.
		lo, hi := 0, len(m.pieces)
		for k := 0; at+k < n && k < m.maxPiece && lo < hi; k++ {
			c := word[at+k]
			piecesAt := m.pieces[lo:hi]
			from := sort.Search(len(piecesAt), func(x int) bool { p := piecesAt[x]; return len(p) > k && p[k] >= c })
			to := sort.Search(len(piecesAt), func(x int) bool { p := piecesAt[x]; return len(p) > k && p[k] > c })
			lo, hi = lo+from, lo+to
			if lo >= hi || len(m.pieces[lo]) != k+1 {
				continue
			}
			end, id := at+k+1, m.pieceIDs[lo]
			if score := here + m.scores[id]; best[end].start < 0 || score > best[end].score {
				best[end] = node{score: score, start: at, id: id}
			}
			if end-at == charLen {
				single = true
			}
		}
		if !single {
			end := at + charLen
			if score := here + m.unkScore; best[end].start < 0 || score > best[end].score {
				best[end] = node{score: score, start: at, id: m.unk}
			}
		}
		at += charLen
	}
	// Back from the end: the pieces, runs of unknown characters fused.
	var pieces [][2]int
	lastUnk := false
	for end := n; end > 0; {
		nd := best[end]
		if nd.id == m.unk && lastUnk {
			pieces[len(pieces)-1][0] = nd.start
		} else {
			pieces = append(pieces, [2]int{nd.start, end})
		}
		lastUnk = nd.id == m.unk
		end = nd.start
	}
	for k := len(pieces) - 1; k >= 0; k-- {
		p := word[pieces[k][0]:pieces[k][1]]
		if id, ok := m.ids[p]; ok {
			ids = append(ids, id)
			continue
		}
		if m.byteFallback {
			if out, ok := m.bytes.appendTo(ids, p); ok {
				ids = out
				continue
			}
		}
		ids = append(ids, m.unk)
	}
	return ids
}

func (m *unigram) id(token string) (int32, bool) {
	id, ok := m.ids[token]
	return id, ok
}

func (m *unigram) size() int { return len(m.scores) }

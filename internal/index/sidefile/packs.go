package sidefile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/strictjson"
	"github.com/shardfeed/shardfeed/planner"
)

// Packs (spec.packing, docs/planner.md): how many sequences each shard's
// documents pack into, counted once by shardfeed index from their lengths.
// The control plane plans over packs as samples, so it reads only these
// counts (O(shards)); a sidecar packs the documents it decodes and checks
// that it finds the same packs.

// PacksIndex lists, per shard of a stream's index, its documents and what
// packing them made.
type PacksIndex struct {
	Shardfeed int    `json:"shardfeed"`
	Column    string `json:"column"`
	// Filter is the row filter whose matching rows are the documents
	// (empty: every row).
	Filter string `json:"filter,omitempty"`
	// Packing is the packing, as planner.Packing.String writes it.
	Packing        string `json:"packing"`
	SequenceLength uint32 `json:"sequenceLength"`
	// Index is the content hash of the stream index the documents are of.
	Index string `json:"index"`
	// Tokenize is the tokenization that made the column's ids, for a
	// column the sidecar tokenizes (LengthsIndex.Tokenize).
	Tokenize string       `json:"tokenize,omitempty"`
	Shards   []PacksShard `json:"shards"`
}

// PacksShard is what packing one shard's documents made.
type PacksShard struct {
	Docs  int64 `json:"docs"`
	Packs int64 `json:"packs"`
	// Tokens delivered, and Padding, the room left in the packs.
	Tokens  int64 `json:"tokens"`
	Padding int64 `json:"padding"`
	// CutDocs are documents cut across packs; DroppedDocs and
	// DroppedTokens the overlong ones left out; EmptyDocs those with no
	// token (in no pack).
	CutDocs       int64 `json:"cutDocs,omitempty"`
	DroppedDocs   int64 `json:"droppedDocs,omitempty"`
	DroppedTokens int64 `json:"droppedTokens,omitempty"`
	EmptyDocs     int64 `json:"emptyDocs,omitempty"`
	// Unit, on the first shard of a packing unit of two or more shards
	// (spec.packing.acrossShards), is the unit's shards: this shard's
	// counts are then the unit's (its Docs stay its own), and the other
	// shards of the unit have no pack.
	Unit int64 `json:"unit,omitempty"`
}

// PacksKey is the key of a packing's counts beside its stream's index,
// keyed by the column, the filter and the packing.
func PacksKey(column, filter, tokenize string, p planner.Packing) string {
	sum := sha256.Sum256([]byte(column + "\x00" + filter + "\x00" + p.String() + tokenizedSuffix(tokenize)))
	return indexfile.Dir + "/packs-" + hex.EncodeToString(sum[:]) + ".json"
}

// ShardPacks is the record of one shard's packing.
func ShardPacks(docs int, st planner.PackStats, packs int) PacksShard {
	return PacksShard{Docs: int64(docs), Packs: int64(packs), Tokens: int64(st.Tokens), Padding: int64(st.Padding), //nolint:gosec // bounded by MaxLength·samples
		CutDocs: int64(st.CutDocs), DroppedDocs: int64(st.DroppedDocs), DroppedTokens: int64(st.DroppedTokens), EmptyDocs: int64(st.EmptyDocs)} //nolint:gosec // as above
}

// Packs packs every shard of a column's lengths (of measure Elements) as p
// says: the counts a packed plan is made of.
func Packs(x *LengthsIndex, values []byte, p planner.Packing) (*PacksIndex, error) {
	if x.Measure != Elements {
		return nil, fmt.Errorf("column %q holds images (%s): packing takes a list column of token ids", x.Column, x.Measure)
	}
	out := &PacksIndex{Shardfeed: indexfile.Version, Column: x.Column, Filter: x.Filter, Packing: p.String(), SequenceLength: p.SeqLength, Index: x.Index, Tokenize: x.Tokenize}
	docs := make([]int64, len(x.Shards))
	for i, s := range x.Shards {
		docs[i] = s.Samples
	}
	h := 0
	for _, k := range p.Units(docs) {
		var n []uint32 // the unit's documents' lengths, its shards' in order
		for i := h; i < h+k; i++ {
			s := x.Shards[i]
			if s.Offset < 0 || s.Length < 0 || s.Offset > int64(len(values))-s.Length {
				return nil, fmt.Errorf("%w: shard %d's lengths are past the object's %d bytes", errLengths, i, len(values))
			}
			ls, err := x.ShardLengths(i, values[s.Offset:s.Offset+s.Length])
			if err != nil {
				return nil, fmt.Errorf("shard %d: %w", i, err)
			}
			for _, l := range ls {
				n = append(n, l[0])
			}
		}
		packs, st := planner.PackShard(n, p)
		head := ShardPacks(int(docs[h]), st, len(packs))
		if k > 1 {
			head.Unit = int64(k)
		}
		out.Shards = append(out.Shards, head)
		for i := h + 1; i < h+k; i++ {
			out.Shards = append(out.Shards, PacksShard{Docs: docs[i]})
		}
		h += k
	}
	return out, nil
}

// Units returns, for each shard, the shards of the packing unit it starts:
// 1 for a unit of itself, Unit for the first of a unit spanning shards,
// and 0 for a shard inside another's unit (it has no pack of its own).
func (x *PacksIndex) Units() []int {
	out := make([]int, len(x.Shards))
	for h := 0; h < len(x.Shards); {
		// Within the shards left (Check refuses a unit past them).
		k := int(min(max(x.Shards[h].Unit, 1), int64(len(x.Shards)-h)))
		out[h] = k
		h += k
	}
	return out
}

// WritePacks stores a packing's counts beside their stream's index.
func WritePacks(ctx context.Context, st store.Store, x *PacksIndex, p planner.Packing) error {
	data, err := json.MarshalIndent(x, "", " ")
	if err != nil {
		return err
	}
	return st.Put(ctx, PacksKey(x.Column, x.Filter, x.Tokenize, p), bytes.NewReader(data), int64(len(data)))
}

// ErrNoPacks is a stream whose packs were not counted.
var ErrNoPacks = errors.New("the stream's packs were not counted")

// ReadPacks reads the counts of packing column as p says (over the rows
// filter matches) beside a stream's index, at most maxBytes (0:
// indexfile.DefaultMaxBytes), and checks them against the stream's index: its
// content hash and each shard's samples (its matching rows where the
// stream is filtered).
func ReadPacks(ctx context.Context, st store.Store, column, filter, tokenize string, p planner.Packing, contentHash string, samples []int64, maxBytes int64) (*PacksIndex, error) {
	key := PacksKey(column, filter, tokenize, p)
	data, err := indexfile.ReadObject(ctx, st, key, maxBytes)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s is missing", ErrNoPacks, indexfile.ObjectURI(st, key))
	}
	if err != nil {
		return nil, err
	}
	var x PacksIndex
	if err := strictjson.Decode(data, &x); err != nil {
		return nil, fmt.Errorf("%s: not a shardfeed packs index (%w): re-run shardfeed index --lengths --pack-length", indexfile.ObjectURI(st, key), err)
	}
	if x.Column != column || x.Filter != filter || x.Tokenize != tokenize || x.Packing != p.String() || x.SequenceLength != p.SeqLength {
		return nil, fmt.Errorf("%s holds the packs of column %q (%s, filter %q), not of %q (%s, filter %q): re-run shardfeed index --lengths --pack-length",
			indexfile.ObjectURI(st, key), x.Column, x.Packing, x.Filter, column, p, filter)
	}
	if err := x.Check(contentHash, samples); err != nil {
		return nil, fmt.Errorf("%s: %w", indexfile.ObjectURI(st, key), err)
	}
	if err := x.checkUnits(p, samples); err != nil {
		return nil, fmt.Errorf("%s: %w", indexfile.ObjectURI(st, key), err)
	}
	return &x, nil
}

// Check checks a packs index against the stream index it is for: its
// content hash, each shard's documents (its samples), and counts that
// hold together (every pack holds a token and at most a sequence of them).
func (x *PacksIndex) Check(contentHash string, samples []int64) error {
	const rerun = "re-run shardfeed index --lengths --pack-length"
	switch {
	case x.Shardfeed != indexfile.Version:
		return fmt.Errorf("packs index version %d is not supported: %s", x.Shardfeed, rerun)
	case x.SequenceLength == 0:
		return fmt.Errorf("packs of sequences of 0 tokens: %s", rerun)
	case x.Index != contentHash:
		return fmt.Errorf("the packs were counted over another index (%s, the stream's is %s): %s", x.Index, contentHash, rerun)
	case len(x.Shards) != len(samples):
		return fmt.Errorf("the packs have %d shards, the index %d: %s", len(x.Shards), len(samples), rerun)
	}
	l := int64(x.SequenceLength)
	units := x.Units()
	for i, s := range x.Shards {
		if s.Docs != samples[i] {
			return fmt.Errorf("the packs of shard %d count %d documents, the index %d: %s", i, s.Docs, samples[i], rerun)
		}
		if units[i] == 0 { // inside the unit of a shard before it
			if s != (PacksShard{Docs: s.Docs}) {
				return fmt.Errorf("shard %d is in the packing unit of a shard before it and has packs of its own: the packs are corrupt: %s", i, rerun)
			}
			continue
		}
		if s.Unit < 0 || s.Unit == 1 || s.Unit > planner.MaxUnitShards || s.Unit > 1 && int64(units[i]) != s.Unit {
			return fmt.Errorf("shard %d starts a packing unit of %d shards, of at most %d and past none of the %d shards: the packs are corrupt: %s",
				i, s.Unit, planner.MaxUnitShards, len(x.Shards), rerun)
		}
		docs := int64(0) // the unit's documents
		for _, n := range samples[i : i+units[i]] {
			docs += n
		}
		// A unit's tokens are within its documents' bound, so the
		// products below stay within an int64.
		ok := s.Packs >= 0 && s.Tokens >= 0 && s.Tokens <= docs*MaxLength &&
			s.Packs <= s.Tokens && s.Padding >= 0 && s.Packs <= math.MaxInt64/l && s.Padding == s.Packs*l-s.Tokens &&
			min(s.CutDocs, s.DroppedDocs, s.DroppedTokens, s.EmptyDocs) >= 0 && s.CutDocs+s.DroppedDocs+s.EmptyDocs <= docs
		if !ok {
			return fmt.Errorf("the packs of shard %d (%d documents of %d, %d packs, %d tokens, %d padding) are corrupt: %s",
				i, docs, samples[i], s.Packs, s.Tokens, s.Padding, rerun)
		}
	}
	return nil
}

// checkUnits checks that the packing units are those p makes of the
// shards' documents: a sidecar fetches a unit's shards by them.
func (x *PacksIndex) checkUnits(p planner.Packing, samples []int64) error {
	units, h := x.Units(), 0
	for _, k := range p.Units(samples) {
		if units[h] != k {
			return fmt.Errorf("shard %d starts a packing unit of %d shards, %s makes one of %d: re-run shardfeed index --lengths --pack-length", h, units[h], p, k)
		}
		h += k
	}
	return nil
}

// Totals are the sums of a stream's packing over its shards.
func (x *PacksIndex) Totals() PacksShard {
	var t PacksShard
	for _, s := range x.Shards {
		t.Add(s)
	}
	return t
}

// Add adds s's counts to t's.
func (t *PacksShard) Add(s PacksShard) {
	t.Docs += s.Docs
	t.Packs += s.Packs
	t.Tokens += s.Tokens
	t.Padding += s.Padding
	t.CutDocs += s.CutDocs
	t.DroppedDocs += s.DroppedDocs
	t.DroppedTokens += s.DroppedTokens
	t.EmptyDocs += s.EmptyDocs
}

// DocsPerPack is the documents a pack holds on average (a cut document
// counts once).
func (t PacksShard) DocsPerPack() float64 {
	return float64(t.Docs-t.EmptyDocs-t.DroppedDocs) / float64(max(t.Packs, 1))
}

// PaddingPercent is the share of the packs' room left as padding, in %.
func (t PacksShard) PaddingPercent() float64 {
	return 100 * float64(t.Padding) / float64(max(t.Padding+t.Tokens, 1))
}

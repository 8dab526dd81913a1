package sidefile

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/strictjson"
)

// Sample lengths (spec.packing and spec.bucketing, docs/planner.md): each
// sample's length in one column, measured once by shardfeed index. As for a
// filter's selection, its index (LengthsIndex: per shard a count, a sum, a
// maximum and a byte range) is what the control plane reads; the lengths
// themselves, one encoded range per shard in one object, are what a sidecar
// fetches for the shards of its own splits.

// Measure is what a sample's length is.
type Measure string

const (
	// Elements is the number of elements of a list column's value (tokens).
	Elements Measure = "elements"
	// ImageSize is an image's height and width, read from the header of a
	// binary column's JPEG or PNG; its length is its pixels.
	ImageSize Measure = "image"
)

// values is how many numbers a sample of the measure has.
func (m Measure) values() int {
	if m == ImageSize {
		return 2
	}
	return 1
}

// MaxLength bounds a list's elements, and MaxSide an image's side: a
// larger one is refused where it is measured and where it is read (so
// that a shard's sums stay within an int64).
const (
	MaxLength = 1<<31 - 1
	MaxSide   = 1 << 20
)

// most is the largest value of the measure.
func (m Measure) most() uint64 {
	if m == ImageSize {
		return MaxSide
	}
	return MaxLength
}

// maxLengthBytes bounds one shard's encoded lengths (at least a byte per
// sample: 16 M samples), and so the memory decoding them takes (8 bytes a
// sample).
const maxLengthBytes = 16 << 20

// LengthsIndex lists, per shard of a stream's index, the sum and maximum of
// its samples' lengths and where they are encoded.
type LengthsIndex struct {
	// ValuesKey is where ReadLengths found the lengths.
	ValuesKey string  `json:"-"`
	Shardfeed int     `json:"shardfeed"`
	Column    string  `json:"column"`
	Measure   Measure `json:"measure"`
	// Filter is the row filter whose matching rows were measured (empty:
	// every row), so that a shard's lengths are those of its samples.
	Filter string `json:"filter,omitempty"`
	// Index is the content hash of the stream index the rows were
	// measured in: lengths of another index are refused.
	Index string `json:"index"`
	// Tokenize, for a column of token ids the sidecar makes from a text
	// column (spec.tokenize), is the tokenization measured
	// (planspec.TokenizeKey): each row's ids counted as it tokenizes them.
	Tokenize string         `json:"tokenize,omitempty"`
	Shards   []LengthsShard `json:"shards"`
}

// LengthsShard is one shard's lengths: how many samples, the sum and the
// largest of their lengths (an image's is its pixels), and where they are
// encoded in the lengths object.
type LengthsShard struct {
	Samples int64 `json:"samples"`
	Sum     int64 `json:"sum"`
	Max     int64 `json:"max"`
	Offset  int64 `json:"offset"`
	Length  int64 `json:"length"`
	// Hash is the "xxh64:<hex>" digest of the encoded lengths, checked by
	// the cache that fetches them.
	Hash string `json:"hash"`
}

// LengthsObjects are the keys of a column's lengths beside its stream's
// index: the lengths' index and the lengths. They are keyed by the column,
// the measure and the filter, so that each combination has its own.
func LengthsObjects(column string, m Measure, filter, tokenize string) (indexKey, valuesKey string) {
	sum := sha256.Sum256([]byte(string(m) + "\x00" + column + "\x00" + filter + tokenizedSuffix(tokenize)))
	name := indexfile.Dir + "/lengths-" + hex.EncodeToString(sum[:])
	return name + ".json", name + ".lengths"
}

// Length is one sample's length: its value, or an image's (height, width).
type Length [2]uint32

// Of is the length a sample counts for in sums and budgets: the value, or
// an image's pixels.
func (l Length) Of(m Measure) int64 {
	if m == ImageSize {
		return int64(l[0]) * int64(l[1])
	}
	return int64(l[0])
}

// AppendShard appends one shard's lengths to a lengths object and records
// them in x.
func (x *LengthsIndex) AppendShard(object []byte, lengths []Length) []byte {
	start := int64(len(object))
	var sum, largest int64
	k := x.Measure.values()
	for _, l := range lengths {
		for v := range k {
			object = binary.AppendUvarint(object, uint64(l[v]))
		}
		n := l.Of(x.Measure)
		sum += n
		largest = max(largest, n)
	}
	digest, _ := checksum.Of("xxh64", object[start:]) // a known algorithm
	x.Shards = append(x.Shards, LengthsShard{Samples: int64(len(lengths)), Sum: sum, Max: largest, Offset: start,
		Length: int64(len(object)) - start, Hash: digest.String()})
	return object
}

// WriteLengths stores lengths beside their stream's index: the values
// first, so that a reader never finds an index without them.
func WriteLengths(ctx context.Context, st store.Store, x *LengthsIndex, values []byte) error {
	indexKey, valuesKey := LengthsObjects(x.Column, x.Measure, x.Filter, x.Tokenize)
	return putBeside(ctx, st, indexKey, valuesKey, x, values)
}

// ErrNoLengths is a stream whose lengths in a column were not measured.
var ErrNoLengths = errors.New("the stream has no lengths for its column")

var errLengths = errors.New("corrupt lengths")

// ReadLengths reads the lengths of column (measure m, over the rows filter
// matches) beside a stream's index, at most maxBytes of their index (0:
// indexfile.DefaultMaxBytes), and checks them against the stream's index (its
// content hash, and samples: each shard's samples, its matching rows where
// the stream is filtered) and the size of the lengths object.
func ReadLengths(ctx context.Context, st store.Store, column string, m Measure, filter, tokenize, contentHash string, samples []int64, maxBytes int64) (*LengthsIndex, error) {
	indexKey, valuesKey := LengthsObjects(column, m, filter, tokenize)
	data, err := indexfile.ReadObject(ctx, st, indexKey, maxBytes)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s is missing", ErrNoLengths, indexfile.ObjectURI(st, indexKey))
	}
	if err != nil {
		return nil, err
	}
	var x LengthsIndex
	if err := strictjson.Decode(data, &x); err != nil {
		return nil, fmt.Errorf("%s: not a shardfeed lengths index (%w): re-run shardfeed index --lengths", indexfile.ObjectURI(st, indexKey), err)
	}
	if x.Column != column || x.Measure != m || x.Filter != filter {
		return nil, fmt.Errorf("%s holds the lengths of column %q (%s, filter %q), not of %q (%s, filter %q): re-run shardfeed index --lengths",
			indexfile.ObjectURI(st, indexKey), x.Column, x.Measure, x.Filter, column, m, filter)
	}
	o, err := st.Stat(ctx, valuesKey)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s is missing", ErrNoLengths, indexfile.ObjectURI(st, valuesKey))
	}
	if err != nil {
		return nil, err
	}
	if err := x.Check(contentHash, samples, o.Size); err != nil {
		return nil, fmt.Errorf("%s: %w", indexfile.ObjectURI(st, indexKey), err)
	}
	x.ValuesKey = valuesKey
	return &x, nil
}

// Check checks a lengths index against the stream index it is for (its
// content hash and each shard's samples) and the size of its object.
func (x *LengthsIndex) Check(contentHash string, samples []int64, size int64) error {
	switch {
	case x.Shardfeed != indexfile.Version:
		return fmt.Errorf("lengths index version %d is not supported: re-run shardfeed index --lengths", x.Shardfeed)
	case x.Measure != Elements && x.Measure != ImageSize:
		return fmt.Errorf("lengths measured as %q, which this build does not know (%s or %s): re-run shardfeed index --lengths", x.Measure, Elements, ImageSize)
	case x.Index != contentHash:
		return fmt.Errorf("the lengths were measured over another index (%s, the stream's is %s): re-run shardfeed index --lengths", x.Index, contentHash)
	case len(x.Shards) != len(samples):
		return fmt.Errorf("the lengths have %d shards, the index %d: re-run shardfeed index --lengths", len(x.Shards), len(samples))
	}
	var end int64
	k := int64(x.Measure.values())
	most := Length{uint32(x.Measure.most()), uint32(x.Measure.most())}.Of(x.Measure)
	for i, s := range x.Shards {
		if _, err := checksum.Parse(s.Hash); err != nil || s.Hash == "" {
			return fmt.Errorf("the lengths of shard %d have hash %q: re-run shardfeed index --lengths", i, s.Hash)
		}
		// Each value takes one to five bytes; the sum is within its
		// samples' largest.
		if s.Samples != samples[i] || s.Offset != end || s.Length < k*s.Samples || s.Length > 5*k*s.Samples ||
			s.Length > maxLengthBytes || s.Offset > size-s.Length || s.Max < 0 || s.Max > most || s.Sum < s.Max ||
			s.Samples > 0 && s.Sum/s.Samples > s.Max || s.Samples == 0 && s.Sum != 0 {
			return fmt.Errorf("the lengths of shard %d (%d samples of %d, sum %d, max %d, bytes [%d, +%d) of %d) are corrupt: re-run shardfeed index --lengths",
				i, s.Samples, samples[i], s.Sum, s.Max, s.Offset, s.Length, size)
		}
		end = s.Offset + s.Length
	}
	if end != size {
		return fmt.Errorf("the lengths object is %d bytes, its index covers %d: re-run shardfeed index --lengths", size, end)
	}
	return nil
}

// Totals are the sums of a stream's lengths over all its shards.
func (x *LengthsIndex) Totals() (samples, sum, largest int64) {
	for _, s := range x.Shards {
		samples += s.Samples
		sum += s.Sum
		largest = max(largest, s.Max)
	}
	return samples, sum, largest
}

// ShardLengths decodes shard i's lengths from their bytes, exactly as
// AppendShard wrote them, and checks them against the index's count, sum
// and maximum.
func (x *LengthsIndex) ShardLengths(i int, b []byte) ([]Length, error) {
	s := x.Shards[i]
	if int64(len(b)) != s.Length {
		return nil, fmt.Errorf("%w: %d bytes, the index says %d", errLengths, len(b), s.Length)
	}
	k := x.Measure.values()
	out := make([]Length, s.Samples)
	var sum, largest int64
	for j := range out {
		for v := range k {
			n, w := binary.Uvarint(b)
			// A value in more bytes than it needs (a last byte of 0) is
			// not what AppendShard writes.
			if w <= 0 || w > 1 && b[w-1] == 0 || n > x.Measure.most() {
				return nil, fmt.Errorf("%w: sample %d's length is past %d, or cut short", errLengths, j, x.Measure.most())
			}
			out[j][v] = uint32(n)
			b = b[w:]
		}
		n := out[j].Of(x.Measure)
		sum += n
		largest = max(largest, n)
	}
	if len(b) != 0 || sum != s.Sum || largest != s.Max {
		return nil, fmt.Errorf("%w: %d bytes left over, sum %d and max %d where the index says %d and %d", errLengths, len(b), sum, largest, s.Sum, s.Max)
	}
	return out, nil
}

// tokenizedSuffix is what a tokenization adds to the name of a column's
// lengths and packs: nothing for none, so that the keys of other columns
// stay what they were.
func tokenizedSuffix(tokenize string) string {
	if tokenize == "" {
		return ""
	}
	return "\x00tokenize=" + tokenize
}

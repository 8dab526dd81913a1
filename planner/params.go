package planner

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Shard is one entry of a stream index.
type Shard struct {
	// Name identifies the shard in its stream (the object's base name).
	Name string `json:"name"`
	// Samples in the shard.
	Samples int64 `json:"samples"`
	// Bytes to fetch for the shard (its size in object storage).
	Bytes int64 `json:"bytes"`
	// Hash of the shard's content, as the index records it ("xxh64:…").
	Hash string `json:"hash,omitempty"`
	// Shared names the object whose part every shard of it needs too (a
	// Parquet file's footer), of SharedBytes: fetched once per pod while
	// cached, counted in what a pod fetches, not in the content hash.
	Shared      string `json:"-"`
	SharedBytes int64  `json:"-"`
	// RunsBytes is the part of Bytes that is the runs of the stream's
	// filter: a bucketed stream's lanes each fetch their own runs, and the
	// shard's other bytes once.
	RunsBytes int64 `json:"-"`
}

// StreamIndex lists the shards of one stream, in index order.
type StreamIndex struct {
	Shards []Shard `json:"shards"`
	// Snapshot is the id of the Iceberg snapshot the index was resolved
	// at, for a table's stream: a plan input beside the shards, so that a
	// resume on another snapshot names both ids. Empty for other streams.
	Snapshot string `json:"-"`
	// Partitions are the partition columns and selection of a
	// hive-partitioned stream's index, a plan input beside the shards
	// (the types shape the values served). Empty for other streams.
	Partitions string `json:"-"`
	// Filter is the hash of the stream's row filter (index.FilterHash),
	// when it has one: then each shard's Samples are its matching rows,
	// and the filter is a plan input. Empty for other streams.
	Filter string `json:"-"`
	// Packing is the packing whose packs are the stream's samples
	// (spec.packing): a plan input. Empty for other streams.
	Packing string `json:"-"`
	// Tokens are, in a packed stream, the tokens of its packs (of its
	// Samples): what proportions of tokens weigh it by.
	Tokens int64 `json:"-"`
	// Buckets are, in a bucketed dataset (spec.bucketing), the stream's
	// rows in each bucket: the same shards, each with its rows in the
	// bucket, filtered by the bucket's selection. The plan's lanes.
	Buckets []StreamIndex `json:"-"`
	// Summary, for an index read as its header says it and no more (a
	// compact index's), stands for Shards, which is then empty: a plan of
	// it has its fingerprint, counts and steps, and no epoch, unless
	// Counts gives each shard's samples.
	Summary *Summary `json:"-"`
	// Counts, with Summary, are the shards' sample counts held apart from
	// Shards (a compact index's column, a few bytes a shard): a plan of
	// them has epochs of the random order.
	Counts ShardCounts `json:"-"`
}

// ShardCounts are a stream's shards as a plan reads them, held apart from
// StreamIndex.Shards.
type ShardCounts interface {
	// Samples is shard h's samples (0 ≤ h < Summary.Shards).
	Samples(h int64) int64
	// Shard is the planner's view of shard h: its samples, bytes and
	// shared part (its name and hash may be empty), for the needs and the
	// cache of the pods that read it.
	Shard(h int64) Shard
}

// Shard is shard h of the index, however it is held: of one held apart
// (Counts), a shard whose entry its holder has.
func (x *StreamIndex) Shard(h int64) Shard { return x.shard(h) }

// ShardSamples is shard h's samples, however the index is held.
func (x *StreamIndex) ShardSamples(h int64) int64 { return x.shardSamples(h) }

// shard is shard h of the index, however it is held.
func (x *StreamIndex) shard(h int64) Shard {
	if x.Counts != nil {
		return x.Counts.Shard(h)
	}
	return x.Shards[h]
}

// shardSamples is shard h's samples, however it is held.
func (x *StreamIndex) shardSamples(h int64) int64 {
	if x.Counts != nil {
		return x.Counts.Samples(h)
	}
	return x.Shards[h].Samples
}

// Summary is what an index's header says of its shards.
type Summary struct {
	Shards, Samples, Bytes, MaxShardBytes int64
	ContentHash                           string
}

// Len returns the number of shards.
func (x StreamIndex) Len() int64 {
	if x.Summary != nil {
		return x.Summary.Shards
	}
	return int64(len(x.Shards))
}

// Samples returns the number of samples in the stream.
func (x StreamIndex) Samples() int64 {
	if x.Summary != nil {
		return x.Summary.Samples
	}
	var n int64
	for _, s := range x.Shards {
		n += s.Samples
	}
	return n
}

// Bytes returns the number of bytes of the stream's shards.
func (x StreamIndex) Bytes() int64 {
	if x.Summary != nil {
		return x.Summary.Bytes
	}
	var n int64
	for _, s := range x.Shards {
		n += s.Bytes
	}
	return n
}

// MaxShardBytes returns the size of the largest shard.
func (x StreamIndex) MaxShardBytes() int64 {
	if x.Summary != nil {
		return x.Summary.MaxShardBytes
	}
	var n int64
	for _, s := range x.Shards {
		n = max(n, s.Bytes)
	}
	return n
}

// ContentHash identifies the index: two indexes with the same shards (names,
// sample counts, sizes and hashes, in order) have the same content hash.
func (x StreamIndex) ContentHash() string {
	if x.Summary != nil {
		return x.Summary.ContentHash
	}
	h := sha256.New()
	var buf [8]byte
	put := func(v int64) {
		binary.LittleEndian.PutUint64(buf[:], uint64(v))
		h.Write(buf[:])
	}
	put(int64(len(x.Shards)))
	for _, s := range x.Shards {
		put(int64(len(s.Name)))
		h.Write([]byte(s.Name))
		put(s.Samples)
		put(s.Bytes)
		put(int64(len(s.Hash)))
		h.Write([]byte(s.Hash))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Stream is one stream of a plan: its index and its weight. At most one of
// Proportion, Repeat and Choose is set.
type Stream struct {
	Name  string
	Index StreamIndex
	// Proportion is a relative weight as an exact decimal string.
	Proportion string
	// Repeat multiplies the stream's size, as an exact decimal string.
	Repeat string
	// Choose fixes the stream's samples per epoch (0: not set).
	Choose int64
	// Tokenize, for a stream served tokenized, says how: its tokenizer's
	// content hash and options ("" for none). It enters the fingerprint:
	// a changed tokenizer serves other tokens, a new plan.
	Tokenize string
}

// Params are every input of a plan but the epoch and the ranks.
type Params struct {
	Streams []Stream
	// EpochSize is the number of samples per epoch; 0 means the default
	// (the sum of the stream sizes).
	EpochSize int64
	Seed      uint64
	// NumSplits is S: the epoch is cut into S equal splits.
	NumSplits int
	Shuffle   bool
	// BlockSize is the number of consecutive samples of a split shuffled
	// together (when Shuffle is on).
	BlockSize int64
	// RunLength keeps runs of that many consecutive samples together when
	// a block is shuffled: the block's runs are permuted, not its samples.
	// 0 and 1 shuffle samples.
	RunLength int64
	// GlobalBatchSize is G, a multiple of NumSplits.
	GlobalBatchSize int64
	// DropLast drops the tail of each split that does not fill a batch;
	// false pads it with marked rows.
	DropLast bool
	// Batching says how streams share a batch (docs/planner.md): random
	// ("" too), stratified or per_stream.
	Batching Batching
	// Schedule, if set, plans over training steps and per-stream passes
	// (docs/planner.md, schedules); only its presence is in the
	// fingerprint.
	Schedule *Schedule
	// ProportionsOfTokens says the proportions (the streams' and a
	// schedule's) are of tokens, in a packed dataset: each stream's packs
	// are weighed by its packs over its tokens (StreamIndex.Tokens).
	ProportionsOfTokens bool
	// Bucketing, if set, makes the streams lanes of buckets, stream-major,
	// and draws every global batch from one bucket (bucket.go).
	Bucketing *Bucketing
}

// Batching is how streams share a batch.
type Batching string

// The batching methods.
const (
	BatchingRandom     Batching = "random"
	BatchingStratified Batching = "stratified"
	BatchingPerStream  Batching = "per_stream"
)

// lanes reports whether each stream is cut into the splits on its own.
func (p *Params) lanes() bool {
	return p.Batching == BatchingStratified || p.Batching == BatchingPerStream
}

// FieldError is a rejected input: the field, named as in a TrainingDataset
// spec, and the rule it breaks, said so that the fix is clear.
type FieldError struct {
	Field string
	Rule  string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Rule }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Rule: fmt.Sprintf(format, args...)}
}

// maxSamples bounds every count so that positions and ids fit int64 with
// room for the arithmetic on them.
const maxSamples = int64(1) << 60

var decimalPattern = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// parseDecimal parses an exact, non-negative decimal string.
func parseDecimal(field, s string) (*big.Rat, error) {
	if !decimalPattern.MatchString(s) {
		return nil, fieldErr(field, "%q is not a decimal number: write digits with an optional fraction, e.g. \"0.25\" or \"3\"", s)
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fieldErr(field, "%q is not a decimal number", s)
	}
	if r.Sign() <= 0 {
		return nil, fieldErr(field, "must be greater than 0, got %q", s)
	}
	return r, nil
}

// weightKind says how a stream's samples per epoch are given.
type weightKind int

const (
	weightNone weightKind = iota
	weightProportion
	weightRepeat
	weightChoose
)

func (s Stream) kind() weightKind {
	switch {
	case s.Proportion != "":
		return weightProportion
	case s.Repeat != "":
		return weightRepeat
	case s.Choose != 0:
		return weightChoose
	}
	return weightNone
}

// Validate checks the parameters without building a plan. Its errors are
// *FieldError.
func (p *Params) Validate() error {
	_, err := p.samplesPerStream()
	return err
}

// streamCounts is samplesPerStream without bucketing.
// emptyStream says why a stream has no sample, by what its index holds.
func emptyStream(field string, s Stream) error {
	switch {
	case s.Index.Filter != "":
		return fieldErr(field+".filter", "stream %q: the filter matches no row of its %d shards: loosen the filter, or leave the stream out", s.Name, s.Index.Len())
	case s.Index.Packing != "":
		// The documents are there; none makes a pack.
		return fieldErr("spec.packing", "stream %q makes no pack of its %d shards' documents: every document is empty, or cut or dropped by the packing (%s); check the packed column, and spec.packing's sequenceLength and overlong (drop leaves out every document longer than a sequence)", s.Name, s.Index.Len(), s.Index.Packing)
	}
	return fieldErr(field, "stream %q has no samples: its index lists %d shards and none has a sample; check the source URI", s.Name, s.Index.Len())
}

func (p *Params) streamCounts() ([]int64, error) {
	if len(p.Streams) == 0 {
		return nil, fieldErr("spec.streams", "at least one stream is required")
	}
	if p.NumSplits < 1 {
		return nil, fieldErr("spec.numSplits", "must be at least 1, got %d", p.NumSplits)
	}
	if p.GlobalBatchSize < 1 {
		return nil, fieldErr("spec.globalBatchSize", "must be at least 1, got %d", p.GlobalBatchSize)
	}
	if p.GlobalBatchSize%int64(p.NumSplits) != 0 {
		return nil, fieldErr("spec.globalBatchSize", "must be a multiple of spec.numSplits (%d), got %d: every split gives the same number of samples to each batch",
			p.NumSplits, p.GlobalBatchSize)
	}
	if p.Shuffle && p.BlockSize < 1 {
		return nil, fieldErr("spec.shuffle.blockSize", "must be at least 1, got %d", p.BlockSize)
	}
	if p.RunLength < 0 || p.Shuffle && p.RunLength > p.BlockSize {
		return nil, fieldErr("spec.shuffle.runLength", "must be from 1 to spec.shuffle.blockSize (%d), got %d: a run is the samples kept together inside a shuffled block",
			p.BlockSize, p.RunLength)
	}
	switch p.Batching {
	case "", BatchingRandom, BatchingStratified, BatchingPerStream:
	default:
		return nil, fieldErr("spec.batching", "%q is not a batching method: use random, stratified or per_stream", p.Batching)
	}
	if p.EpochSize < 0 {
		return nil, fieldErr("spec.epochSize", "must be at least 1, got %d", p.EpochSize)
	}
	names := map[string]int{}
	sizes := make([]int64, len(p.Streams))
	var total int64
	for i, s := range p.Streams {
		field := fmt.Sprintf("spec.streams[%d]", i)
		if s.Name == "" {
			return nil, fieldErr(field+".name", "is required")
		}
		if j, dup := names[s.Name]; dup {
			return nil, fieldErr(field+".name", "%q is also the name of spec.streams[%d]: stream names must be unique", s.Name, j)
		}
		names[s.Name] = i
		if sum := s.Index.Summary; sum != nil {
			if len(s.Index.Shards) > 0 || sum.Samples < 0 || sum.Bytes < 0 || sum.Samples > maxSamples || s.Index.Filter != "" || s.Index.Packing != "" || s.Index.Buckets != nil {
				return nil, fieldErr(field, "stream %q: a summary of its index stands for its shards alone, with non-negative counts, and no filter, packing or buckets", s.Name)
			}
			sizes[i] = sum.Samples
			if s.Index.Counts != nil {
				var n int64
				for h := range sum.Shards {
					c := s.Index.Counts.Samples(h)
					if c < 0 || n+c > sum.Samples {
						return nil, fieldErr(field, "stream %q: shard %d's samples (%d) are negative or pass the index's %d: rebuild the index", s.Name, h, c, sum.Samples)
					}
					n += c
				}
				if n != sum.Samples {
					return nil, fieldErr(field, "stream %q: its shards' samples add to %d, its index says %d: rebuild the index", s.Name, n, sum.Samples)
				}
			}
		}
		for h, sh := range s.Index.Shards {
			if sh.Samples < 0 || sh.Bytes < 0 {
				return nil, fieldErr(field, "stream %q: shard %d (%s) has a negative sample count or size in its index: rebuild the index", s.Name, h, sh.Name)
			}
			if sizes[i] += sh.Samples; sizes[i] > maxSamples {
				return nil, fieldErr(field, "stream %q has more than 2^60 samples", s.Name)
			}
		}
		if sizes[i] == 0 {
			return nil, emptyStream(field, s)
		}
		if total += sizes[i]; total > maxSamples {
			return nil, fieldErr("spec.streams", "the streams hold more than 2^60 samples together")
		}
	}

	counts, err := p.weighCounts(sizes)
	if err != nil {
		return nil, err
	}
	var t int64
	for i, c := range counts {
		if c > maxSamples || t+c > maxSamples {
			return nil, fieldErr(fmt.Sprintf("spec.streams[%d]", i), "the epoch would have more than 2^60 samples")
		}
		t += c
	}
	perSplit := p.GlobalBatchSize / int64(p.NumSplits)
	if l := t / int64(p.NumSplits); l < perSplit {
		return nil, fieldErr("spec.globalBatchSize", "the epoch has %d samples, %d per split, fewer than the %d each split gives to one batch (globalBatchSize/numSplits): lower globalBatchSize or numSplits, or add data",
			t, l, perSplit)
	}
	if p.Schedule != nil {
		if err := p.validateSchedule(); err != nil {
			return nil, err
		}
	}
	return counts, nil
}

// samplesPerStream validates the parameters and applies design §3 step 1:
// weights to samples per stream (per lane, bucketed) per epoch.
func (p *Params) samplesPerStream() ([]int64, error) {
	if p.Bucketing == nil {
		return p.streamCounts()
	}
	if err := p.validateBucketing(); err != nil {
		return nil, err
	}
	return p.bucketCounts()
}

// weighCounts turns weights into samples per stream (design §3 step 1).
func (p *Params) weighCounts(sizes []int64) ([]int64, error) {
	kinds := make([]weightKind, len(p.Streams))
	relative, absolute := -1, -1
	for i, s := range p.Streams {
		set := 0
		for _, v := range []bool{s.Proportion != "", s.Repeat != "", s.Choose != 0} {
			if v {
				set++
			}
		}
		if set > 1 {
			return nil, fieldErr(fmt.Sprintf("spec.streams[%d]", i), "stream %q sets more than one of proportion, repeat and choose: pick one", s.Name)
		}
		kinds[i] = s.kind()
		switch kinds[i] {
		case weightProportion:
			relative = i
		case weightRepeat, weightChoose:
			absolute = i
		}
	}
	if relative >= 0 {
		for i, k := range kinds {
			if k != weightProportion {
				return nil, fieldErr(fmt.Sprintf("spec.streams[%d]", i),
					"stream %q has no proportion but stream %q has one: either every stream has a proportion (relative weights) or none (repeat, choose or nothing)",
					p.Streams[i].Name, p.Streams[relative].Name)
			}
		}
		weights := make([]*big.Rat, len(p.Streams))
		for i, s := range p.Streams {
			w, err := parseDecimal(fmt.Sprintf("spec.streams[%d].proportion", i), s.Proportion)
			if err != nil {
				return nil, err
			}
			if weights[i], err = p.ofTokens(i, w); err != nil {
				return nil, err
			}
		}
		epoch := p.EpochSize
		if epoch == 0 {
			for _, n := range sizes {
				epoch += n
			}
		}
		return largestRemainder(epoch, weights), nil
	}

	if absolute >= 0 && p.EpochSize != 0 {
		return nil, fieldErr("spec.epochSize", "cannot be set with absolute weights (stream %q sets repeat or choose): remove epochSize, or use proportion on every stream", p.Streams[absolute].Name)
	}
	if absolute < 0 && p.EpochSize != 0 {
		// epochSize without weights: proportional to the stream sizes.
		weights := make([]*big.Rat, len(sizes))
		for i, n := range sizes {
			weights[i] = new(big.Rat).SetInt64(n)
		}
		return largestRemainder(p.EpochSize, weights), nil
	}

	counts := make([]int64, len(p.Streams))
	for i, s := range p.Streams {
		field := fmt.Sprintf("spec.streams[%d]", i)
		switch kinds[i] {
		case weightNone:
			counts[i] = sizes[i]
		case weightChoose:
			if s.Choose < 0 {
				return nil, fieldErr(field+".choose", "must be greater than 0, got %d", s.Choose)
			}
			counts[i] = s.Choose
		case weightRepeat:
			r, err := parseDecimal(field+".repeat", s.Repeat)
			if err != nil {
				return nil, err
			}
			c := new(big.Rat).Mul(r, new(big.Rat).SetInt64(sizes[i]))
			q := new(big.Int).Quo(c.Num(), c.Denom())
			if !q.IsInt64() || q.Int64() > maxSamples {
				return nil, fieldErr(field+".repeat", "stream %q repeated %s times has more than 2^60 samples", s.Name, s.Repeat)
			}
			counts[i] = q.Int64()
		}
		if counts[i] == 0 {
			return nil, fieldErr(field, "stream %q gives no sample per epoch with these weights: raise its repeat or choose", s.Name)
		}
	}
	return counts, nil
}

// ofTokens turns stream i's proportion w of tokens into one of packs,
// exactly (w·packs/tokens), when the proportions are of tokens.
func (p *Params) ofTokens(i int, w *big.Rat) (*big.Rat, error) {
	if !p.ProportionsOfTokens {
		return w, nil
	}
	x := p.Streams[i].Index
	if x.Tokens < 1 {
		return nil, fieldErr(fmt.Sprintf("spec.streams[%d]", i), "stream %q has no token in its packs, and spec.packing.proportions is tokens: leave it out", p.Streams[i].Name)
	}
	return w.Mul(w, big.NewRat(x.Samples(), x.Tokens)), nil
}

// largestRemainder splits total in proportion to weights: floor(total·w/Σw)
// each, and the samples left over one each to the largest fractional
// remainders, ties to the earlier stream.
func largestRemainder(total int64, weights []*big.Rat) []int64 {
	sum := new(big.Rat)
	for _, w := range weights {
		sum.Add(sum, w)
	}
	counts := make([]int64, len(weights))
	fracs := make([]*big.Rat, len(weights))
	given := int64(0)
	for i, w := range weights {
		share := new(big.Rat).Mul(new(big.Rat).SetInt64(total), w)
		share.Quo(share, sum)
		q := new(big.Int).Quo(share.Num(), share.Denom())
		counts[i] = q.Int64() // <= total, so it fits
		fracs[i] = share.Sub(share, new(big.Rat).SetInt(q))
		given += counts[i]
	}
	for left := total - given; left > 0; left-- {
		best := -1
		for i, f := range fracs {
			if f != nil && (best < 0 || f.Cmp(fracs[best]) > 0) {
				best = i
			}
		}
		counts[best]++
		fracs[best] = nil
	}
	return counts
}

// version is the plan version of the parameters: 1 (PlanVersion 1, byte
// for byte) unless they use a feature of a later version, which then
// shapes the sequence (docs/planner.md, plan versions).
func (p *Params) version() int {
	if p.Bucketing != nil {
		return 5
	}
	for _, s := range p.Streams {
		if s.Index.Packing != "" {
			return 4
		}
	}
	if p.runs() {
		return 3
	}
	if p.lanes() || p.Schedule != nil {
		return 2
	}
	for _, s := range p.Streams {
		if s.Index.Filter != "" {
			return 2
		}
	}
	return 1
}

// runs reports whether blocks are shuffled in runs of samples (a version 3
// feature).
func (p *Params) runs() bool { return p.Shuffle && p.RunLength > 1 }

// fingerprintInputs lists, in a fixed order, every input that shapes the
// plan's sequence (design §3 step 10), each as a printable value.
func (p *Params) fingerprintInputs() []fingerprintInput {
	in := []fingerprintInput{{"planVersion", fmt.Sprint(p.version())}}
	for i, s := range p.Streams {
		f := fmt.Sprintf("spec.streams[%d]", i)
		in = append(in,
			fingerprintInput{f + ".name", s.Name},
			fingerprintInput{f + ".index", s.Index.ContentHash()},
			fingerprintInput{f + ".weight", s.weightString()},
		)
		if s.Index.Snapshot != "" { // only tables: other plans keep their fingerprints
			in = append(in, fingerprintInput{f + ".snapshot", s.Index.Snapshot})
		}
		if s.Index.Partitions != "" { // only partitioned streams
			in = append(in, fingerprintInput{f + ".partitions", s.Index.Partitions})
		}
		if s.Index.Filter != "" { // only filtered streams
			in = append(in, fingerprintInput{f + ".filter", s.Index.Filter})
		}
		if s.Index.Packing != "" { // only packed datasets
			in = append(in, fingerprintInput{f + ".packing", s.Index.Packing})
		}
		if s.Tokenize != "" { // only tokenized streams
			in = append(in, fingerprintInput{f + ".tokenize", s.Tokenize})
		}
	}
	blockSize := "-"
	if p.Shuffle {
		blockSize = fmt.Sprint(p.BlockSize)
	}
	if p.runs() { // only datasets that shuffle runs: other plans keep their fingerprints
		in = append(in, fingerprintInput{"spec.shuffle.runLength", fmt.Sprint(p.RunLength)})
	}
	if p.lanes() { // only datasets that batch otherwise than at random
		in = append(in, fingerprintInput{"spec.batching", string(p.Batching)})
	}
	if p.ProportionsOfTokens { // only packed datasets whose proportions are of tokens
		in = append(in, fingerprintInput{"spec.packing.proportions", "tokens"})
	}
	if p.Schedule != nil { // only scheduled datasets; the phases may grow
		in = append(in, fingerprintInput{"spec.schedule", "per-stream passes"})
	}
	if b := p.Bucketing; b != nil { // only bucketed datasets
		v := strings.Join(b.Labels, "; ")
		if b.BatchSizes != nil {
			v += fmt.Sprintf("; batch sizes %v", b.BatchSizes)
		}
		in = append(in, fingerprintInput{"spec.bucketing", v})
	}
	return append(in,
		fingerprintInput{"spec.epochSize", fmt.Sprint(p.EpochSize)},
		fingerprintInput{"spec.shuffle.seed", fmt.Sprint(p.Seed)},
		fingerprintInput{"spec.shuffle.enabled", fmt.Sprint(p.Shuffle)},
		fingerprintInput{"spec.shuffle.blockSize", blockSize},
		fingerprintInput{"spec.numSplits", fmt.Sprint(p.NumSplits)},
		fingerprintInput{"spec.globalBatchSize", fmt.Sprint(p.GlobalBatchSize)},
		fingerprintInput{"spec.dropLast", fmt.Sprint(p.DropLast)},
	)
}

func (s Stream) weightString() string {
	switch s.kind() {
	case weightProportion:
		return "proportion=" + canonicalDecimal(s.Proportion)
	case weightRepeat:
		return "repeat=" + canonicalDecimal(s.Repeat)
	case weightChoose:
		return fmt.Sprint("choose=", s.Choose)
	}
	return "none"
}

// canonicalDecimal writes "0.50" and "0.5" the same way, so that an
// equivalent weight does not change the fingerprint.
func canonicalDecimal(s string) string {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return s
	}
	return r.RatString()
}

type fingerprintInput struct{ name, value string }

// Fingerprint identifies a plan: equal fingerprints give equal sequences for
// every epoch, world size, worker count and procs per pod.
type Fingerprint struct {
	// Sum is "v<plan version>-<sha256 of the inputs>".
	Sum string `json:"sum"`
	// Inputs maps every input that shapes the plan to its value (index
	// contents by their hash), to tell which one changed.
	Inputs map[string]string `json:"inputs"`
}

func newFingerprint(version int, in []fingerprintInput) Fingerprint {
	h := sha256.New()
	inputs := make(map[string]string, len(in))
	for _, i := range in {
		_, _ = fmt.Fprintf(h, "%s=%s\n", i.name, i.value)
		inputs[i.name] = i.value
	}
	return Fingerprint{
		Sum:    fmt.Sprintf("v%d-%s", version, hex.EncodeToString(h.Sum(nil))[:32]),
		Inputs: inputs,
	}
}

// Version returns the plan version of the fingerprint's plan (its "v<n>-"
// prefix), 0 when the sum has none.
func (f Fingerprint) Version() int {
	v, rest, ok := strings.Cut(strings.TrimPrefix(f.Sum, "v"), "-")
	n, err := strconv.Atoi(v)
	if !ok || rest == "" || err != nil || n < 1 || !strings.HasPrefix(f.Sum, "v") {
		return 0
	}
	return n
}

// Diff says which inputs differ between two fingerprints, one line each,
// sorted; nil when they are equal.
func (f Fingerprint) Diff(other Fingerprint) []string {
	if f.Sum == other.Sum {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for k, v := range f.Inputs {
		seen[k] = true
		if w, ok := other.Inputs[k]; !ok {
			out = append(out, fmt.Sprintf("%s: %s, now absent", k, short(v)))
		} else if v != w {
			out = append(out, fmt.Sprintf("%s: %s, now %s", k, short(v), short(w)))
		}
	}
	for k, w := range other.Inputs {
		if !seen[k] {
			out = append(out, fmt.Sprintf("%s: absent, now %s", k, short(w)))
		}
	}
	if len(out) == 0 {
		out = append(out, fmt.Sprintf("plan: %s, now %s", f.Sum, other.Sum))
	}
	slices.Sort(out)
	return out
}

func short(v string) string {
	if len(v) == 64 && strings.Trim(v, "0123456789abcdef") == "" {
		return v[:12] + "…" // an index hash
	}
	return v
}

// ceilDiv returns ceil(a/b) for a >= 0, b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// Package planspec turns a TrainingDataset spec and its streams' indexes
// into planner parameters: the one conversion the CLI, the reconciler and
// the sidecar share, so that they all compute the same plan.
package planspec

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"math/big"
	"strings"

	"k8s.io/utils/ptr"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/planner"
)

// Params returns the planner parameters of spec, with indexes[i] the index
// of spec.Streams[i]. Fields the API server would default are defaulted the
// same way, so a manifest read from a file plans like the applied object.
func Params(spec *datav1alpha1.TrainingDatasetSpec, indexes []planner.StreamIndex) (planner.Params, error) {
	if len(indexes) != len(spec.Streams) {
		return planner.Params{}, fmt.Errorf("planspec: %d indexes for %d streams", len(indexes), len(spec.Streams))
	}
	p := planner.Params{
		EpochSize:       ptr.Deref(spec.EpochSize, 0),
		Seed:            uint64(ptr.Deref(spec.Shuffle.Seed, datav1alpha1.DefaultShuffleSeed)), //nolint:gosec // a negative seed is as good as its bits
		NumSplits:       int(spec.NumSplits),
		Shuffle:         ptr.Deref(spec.Shuffle.Enabled, datav1alpha1.DefaultShuffleEnabled),
		BlockSize:       ptr.Deref(spec.Shuffle.BlockSize, datav1alpha1.DefaultBlockSize),
		RunLength:       ptr.Deref(spec.Shuffle.RunLength, datav1alpha1.DefaultRunLength),
		GlobalBatchSize: spec.GlobalBatchSize,
		DropLast:        ptr.Deref(spec.DropLast, datav1alpha1.DefaultDropLast),
		Batching:        planner.Batching(cmp.Or(spec.Batching, datav1alpha1.DefaultBatching)),
	}
	if spec.EpochSize != nil && *spec.EpochSize < 1 {
		return planner.Params{}, &planner.FieldError{Field: "spec.epochSize", Rule: fmt.Sprintf("must be at least 1, got %d", *spec.EpochSize)}
	}
	if spec.Packing != nil {
		if err := checkPacking(spec); err != nil {
			return planner.Params{}, err
		}
	}
	if spec.Bucketing != nil {
		labels, err := BucketLabels(spec.Bucketing)
		if err != nil {
			return planner.Params{}, err
		}
		p.Bucketing = &planner.Bucketing{Buckets: len(labels), Labels: labels}
		if p.Bucketing.BatchSizes, err = BucketBatchSizes(spec); err != nil {
			return planner.Params{}, err
		}
	}
	for i, s := range spec.Streams {
		st := planner.Stream{
			Name:       s.Name,
			Index:      indexes[i],
			Proportion: s.Proportion,
			Repeat:     s.Repeat,
			Tokenize:   TokenizeKey(TokenizeOf(spec, i)),
		}
		if s.Choose != nil {
			if *s.Choose < 1 {
				return planner.Params{}, &planner.FieldError{Field: fmt.Sprintf("spec.streams[%d].choose", i), Rule: fmt.Sprintf("must be at least 1, got %d", *s.Choose)}
			}
			st.Choose = *s.Choose
		}
		b := p.Bucketing
		if b == nil {
			p.Streams = append(p.Streams, st)
			continue
		}
		// The stream's lanes: its rows in each bucket.
		if len(st.Index.Buckets) != b.Buckets {
			return planner.Params{}, fmt.Errorf("planspec: stream %q has %d buckets' indexes, spec.bucketing %d", s.Name, len(st.Index.Buckets), b.Buckets)
		}
		b.Streams = append(b.Streams, s.Name)
		for k, x := range st.Index.Buckets {
			lane := st
			lane.Name, lane.Index = LaneName(s.Name, k), x
			p.Streams = append(p.Streams, lane)
		}
	}
	p.Schedule = Schedule(spec)
	p.ProportionsOfTokens = spec.Packing != nil && spec.Packing.Proportions == datav1alpha1.ProportionOfTokens
	if err := p.Validate(); err != nil {
		return planner.Params{}, err
	}
	return p, nil
}

// LaneName names bucket k of a stream among a bucketed plan's streams.
func LaneName(stream string, k int) string { return fmt.Sprintf("%s[%d]", stream, k) }

// BucketLabels says what each bucket of spec.bucketing holds, checking
// what the CRD's rules cannot: that aspect ratios are numbers above 0, in
// ascending order.
func BucketLabels(b *datav1alpha1.Bucketing) ([]string, error) {
	var bounds []string
	what := "length"
	switch {
	case len(b.Boundaries) > 0 == (len(b.AspectRatios) > 0):
		return nil, &planner.FieldError{Field: "spec.bucketing", Rule: "give boundaries (lengths) or aspectRatios (images), one of them"}
	case len(b.Boundaries) > 0:
		for i, v := range b.Boundaries {
			if v <= 0 || i > 0 && v <= b.Boundaries[i-1] {
				return nil, &planner.FieldError{Field: "spec.bucketing.boundaries", Rule: fmt.Sprintf("%v: lengths above 0 in ascending order, each once", b.Boundaries)}
			}
			bounds = append(bounds, fmt.Sprint(v))
		}
	default:
		what = "aspect ratio"
		var last *big.Rat
		for _, v := range b.AspectRatios {
			r, ok := new(big.Rat).SetString(v)
			if !ok || r.Sign() <= 0 || last != nil && r.Cmp(last) <= 0 {
				return nil, &planner.FieldError{Field: "spec.bucketing.aspectRatios", Rule: fmt.Sprintf("%q: widths over heights above 0 (decimals or fractions, e.g. 0.75 or 4/3) in ascending order", strings.Join(b.AspectRatios, ", "))}
			}
			last = r
			bounds = append(bounds, v)
		}
	}
	if len(bounds)+1 > planner.MaxBuckets {
		return nil, &planner.FieldError{Field: "spec.bucketing", Rule: fmt.Sprintf("%d buckets, at most %d", len(bounds)+1, planner.MaxBuckets)}
	}
	labels := []string{fmt.Sprintf("%s below %s", what, bounds[0])}
	for i := 1; i < len(bounds); i++ {
		labels = append(labels, fmt.Sprintf("%s from %s below %s", what, bounds[i-1], bounds[i]))
	}
	return append(labels, fmt.Sprintf("%s from %s", what, bounds[len(bounds)-1])), nil
}

// BucketBatchSizes returns each bucket's global batch size, from
// spec.bucketing's batchSizes or budget (nil: globalBatchSize for all).
// A budget gives bucket k below boundary B the most samples, a multiple of
// numSplits, whose longest possible length (B − 1) fits it; the last
// bucket, unbounded above, takes globalBatchSize.
func BucketBatchSizes(spec *datav1alpha1.TrainingDatasetSpec) ([]int64, error) {
	b := spec.Bucketing
	S := int64(spec.NumSplits)
	switch {
	case b.BatchSizes != nil && b.Budget != nil:
		return nil, &planner.FieldError{Field: "spec.bucketing", Rule: "give batchSizes or a budget, not both"}
	case b.BatchSizes != nil:
		return b.BatchSizes, nil
	case b.Budget == nil:
		return nil, nil
	case len(b.Boundaries) == 0:
		return nil, &planner.FieldError{Field: "spec.bucketing.budget", Rule: "sizes each bucket's batches by its longest sample, which boundaries bound: bucket by boundaries, or give batchSizes"}
	}
	var out []int64
	for k, bound := range b.Boundaries {
		g := *b.Budget / max(bound-1, 1) / S * S
		if g < S {
			return nil, &planner.FieldError{Field: "spec.bucketing.budget", Rule: fmt.Sprintf("%d holds fewer than numSplits (%d) samples of bucket %d (lengths below %d): raise it, or lower numSplits", *b.Budget, S, k, bound)}
		}
		out = append(out, g)
	}
	return append(out, spec.GlobalBatchSize), nil
}

// InParts says whether the dataset's order plans from its compact indexes'
// headers and counts alone (planner.StreamIndex.Summary and Counts): the
// random order, with no schedule, lanes or buckets. The operator reads
// the indexes of such a dataset by their headers, and a sidecar in parts;
// the indexes of other datasets are read whole.
func InParts(spec *datav1alpha1.TrainingDatasetSpec) bool {
	b := cmp.Or(spec.Batching, datav1alpha1.DefaultBatching)
	return spec.Bucketing == nil && spec.Schedule == nil && b == datav1alpha1.BatchingRandom
}

// Schedule returns the planner's schedule of spec (nil without one).
func Schedule(spec *datav1alpha1.TrainingDatasetSpec) *planner.Schedule {
	if spec.Schedule == nil {
		return nil
	}
	sc := &planner.Schedule{}
	for _, ph := range spec.Schedule.Phases {
		phase := planner.Phase{StartStep: ph.StartStep, GlobalBatchSize: ph.GlobalBatchSize, SkipSteps: ph.SkipSteps, RepeatSteps: ph.RepeatSteps}
		if ph.Proportions != nil {
			phase.Proportions = map[string]string{}
			for _, w := range ph.Proportions {
				phase.Proportions[w.Stream] = w.Proportion
			}
		}
		sc.Phases = append(sc.Phases, phase)
	}
	return sc
}

// PhaseHashes returns the hashes of spec's schedule's phases, in order.
func PhaseHashes(spec *datav1alpha1.TrainingDatasetSpec) []string {
	sc := Schedule(spec)
	if sc == nil {
		return nil
	}
	var out []string
	for _, ph := range sc.Phases {
		out = append(out, ph.Hash())
	}
	return out
}

// Prefetch returns the number of shards a sidecar fetches ahead, as the
// API server defaults spec.sidecar.prefetch: the one reading of it for the
// reconciler (the plan's minimum cache) and the sidecar.
func Prefetch(spec *datav1alpha1.TrainingDatasetSpec) int {
	return int(ptr.Deref(spec.Sidecar.Prefetch, datav1alpha1.DefaultPrefetch))
}

// HandoffBytes is the shared memory the sidecar hands batches over in
// (spec.sidecar.handoffMemory, else the default).
func HandoffBytes(spec *datav1alpha1.TrainingDatasetSpec) int64 {
	if q := spec.Sidecar.HandoffMemory; q != nil {
		return q.Value()
	}
	return datav1alpha1.DefaultHandoffMemory
}

// checkPacking refuses what a packed dataset cannot serve, as the CRD's
// rules do (for manifests planned from a file): a stream's columns (a
// pack holds its column's tokens only) and decoding.
func checkPacking(spec *datav1alpha1.TrainingDatasetSpec) error {
	for i, s := range spec.Streams {
		if len(s.Columns) > 0 {
			return &planner.FieldError{Field: fmt.Sprintf("spec.streams[%d].columns", i),
				Rule: fmt.Sprintf("a packed dataset serves its packing column %q and what packing adds, no other: drop columns", spec.Packing.Column)}
		}
	}
	if len(spec.Decode) > 0 {
		return &planner.FieldError{Field: "spec.decode", Rule: "spec.packing serves only its column's tokens: drop spec.decode"}
	}
	return nil
}

// Packing returns the planner's packing of spec.packing, defaulted as the
// API server defaults it.
func Packing(p *datav1alpha1.Packing) planner.Packing {
	out := planner.Packing{
		SeqLength: uint32(p.SequenceLength), //nolint:gosec // the CRD bounds it to 2^20
		Method:    planner.PackMethod(cmp.Or(p.Method, datav1alpha1.DefaultPackingMethod)),
		Window:    int(ptr.Deref(p.Window, datav1alpha1.DefaultPackingWindow)),
		// A plan input only where set (Packing.String), so that the
		// plans of packings without it keep their fingerprints.
		AcrossShards: p.AcrossShards,
	}
	if cmp.Or(p.Overlong, datav1alpha1.DefaultOverlong) == datav1alpha1.OverlongDrop {
		out.Overlong = planner.DropOverlong
	}
	if out.Method == planner.Concatenate {
		out.Window = 0 // a shard's documents end to end
	}
	return out
}

// TokenizeOf is stream i's tokenization: its own, else the dataset's
// (spec.tokenize), else nil.
func TokenizeOf(spec *datav1alpha1.TrainingDatasetSpec, i int) *datav1alpha1.Tokenize {
	if t := spec.Streams[i].Tokenize; t != nil {
		return t
	}
	return spec.Tokenize
}

// TokenizeOutput is the column a tokenization serves its ids in.
func TokenizeOutput(t *datav1alpha1.Tokenize) string { return cmp.Or(t.Output, "input_ids") }

// TokenizeKey is what of a tokenization enters the plan's fingerprint:
// the tokenizer's content hash and every option that changes the ids
// ("" for none).
func TokenizeKey(t *datav1alpha1.Tokenize) string {
	if t == nil {
		return ""
	}
	key := fmt.Sprintf("sha256=%s column=%s output=%s special=%t eod=%q ids=%q", t.Tokenizer.SHA256, t.Column, TokenizeOutput(t),
		ptr.Deref(t.AddSpecialTokens, true), t.EndOfDocument, TokenizerReference)
	if c := t.Chat; c != nil { // only chat datasets' keys change: the others' plans stay
		sum := sha256.Sum256([]byte(c.Template))
		key += fmt.Sprintf(" chat=%x bos=%q eos=%q mask=%s", sum, c.BOSToken, c.EOSToken, ChatLossMask(c))
		if c.AssistantStart != "" || c.AssistantEnd != "" {
			key += fmt.Sprintf(" start=%q end=%q", c.AssistantStart, c.AssistantEnd)
		}
	}
	return key
}

// TokenizerReference names the library whose ids the sidecar's tokenizer
// gives (sidecar/tokenizer, checked against it): in every tokenization's
// key, so that token lengths and cached tokens made by a tokenizer that
// gave other ids are made again, never served.
const TokenizerReference = "tokenizers 0.23.3"

// ChatLossMask is the column a chat tokenization serves its loss mask in.
func ChatLossMask(c *datav1alpha1.ChatTemplate) string { return cmp.Or(c.LossMask, "assistant_masks") }

// Resolved is stream i of spec with the dataset's tokenization where the
// stream has none of its own: what streams.Open opens.
func Resolved(spec *datav1alpha1.TrainingDatasetSpec, i int) datav1alpha1.Stream {
	s := spec.Streams[i]
	s.Tokenize = TokenizeOf(spec, i)
	return s
}

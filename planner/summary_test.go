package planner

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// summarize replaces every stream's shards with what a header says of them.
func summarize(p Params) Params {
	out := p
	out.Streams = append([]Stream(nil), p.Streams...)
	for i, s := range out.Streams {
		x := s.Index
		var maxBytes int64
		for _, sh := range x.Shards {
			if sh.Samples > 0 {
				maxBytes = max(maxBytes, sh.Bytes)
			}
		}
		out.Streams[i].Index = StreamIndex{Snapshot: x.Snapshot, Partitions: x.Partitions,
			Summary: &Summary{Shards: x.Len(), Samples: x.Samples(), Bytes: x.Bytes(), MaxShardBytes: maxBytes, ContentHash: x.ContentHash()}}
	}
	return out
}

// A plan of the indexes' summaries has the fingerprint, counts and steps
// of the plan of their shards, for every weighting and geometry of the
// random order, and no epoch.
func TestAPlanOfSummariesIsThePlanOfTheShardsWithoutEpochs(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	planned := 0
	for range 300 {
		p := randomParams(r)
		for i := range p.Streams { // summaries are of unfiltered streams
			p.Streams[i].Index.Filter = ""
		}
		full, err := New(p)
		if err != nil {
			continue
		}
		if _, random := full.order.(*randomOrder); !random {
			continue
		}
		planned++
		sum, err := New(summarize(p))
		if err != nil {
			t.Fatalf("the summaries of a plan's indexes do not plan: %v", err)
		}
		if !sum.Summarized() || full.Summarized() || sum.Fingerprint().Sum != full.Fingerprint().Sum || sum.Total() != full.Total() ||
			sum.Steps() != full.Steps() || sum.SplitLen() != full.SplitLen() || sum.Version() != full.Version() {
			t.Fatalf("summarized: %v %d samples %d steps, full: %v %d samples %d steps", sum.Fingerprint(), sum.Total(), sum.Steps(), full.Fingerprint(), full.Total(), full.Steps())
		}
		var fe *FieldError
		if _, err := sum.Epoch(0); !errors.As(err, &fe) || !strings.Contains(err.Error(), "read the indexes whole") {
			t.Fatalf("the epoch of a summarized plan: %v", err)
		}
		if _, err := sum.MinCacheBytes(1, 2); err == nil {
			t.Fatal("a summarized plan sized a cache")
		}
	}
	if planned < 100 {
		t.Fatalf("%d plans of the random order compared, want 100", planned)
	}
	p := baseParams()
	p.Batching = BatchingPerStream
	if _, err := New(summarize(p)); err == nil || !strings.Contains(err.Error(), "at random only") {
		t.Fatalf("a per-stream plan of summaries: %v", err)
	}
	p = baseParams()
	p.Streams[0].Index = summarize(p).Streams[0].Index
	p.Streams[0].Index.Shards = index(1, 2).Shards
	if _, err := New(p); err == nil || !strings.Contains(err.Error(), "stands for its shards alone") {
		t.Fatalf("a summary with shards: %v", err)
	}
}

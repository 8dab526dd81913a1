package pipeline

import (
	"time"

	"github.com/shardfeed/shardfeed/sidecar/cache"
)

// Stats are the pipeline's counters and gauges.
type Stats struct {
	Cache cache.Stats `json:"cache"`
	// DecodedBytes, DecodedShards and DecodedRows are in memory now:
	// the decoded columns' bytes (on the heap), and the shards' rows.
	DecodedBytes int64 `json:"decodedBytes"`
	// MappedBytes are the cached parts the decoded shards map: the page
	// cache's, not the heap's; the columns the format finds in place are
	// served from them.
	MappedBytes   int64 `json:"mappedBytes"`
	DecodedShards int   `json:"decodedShards"`
	DecodedRows   int64 `json:"decodedRows"`
	// ShardsDecoded counts every decode since start; DecodeHits the reads
	// served by a shard already decoded.
	ShardsDecoded    int64 `json:"shardsDecoded"`
	RowsDecoded      int64 `json:"rowsDecoded"`
	DecodeHits       int64 `json:"decodeHits"`
	DecodedEvictions int64 `json:"decodedEvictions"`
	// HeapCopies counts the mapped shards a full cache took back while a
	// reader still needed them: decoded again onto the heap.
	HeapCopies     int64 `json:"heapCopies"`
	Prefetched     int64 `json:"prefetched"`
	PrefetchErrors int64 `json:"prefetchErrors"`
	// WarmedNext counts the shards of the next epoch's first steps a
	// prefetcher had at hand (fetched into the cache, found there or
	// decoded) before that epoch's readers came.
	// (Their downloads are the cache's AheadDownloads.)
	WarmedNext int64 `json:"warmedNext"`
	// SkippedShards and SkippedRows count the shards delivered as pad
	// rows under onCorruptShard: skip.
	SkippedShards   int64   `json:"skippedShards"`
	SkippedRows     int64   `json:"skippedRows"`
	Batches         int64   `json:"batches"`
	BatchRows       int64   `json:"batchRows"`
	FetchSeconds    float64 `json:"fetchSeconds"`
	DecodeSeconds   float64 `json:"decodeSeconds"`
	AssembleSeconds float64 `json:"assembleSeconds"`
}

// Stats returns the counters.
func (p *Pipeline) Stats() Stats {
	b, mapped, n, rows := p.decoded.usage()
	s := &p.stats
	return Stats{
		Cache:        p.opts.Cache.Stats(),
		DecodedBytes: b, MappedBytes: mapped, DecodedShards: n, DecodedRows: rows,
		ShardsDecoded: s.decodedShards.Load(), RowsDecoded: s.decodedRows.Load(), DecodeHits: s.decodedHits.Load(),
		DecodedEvictions: s.decodedEvictions.Load(), HeapCopies: s.heapCopies.Load(), Prefetched: s.prefetched.Load(), PrefetchErrors: s.prefetchErrors.Load(),
		WarmedNext: s.warmedNext.Load(),
		Batches:    s.batches.Load(), BatchRows: s.batchRows.Load(),
		SkippedShards: s.skippedShards.Load(), SkippedRows: s.skippedRows.Load(),
		FetchSeconds:    time.Duration(s.fetchNanos.Load()).Seconds(),
		DecodeSeconds:   time.Duration(s.decodeNanos.Load()).Seconds(),
		AssembleSeconds: time.Duration(s.assembleNanos.Load()).Seconds(),
	}
}

// FetchedRows returns the rows of the shards in the cache that are not
// decoded now. It looks at every shard of the plan (of a stream read in
// parts, every shard resolved): for /v1/status, not for every metrics
// scrape.
func (p *Pipeline) FetchedRows() int64 {
	var fetched int64
	for i, st := range p.opts.Streams {
		x := &p.plan.Params().Streams[i].Index
		shards := func(yield func(int) bool) {
			for j := range x.Len() {
				if !yield(int(j)) {
					return
				}
			}
		}
		if c := st.Lean(); c != nil {
			shards = c.ResolvedShards
		}
		for j := range shards {
			if p.decoded.has(shardKey{i, j}) {
				continue
			}
			on := true
			for _, part := range st.Parts(j) {
				on = on && p.opts.Cache.Present(part)
			}
			if on {
				fetched += x.ShardSamples(int64(j))
			}
		}
	}
	return fetched
}

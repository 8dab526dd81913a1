package server

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardfeed/shardfeed/sidecar/cache"
	"github.com/shardfeed/shardfeed/sidecar/pipeline"
)

// TestPipelineMetricsReadTheStatsOncePerScrape: a scrape of the pipeline
// metrics costs one Stats call, and each carries its stat.
func TestPipelineMetricsReadTheStatsOncePerScrape(t *testing.T) {
	calls := 0
	stats := func() pipeline.Stats {
		calls++
		return pipeline.Stats{Cache: cache.Stats{FetchedBytes: 1000, Downloads: 4, UsedBytes: 700, LimitBytes: 900, PeakBytes: 800, DerivedHits: 5, DerivedStored: 6,
			Node: cache.NodeStats{Hits: 7, Bytes: 7 << 20, Misses: 2}, AheadBytes: 300, AheadDownloads: 1},
			WarmedNext:   9,
			FetchSeconds: 1.5, DecodeSeconds: 2.5, AssembleSeconds: 0.5, ShardsDecoded: 3, SkippedShards: 1, SkippedRows: 82, DecodedBytes: 4096, MappedBytes: 8192, DecodedShards: 2, DecodedRows: 640}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newPipelineCollector("shardfeed_sidecar", stats))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("one scrape read the stats %d times, want 1", calls)
	}
	want := map[string]float64{
		"shardfeed_sidecar_fetched_bytes_total": 1000, "shardfeed_sidecar_downloads_total": 4, "shardfeed_sidecar_fetch_seconds_total": 1.5,
		"shardfeed_sidecar_decode_seconds_total": 2.5, "shardfeed_sidecar_assemble_seconds_total": 0.5, "shardfeed_sidecar_shards_decoded_total": 3,
		"shardfeed_sidecar_skipped_shards_total": 1, "shardfeed_sidecar_skipped_samples_total": 82, "shardfeed_sidecar_cache_bytes": 700,
		"shardfeed_sidecar_cache_limit_bytes": 900, "shardfeed_sidecar_cache_peak_bytes": 800, "shardfeed_sidecar_decoded_bytes": 4096, "shardfeed_sidecar_mapped_bytes": 8192,
		"shardfeed_sidecar_decoded_shards": 2, "shardfeed_sidecar_decoded_rows": 640,
		"shardfeed_sidecar_tokenized_shards_cached_total": 5, "shardfeed_sidecar_tokenized_shards_stored_total": 6,
		"shardfeed_sidecar_node_cache_hits_total": 7, "shardfeed_sidecar_node_cache_bytes_total": 7 << 20, "shardfeed_sidecar_node_cache_misses_total": 2,
		"shardfeed_sidecar_fetched_ahead_bytes_total": 300, "shardfeed_sidecar_next_epoch_warmed_shards_total": 9,
	}
	for _, f := range families {
		m := f.GetMetric()[0]
		got := m.GetGauge().GetValue()
		if m.Counter != nil {
			got = m.GetCounter().GetValue()
		}
		if w, ok := want[f.GetName()]; !ok || got != w {
			t.Errorf("%s = %v, want %v (known: %v)", f.GetName(), got, w, ok)
		}
		delete(want, f.GetName())
	}
	if len(want) > 0 {
		t.Errorf("missing %v", want)
	}
}

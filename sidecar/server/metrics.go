package server

import (
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	batchesServed, consumedRows, streamErrors, badRequests prometheus.Counter
	commits, commitsRefused                                prometheus.Counter
	activeStreams                                          prometheus.Gauge
	batchWait                                              prometheus.Histogram
	rowsServed                                             *prometheus.CounterVec
}

// newMetrics creates the sidecar's metrics and registers them, with the
// pipeline's counters read at scrape time, on reg (if not nil).
func newMetrics(s *Server, reg prometheus.Registerer) *metrics {
	const ns = "shardfeed_sidecar"
	m := &metrics{
		batchesServed:  prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "batches_served_total", Help: "Batches written to clients."}),
		consumedRows:   prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "rows_served_total", Help: "Rows written to clients."}),
		streamErrors:   prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "stream_errors_total", Help: "Batch streams ended by an error."}),
		badRequests:    prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "bad_requests_total", Help: "Batch requests refused with 400."}),
		commits:        prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "commits_total", Help: "Commits persisted."}),
		commitsRefused: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "commits_refused_total", Help: "Commits refused (backwards, fenced, other plan)."}),
		activeStreams:  prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "active_streams", Help: "Batch streams being served."}),
		batchWait: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "batch_wait_seconds",
			Help: "Time a stream waited for its next batch to be assembled.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}),
		rowsServed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "stream_rows_served_total", Help: "Rows written to clients, per dataset stream."}, []string{"stream"}),
	}
	if reg == nil {
		return m
	}
	p := s.cfg.Pipeline
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: name, Help: help}, f)
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help}, f)
	}
	reg.MustRegister(m.batchesServed, m.consumedRows, m.streamErrors, m.badRequests, m.commits, m.commitsRefused, m.activeStreams, m.batchWait, m.rowsServed,
		counter("fetched_bytes_total", "Bytes downloaded from object storage, retries included.", func() float64 { return float64(p.Stats().Cache.FetchedBytes) }),
		counter("downloads_total", "Shard downloads.", func() float64 { return float64(p.Stats().Cache.Downloads) }),
		counter("fetch_seconds_total", "Time spent fetching shards.", func() float64 { return p.Stats().FetchSeconds }),
		counter("decode_seconds_total", "Time spent decoding shards.", func() float64 { return p.Stats().DecodeSeconds }),
		counter("assemble_seconds_total", "Time spent assembling batches.", func() float64 { return p.Stats().AssembleSeconds }),
		counter("shards_decoded_total", "Shards decoded.", func() float64 { return float64(p.Stats().ShardsDecoded) }),
		counter("skipped_shards_total", "Corrupt shards delivered as pad rows (onCorruptShard: skip).", func() float64 { return float64(p.Stats().SkippedShards) }),
		counter("skipped_samples_total", "Samples of skipped shards, delivered as pad rows.", func() float64 { return float64(p.Stats().SkippedRows) }),
		gauge("cache_bytes", "Bytes of the shard cache on disk.", func() float64 { return float64(p.Stats().Cache.UsedBytes) }),
		gauge("cache_limit_bytes", "The shard cache's budget.", func() float64 { return float64(p.Stats().Cache.LimitBytes) }),
		gauge("cache_peak_bytes", "The most the shard cache held at once.", func() float64 { return float64(p.Stats().Cache.PeakBytes) }),
		gauge("decoded_bytes", "Memory of decoded shards.", func() float64 { return float64(p.Stats().DecodedBytes) }),
	)
	return m
}

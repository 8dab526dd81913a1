package server

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardfeed/shardfeed/internal/version"
	"github.com/shardfeed/shardfeed/sidecar/pipeline"
)

type metrics struct {
	batchesServed, consumedRows, streamErrors, badRequests prometheus.Counter
	commits, commitsRefused                                prometheus.Counter
	activeStreams                                          prometheus.Gauge
	batchWait                                              prometheus.Histogram
	rowsServed                                             *prometheus.CounterVec
	// dataWait is what the trainers report of their own waiting (POST
	// /v1/waits): the time a training loop spent blocked on its next batch.
	dataWait                      *prometheus.HistogramVec
	committedEpoch, committedStep prometheus.Gauge
}

// waitBuckets cover 100 µs (a batch that was ready) to 26 s (a loop
// starved by its store).
var waitBuckets = prometheus.ExponentialBuckets(0.0001, 4, 10)

// newMetrics creates the sidecar's metrics and registers them, with the
// pipeline's counters read at scrape time, on reg (if not nil).
func newMetrics(s *Server, reg prometheus.Registerer) *metrics {
	const ns = "shardfeed_sidecar"
	job := prometheus.Labels{"dataset": s.cfg.Job.Dataset, "job": s.cfg.Job.Job}
	m := &metrics{
		batchesServed:  prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "batches_served_total", Help: "Batches written to clients."}),
		consumedRows:   prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "rows_served_total", Help: "Rows written to clients."}),
		streamErrors:   prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "stream_errors_total", Help: "Batch streams ended by an error."}),
		badRequests:    prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "bad_requests_total", Help: "Batch requests refused with 400."}),
		commits:        prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "commits_total", Help: "Commits persisted."}),
		commitsRefused: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "commits_refused_total", Help: "Commits refused (backwards, fenced, other plan)."}),
		activeStreams:  prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "active_streams", Help: "Batch streams being served."}),
		batchWait: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "batch_wait_seconds",
			Help: "Time a stream waited for its next batch to be assembled.", Buckets: waitBuckets}),
		rowsServed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "stream_rows_served_total", Help: "Rows written to clients, per dataset stream."}, []string{"stream"}),
		dataWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "data_wait_seconds",
			Help: "Time a training loop waited for each batch, as its client reports it, per rank.", Buckets: waitBuckets}, []string{"rank"}),
		committedEpoch: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "committed_epoch",
			Help: "The epoch of the job's last commit through this sidecar.", ConstLabels: job}),
		committedStep: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "committed_step",
			Help: "The step of the job's last commit through this sidecar: every rank finished the steps before it.", ConstLabels: job}),
	}
	if reg == nil {
		return m
	}
	// A constant 1 naming the pod's dataset and job, to join the pod's
	// other series on (per-job views); not "job", which Prometheus sets to
	// the scrape's own.
	info := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "job_info",
		Help:        "A constant 1, labelled with the pod's dataset and training job: join a pod's series on it for a job's view.",
		ConstLabels: prometheus.Labels{"dataset": s.cfg.Job.Dataset, "training_job": s.cfg.Job.Job}})
	info.Set(1)
	reg.MustRegister(m.batchesServed, m.consumedRows, m.streamErrors, m.badRequests, m.commits, m.commitsRefused, m.activeStreams, m.batchWait, m.rowsServed,
		m.dataWait, m.committedEpoch, m.committedStep, version.BuildInfo(ns), newPipelineCollector(ns, s.cfg.Pipeline.Stats), info)
	if c := s.cfg.StoreCounts; c != nil {
		for op, n := range map[string]*atomic.Int64{"get": &c.Gets, "stat": &c.Stats, "list": &c.Lists, "retry": &c.Retries} {
			reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Name: "store_requests_total",
				Help:        "Requests to the object stores (indexes and shards), by kind; retry counts each retried attempt.",
				ConstLabels: prometheus.Labels{"op": op}}, func() float64 { return float64(n.Load()) }))
		}
	}
	return m
}

// pipelineMetric is one of the pipeline's stats as a metric.
type pipelineMetric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(*pipeline.Stats) float64
}

// pipelineCollector reads the pipeline's stats once per scrape.
type pipelineCollector struct {
	stats   func() pipeline.Stats
	metrics []pipelineMetric
}

func newPipelineCollector(ns string, stats func() pipeline.Stats) *pipelineCollector {
	c := &pipelineCollector{stats: stats}
	add := func(name, help string, kind prometheus.ValueType, value func(*pipeline.Stats) float64) {
		c.metrics = append(c.metrics, pipelineMetric{desc: prometheus.NewDesc(prometheus.BuildFQName(ns, "", name), help, nil, nil), kind: kind, value: value})
	}
	counter, gauge := prometheus.CounterValue, prometheus.GaugeValue
	add("fetched_bytes_total", "Bytes downloaded from object storage, retries included.", counter, func(s *pipeline.Stats) float64 { return float64(s.Cache.FetchedBytes) })
	add("fetched_ahead_bytes_total", "Of those, the bytes of the next epoch's first shards, fetched before that epoch began.", counter,
		func(s *pipeline.Stats) float64 { return float64(s.Cache.AheadBytes) })
	add("next_epoch_warmed_shards_total", "Shards of the next epoch's first steps at hand (fetched ahead, or found in the cache) before that epoch began.", counter,
		func(s *pipeline.Stats) float64 { return float64(s.WarmedNext) })
	add("downloads_total", "Shard downloads.", counter, func(s *pipeline.Stats) float64 { return float64(s.Cache.Downloads) })
	add("node_cache_hits_total", "Shards the node agent gave, checked against the index (#58): not fetched from the store by this pod.", counter,
		func(s *pipeline.Stats) float64 { return float64(s.Cache.Node.Hits) })
	add("node_cache_bytes_total", "Bytes of the shards the node agent gave.", counter, func(s *pipeline.Stats) float64 { return float64(s.Cache.Node.Bytes) })
	add("node_cache_misses_total", "Shards the node agent could not give (gone, slow, refused, or bytes that did not check), read from the store.", counter,
		func(s *pipeline.Stats) float64 { return float64(s.Cache.Node.Misses) })
	add("fetch_seconds_total", "Time spent fetching shards.", counter, func(s *pipeline.Stats) float64 { return s.FetchSeconds })
	add("decode_seconds_total", "Time spent decoding shards.", counter, func(s *pipeline.Stats) float64 { return s.DecodeSeconds })
	add("assemble_seconds_total", "Time spent assembling batches.", counter, func(s *pipeline.Stats) float64 { return s.AssembleSeconds })
	add("shards_decoded_total", "Shards decoded.", counter, func(s *pipeline.Stats) float64 { return float64(s.ShardsDecoded) })
	add("skipped_shards_total", "Corrupt shards delivered as pad rows (onCorruptShard: skip).", counter, func(s *pipeline.Stats) float64 { return float64(s.SkippedShards) })
	add("skipped_samples_total", "Samples of skipped shards, delivered as pad rows.", counter, func(s *pipeline.Stats) float64 { return float64(s.SkippedRows) })
	add("cache_bytes", "Bytes of the shard cache on disk.", gauge, func(s *pipeline.Stats) float64 { return float64(s.Cache.UsedBytes) })
	add("cache_limit_bytes", "The shard cache's budget.", gauge, func(s *pipeline.Stats) float64 { return float64(s.Cache.LimitBytes) })
	add("cache_peak_bytes", "The most the shard cache held at once.", gauge, func(s *pipeline.Stats) float64 { return float64(s.Cache.PeakBytes) })
	add("tokenized_shards_cached_total", "Shards whose tokens were read back from the cache (spec.tokenize), not tokenized again.", counter,
		func(s *pipeline.Stats) float64 { return float64(s.Cache.DerivedHits) })
	add("tokenized_shards_stored_total", "Shards whose tokens were kept in the cache.", counter, func(s *pipeline.Stats) float64 { return float64(s.Cache.DerivedStored) })
	add("decoded_bytes", "Heap memory of decoded shards' columns.", gauge, func(s *pipeline.Stats) float64 { return float64(s.DecodedBytes) })
	add("mapped_bytes", "Cached shard files the decoded shards map (page cache).", gauge, func(s *pipeline.Stats) float64 { return float64(s.MappedBytes) })
	// The queue between the cache and the batches: decoded shards in
	// memory and their rows, which assembly takes from.
	add("decoded_shards", "Decoded shards in memory.", gauge, func(s *pipeline.Stats) float64 { return float64(s.DecodedShards) })
	add("decoded_rows", "Rows of the decoded shards in memory.", gauge, func(s *pipeline.Stats) float64 { return float64(s.DecodedRows) })
	return c
}

// Describe implements prometheus.Collector.
func (c *pipelineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.metrics {
		ch <- m.desc
	}
}

// Collect implements prometheus.Collector: one read of the stats for all.
func (c *pipelineCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	for _, m := range c.metrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(&st))
	}
}

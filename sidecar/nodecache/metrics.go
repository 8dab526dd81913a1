package nodecache

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Collector exports the agent's counters to Prometheus.
func (a *Agent) Collector() prometheus.Collector { return agentCollector{a} }

type agentCollector struct{ a *Agent }

var (
	descRequests = prometheus.NewDesc("shardfeed_node_cache_requests_total",
		"Shard requests the node agent answered, by result: hit (from the node's cache), fill (fetched for the request), refused (not authenticated or not servable), failed (the store refused or failed).",
		[]string{"result"}, nil)
	descServed = prometheus.NewDesc("shardfeed_node_cache_served_bytes_total",
		"Bytes the node agent served, by how: hit bytes no pod fetched from the store (egress saved), fill bytes fetched first.",
		[]string{"how"}, nil)
	descNamespaceHits = prometheus.NewDesc("shardfeed_node_cache_namespace_hits_total",
		"Shards the node agent served from its cache, by the caller's namespace.", []string{"namespace"}, nil)
	descNamespaceSaved = prometheus.NewDesc("shardfeed_node_cache_namespace_saved_bytes_total",
		"Bytes the node agent served from its cache, by the caller's namespace: the egress they did not cost.", []string{"namespace"}, nil)
	descFetched = prometheus.NewDesc("shardfeed_node_cache_fetched_bytes_total",
		"Bytes the node agent fetched from stores, retries included.", nil, nil)
	descUsed = prometheus.NewDesc("shardfeed_node_cache_used_bytes",
		"Bytes of the node's cache on disk and reserved.", nil, nil)
	descLimit = prometheus.NewDesc("shardfeed_node_cache_limit_bytes",
		"The node's cache budget (0: none).", nil, nil)
	descEvictions = prometheus.NewDesc("shardfeed_node_cache_evictions_total",
		"Entries evicted from the node's cache to make room.", nil, nil)
	descDiscarded = prometheus.NewDesc("shardfeed_node_cache_discarded_total",
		"Entries found changed on the node's disk since they were verified (garbled, truncated), discarded and filled again.", nil, nil)
	descReused = prometheus.NewDesc("shardfeed_node_cache_reused_total",
		"Entries of an earlier run of the agent found on disk and verified again.", nil, nil)
	descWarmRequests = prometheus.NewDesc("shardfeed_node_cache_warm_requests_total",
		"Warm requests taken: the shards a pod reads next, named by its sidecar.", nil, nil)
	descWarmShards = prometheus.NewDesc("shardfeed_node_cache_warm_shards_total",
		"Shards warm requests named that the node lacked, by result: filled (fetched ahead), failed (the store refused or failed), dropped (the queue full, waited too long, or no room beside the shards wanted).",
		[]string{"result"}, nil)
	descWarmHits = prometheus.NewDesc("shardfeed_node_cache_warm_hits_total",
		"Shards served that a warm fill had fetched before the pod asked.", nil, nil)
	descWanted = prometheus.NewDesc("shardfeed_node_cache_wanted_entries",
		"Entries the node's pods read next (named in warm requests lately): evicted only when no other will do.", nil, nil)
)

func (c agentCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRequests, descServed, descNamespaceHits, descNamespaceSaved, descFetched, descUsed, descLimit, descEvictions, descDiscarded, descReused,
		descWarmRequests, descWarmShards, descWarmHits, descWanted} {
		ch <- d
	}
	c.a.lead.Describe(ch)
}

func (c agentCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.a.Stats()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(descRequests, st.Hits, "hit")
	counter(descRequests, st.Fills, "fill")
	counter(descRequests, st.Refused, "refused")
	counter(descRequests, st.Failed, "failed")
	counter(descServed, st.HitBytes, "hit")
	counter(descServed, st.FilledBytes, "fill")
	for ns, s := range st.ByNamespace {
		counter(descNamespaceHits, s.Hits, ns)
		counter(descNamespaceSaved, s.HitBytes, ns)
	}
	counter(descFetched, st.Cache.FetchedBytes)
	counter(descEvictions, st.Cache.Evictions)
	counter(descReused, st.Cache.Reused)
	counter(descDiscarded, st.Discarded)
	ch <- prometheus.MustNewConstMetric(descUsed, prometheus.GaugeValue, float64(st.Cache.UsedBytes))
	ch <- prometheus.MustNewConstMetric(descLimit, prometheus.GaugeValue, float64(st.Cache.LimitBytes))
	counter(descWarmRequests, st.WarmRequests)
	counter(descWarmShards, st.WarmFills, "filled")
	counter(descWarmShards, st.WarmFailed, "failed")
	counter(descWarmShards, st.WarmDropped, "dropped")
	counter(descWarmHits, st.WarmHits)
	ch <- prometheus.MustNewConstMetric(descWanted, prometheus.GaugeValue, float64(st.Wanted))
	c.a.lead.Collect(ch)
}

//go:build e2e

package e2e

import (
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/test/e2e/scenario"
)

// Two jobs of one dataset on the node with the chart's node cache: the
// first through a deleted pod and a rescale 4→2, the second after it.
// Every shard comes from the store once, fetched by the node agent; no
// sidecar reads a shard from the store; every value is checked (by the
// sidecars, against the index) and both lineages are exactly once. The
// first job's story runs again in a namespace without the agent, for the
// time to first batch side by side, and works as it did before the agent.
func TestEndToEndTheNodeCacheServesRestartsRescalesAndASecondJob(t *testing.T) {
	o, ctx := clusterOptions(t, 800)
	rep, err := scenario.RunNodeCache(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []struct {
		name string
		l    scenario.Lineage
	}{{"first", rep.FirstLineage}, {"second", rep.SecondLineage}, {"first, without the agent", rep.WithoutLineage}} {
		for _, p := range j.l.Problems {
			t.Errorf("job %s: %s", j.name, p)
		}
		if !j.l.OK() {
			t.Errorf("job %s: the committed lineage is not exactly the plan: %s", j.name, j.l.Summary())
		}
	}
	if len(rep.FirstLineage.Worlds) != 2 || rep.FirstLineage.Retrained == 0 {
		t.Errorf("the first job trained in worlds %v with %d steps retrained: the rescale or the deletion did not happen mid-epoch", rep.FirstLineage.Worlds, rep.FirstLineage.Retrained)
	}
	for _, r := range []struct {
		name  string
		reads scenario.SidecarReads
	}{{"the first job's 4 pods", rep.First}, {"the rescaled pods", rep.Rescaled}, {"the second job", rep.Second}} {
		t.Logf("%s: %d sidecars, %d bytes from the store, %d shards (%d bytes) from the node, %d passed by; ready after %v",
			r.name, r.reads.Sidecars, r.reads.StoreBytes, r.reads.NodeHits, r.reads.NodeBytes, r.reads.NodeMisses, r.reads.Ready)
		if r.reads.Sidecars == 0 || r.reads.NodeHits == 0 {
			t.Errorf("%s: %d sidecars counted, %d shards from the node", r.name, r.reads.Sidecars, r.reads.NodeHits)
		}
		if r.reads.StoreBytes != 0 || r.reads.NodeMisses != 0 {
			t.Errorf("%s read %d bytes from the store (%d shards the agent did not give)", r.name, r.reads.StoreBytes, r.reads.NodeMisses)
		}
	}
	// Without the agent: the sidecars read the store, as before it.
	for _, r := range []struct {
		name  string
		reads scenario.SidecarReads
	}{{"the first job's 4 pods without the agent", rep.WithoutFirst}, {"the rescaled pods without the agent", rep.WithoutRescaled}} {
		t.Logf("%s: %d sidecars, %d bytes from the store, %d shards from the node; ready after %v", r.name, r.reads.Sidecars, r.reads.StoreBytes, r.reads.NodeHits, r.reads.Ready)
		if r.reads.Sidecars == 0 || r.reads.StoreBytes == 0 || r.reads.NodeHits+r.reads.NodeMisses != 0 {
			t.Errorf("%s: %d sidecars, %d bytes from the store, %d node hits, %d misses: want the store's bytes and no agent", r.name,
				r.reads.Sidecars, r.reads.StoreBytes, r.reads.NodeHits, r.reads.NodeMisses)
		}
	}
	t.Logf("time from sidecar start to first batch ready: rescaled pods %v with the agent, %v without; first pods %v with, %v without",
		rep.Rescaled.Ready, rep.WithoutRescaled.Ready, rep.First.Ready, rep.WithoutFirst.Ready)
	// What the second job's sidecars reported, in status.jobs.
	if r := rep.SecondStatus; r == nil || r.StoreBytes != rep.Second.StoreBytes || r.NodeCacheHits != rep.Second.NodeHits ||
		r.NodeCacheBytes != rep.Second.NodeBytes || r.NodeCacheShare != "100.0%" {
		t.Errorf("the second job's status.jobs reads %+v; want its sidecars' %d store bytes, %d node hits of %d bytes, 100.0%% from the node",
			r, rep.Second.StoreBytes, rep.Second.NodeHits, rep.Second.NodeBytes)
	}
	first, second := rep.AgentAfterFirst, rep.AgentAfterSecond
	t.Logf("the node agent: %d bytes fetched (%d entries of %d bytes on the node; the dataset's files: %d bytes), %d fills for requests and %d ahead (warm), %d hits after the first job; %d bytes, %d hits (%d bytes) after the second; %d hits on entries fetched ahead, on the node %.3f s on average before",
		first.FetchedBytes, rep.Entries, rep.EntryBytes, rep.DatasetBytes, first.Fills, first.WarmFills, first.Hits, second.FetchedBytes, second.Hits, second.HitBytes,
		second.WarmHits, second.LeadSeconds/float64(max(second.WarmHits, 1)))
	// Each entry filled once, for a request or ahead of one: no shard
	// already on the node was fetched again, through a deleted pod and a
	// rescale.
	if fills := first.Fills + first.WarmFills; fills == 0 || fills != rep.Entries || first.FetchedBytes != rep.EntryBytes {
		t.Errorf("the agent filled %d times and fetched %d bytes for %d entries of %d bytes: a shard already on the node was fetched again",
			fills, first.FetchedBytes, rep.Entries, rep.EntryBytes)
	}
	if second.FetchedBytes != first.FetchedBytes {
		t.Errorf("the second job cost %d bytes of egress, want 0", second.FetchedBytes-first.FetchedBytes)
	}
	if second.Hits-first.Hits < rep.Second.NodeHits {
		t.Errorf("the agent counts %d hits for the second job, whose sidecars took %d shards from the node", second.Hits-first.Hits, rep.Second.NodeHits)
	}
	// The hostile tenant beside the second job (#85): no way onto the
	// agent's files, nobody talks to its fake agent, none of the victim's
	// bytes for keys that read nothing, its random tokens and garbage
	// bounded; the second job above stayed exactly once, all from the node.
	h := rep.Hostile
	if h == nil {
		t.Fatal("no report of the hostile tenant")
	}
	if !strings.Contains(h.HostPathRefused, "node cache protects") {
		t.Errorf("a pod of a node cache namespace that allows hostPath mounting the agent's cache directory: %q; want the chart's policy's refusal", h.HostPathRefused)
	}
	if h.FakeAgentRequests != 0 {
		t.Errorf("the hostile pod's listener for the agent's name was sent %d requests", h.FakeAgentRequests)
	}
	if h.Served != 0 || h.VictimBytes != 0 || h.Statuses[200] != 0 {
		t.Errorf("the hostile pod was served %d of the victim's shards (%d bytes) with keys that read nothing: %v", h.Served, h.VictimBytes, h.Statuses)
	}
	if n := h.Statuses[502] + h.Statuses[429] + h.Statuses[503]; n == 0 || h.Statuses[502] == 0 {
		t.Errorf("the agent's answers to the hostile flood: %v; want its fills refused by the store (502), beyond its share 429", h.Statuses)
	}
	if h.RandomTokens[200] != 0 || h.RandomTokens[429] == 0 {
		t.Errorf("the agent's answers to random tokens: %v; want none served and most refused before review (429)", h.RandomTokens)
	}
	if second.Wanted > 8192+rep.Second.NodeHits+64 {
		t.Errorf("the agent keeps %d entries wanted after %d garbage shards from one pod; want at most its share, 8192, beside the jobs'", second.Wanted, 40*256)
	}
	t.Logf("the hostile tenant: hostPath refused (%s); its listener was sent %d requests; the agent answered its flood of %d shards %v, its random tokens %v, its garbage warms %+v; %d entries wanted after",
		h.HostPathRefused, h.FakeAgentRequests, h.Shards, h.Statuses, h.RandomTokens, h.Warm, second.Wanted)
	// The dashboard's node cache row, from a real Prometheus scraping the
	// agent and the sidecars while the second job trained.
	if len(rep.Dashboard) < 8 {
		t.Errorf("only %d queries of the dashboard's node cache row run", len(rep.Dashboard))
	}
	for q, n := range rep.Dashboard {
		if n == 0 {
			t.Errorf("dashboard panel %q: no series for %s", q.Panel, q.Expr)
		}
	}
}

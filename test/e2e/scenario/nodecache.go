package scenario

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
)

// nodeCacheNamespace is the node cache story's namespace (the chart's
// nodeCache.namespaces names it): it enforces the restricted Pod Security
// level, as every story's, since its pods need no hostPath for the agent.
const (
	nodeCacheNamespace = "e2e-nodecache"
	// withoutNamespace is not one of the chart's nodeCache.namespaces: its
	// pods run without the agent, for the side-by-side.
	withoutNamespace = "e2e-nodecache-off"
)

// NodeCacheReport is what the node cache story measured.
type NodeCacheReport struct {
	// The first job (4 pods, one deleted mid-epoch, rescaled to 2) and a
	// second job of the same dataset on the node after it.
	First, Rescaled, Second SidecarReads
	// Lineage of each job.
	FirstLineage, SecondLineage Lineage
	// Agent's counters after the first job and after the second.
	AgentAfterFirst, AgentAfterSecond AgentCounters
	// DatasetBytes is the bytes of every shard of the dataset.
	DatasetBytes int64
	// Entries and EntryBytes are the agent's cache entries on the node
	// after the first job, and their bytes.
	Entries, EntryBytes int64
	// WithoutFirst and WithoutRescaled are the first job's story again in
	// a namespace without the agent (the same data from the store), and
	// WithoutLineage its lineage.
	WithoutFirst, WithoutRescaled SidecarReads
	WithoutLineage                Lineage
	// SecondStatus is the second job's status.jobs[].reads, as its
	// sidecars reported them to the operator.
	SecondStatus *datav1alpha1.JobReads
	// Dashboard is each query of the dashboard's node cache row and its
	// series while the second job trained.
	Dashboard map[DashboardQuery]int
	// Hostile is what a hostile tenant's pod on the node saw while the
	// second job trained.
	Hostile *HostileReport
}

// SidecarReads sums what a job's sidecars said they read when they
// stopped (their last log line), and when each became ready.
type SidecarReads struct {
	Sidecars                                    int
	StoreBytes, NodeHits, NodeBytes, NodeMisses int64
	Ready                                       []time.Duration
}

// AgentCounters are the node agent's metrics that matter here.
type AgentCounters struct {
	FetchedBytes, Hits, Fills, HitBytes, Discarded int64
	// WarmFills are the entries fetched ahead, as the sidecars named them;
	// WarmHits the requests they answered, LeadSeconds how long those
	// were on the node before (summed).
	WarmFills, WarmHits int64
	LeadSeconds         float64
	// Wanted are the entries kept before plain recency (a gauge).
	Wanted int64
}

// Add sums the counters of another life of the agent.
func (a *AgentCounters) Add(o AgentCounters) {
	a.FetchedBytes += o.FetchedBytes
	a.Hits += o.Hits
	a.Fills += o.Fills
	a.HitBytes += o.HitBytes
	a.Discarded += o.Discarded
	a.WarmFills += o.WarmFills
	a.WarmHits += o.WarmHits
	a.LeadSeconds += o.LeadSeconds
}

// NodeCacheStory enables the chart's node cache for one namespace and
// trains two jobs of one dataset there on the node: the first through a
// deleted pod and a rescale 4→2, the second after it. Every shard is
// fetched from the store once, by the agent; no sidecar reads the store;
// both lineages are exactly once.
func (c *Cluster) NodeCacheStory(ctx context.Context) (*NodeCacheReport, error) {
	rep := &NodeCacheReport{}
	c.Step("Enabling the node cache for namespace %s: helm upgrade --set nodeCache.enabled=true (the agent's DaemonSet)", nodeCacheNamespace)
	agentDir := filepath.Join(c.work, "node-agent")
	if err := c.InstallOperator(ctx, "--set", "nodeCache.enabled=true", "--set", "nodeCache.namespaces={"+nodeCacheNamespace+","+hostileNamespace+"}",
		"--set", "nodeCache.hostPath="+filepath.Join(agentDir, "cache"),
		"--set", "nodeCache.limit=1Gi", "--set", "nodeCache.resources.requests.cpu=50m"); err != nil {
		return rep, err
	}
	// Prometheus scrapes the agent and the sidecars: the dashboard's node
	// cache row is read while the second job trains.
	prom, err := c.StartPrometheus(ctx, alertFor, alertWindow)
	if err != nil {
		return rep, err
	}
	defer prom.Close()
	e, err := c.NewEnv(ctx, nodeCacheNamespace, DatasetOptions{Samples: c.o.Samples, NumSplits: numSplits,
		GlobalBatchSize: globalBatch, BlockSize: 256, CommitEvery: commitEvery, StepTime: c.o.StepTime})
	if err != nil {
		return rep, err
	}
	if rep.DatasetBytes, err = dirBytes(filepath.Join(e.dir, "data")); err != nil {
		return rep, err
	}
	c.Step("Job first-4 on the node's cache: 4 pods; pod 2 deleted mid-epoch; rescaled to 2")
	if rep.First, rep.Rescaled, rep.FirstLineage, err = e.rescaleStory(ctx, "first"); err != nil {
		return rep, err
	}
	if rep.AgentAfterFirst, err = c.agentCounters(ctx); err != nil {
		return rep, err
	}
	if rep.Entries, rep.EntryBytes, err = files(filepath.Join(agentDir, "cache", "shards")); err != nil {
		return rep, err
	}
	c.Detail("first: %s; the agent fetched %d bytes (%d entries of %d bytes on the node; the dataset's files: %d bytes), %d hits",
		rep.FirstLineage.Summary(), rep.AgentAfterFirst.FetchedBytes, rep.Entries, rep.EntryBytes, rep.DatasetBytes, rep.AgentAfterFirst.Hits)

	again, err := e.ForJob("second")
	if err != nil {
		return rep, err
	}
	// Steps long enough for the dashboard's rates to see it train.
	again.ds.StepTime = 4 * c.o.StepTime
	c.Step("Job second-2, the same dataset on the same node: its shards are the node's; beside it a hostile tenant's pod mounts the agent's directory, listens as the agent, floods it and warms garbage")
	job2, err := again.StartJob(ctx, 2)
	if err != nil {
		return rep, err
	}
	hostileDone := make(chan error, 1)
	go func() {
		var err error
		rep.Hostile, err = c.hostileTenant(ctx, e, filepath.Join(agentDir, "cache"))
		hostileDone <- err
	}()
	if err := again.WaitPodsRunning(ctx, job2, 2); err != nil {
		return rep, err
	}
	if rep.Dashboard, err = c.nodeCacheDashboard(ctx, prom, again.NS); err != nil {
		return rep, err
	}
	if err := again.WaitJobDone(ctx, job2, 10*time.Minute); err != nil {
		return rep, err
	}
	if err := <-hostileDone; err != nil {
		return rep, fmt.Errorf("the hostile tenant: %w", err)
	}
	c.Detail("the hostile tenant: hostPath refused: %t; its listener for the agent's name was sent %d requests; the agent answered its %d-shard flood %v (%d served, %d bytes), its random tokens %v, its garbage warm requests %+v",
		rep.Hostile.HostPathRefused != "", rep.Hostile.FakeAgentRequests, rep.Hostile.Shards, rep.Hostile.Statuses, rep.Hostile.Served, rep.Hostile.VictimBytes,
		rep.Hostile.RandomTokens, rep.Hostile.Warm)
	if rep.Second, err = again.sidecarReads(ctx, job2); err != nil {
		return rep, err
	}
	st2, err := again.State(ctx)
	if err != nil {
		return rep, err
	}
	if rep.SecondLineage, err = again.CheckLineage(ctx, st2); err != nil {
		return rep, err
	}
	if rep.AgentAfterSecond, err = c.agentCounters(ctx); err != nil {
		return rep, err
	}
	c.Detail("second: %s; the agent fetched %d more bytes; sidecars read %d bytes from the store, %d shards from the node",
		rep.SecondLineage.Summary(), rep.AgentAfterSecond.FetchedBytes-rep.AgentAfterFirst.FetchedBytes, rep.Second.StoreBytes, rep.Second.NodeHits)
	c.Detail("ready after: first %v, rescaled %v, second %v", rep.First.Ready, rep.Rescaled.Ready, rep.Second.Ready)

	c.Step("The first job's story again in namespace %s, without the agent: every shard from the store", withoutNamespace)
	off, err := c.NewEnv(ctx, withoutNamespace, DatasetOptions{Samples: c.o.Samples, NumSplits: numSplits,
		GlobalBatchSize: globalBatch, BlockSize: 256, CommitEvery: commitEvery, StepTime: c.o.StepTime})
	if err != nil {
		return rep, err
	}
	if rep.WithoutFirst, rep.WithoutRescaled, rep.WithoutLineage, err = off.rescaleStory(ctx, "first"); err != nil {
		return rep, err
	}
	c.Detail("without the agent: %s; ready after: first %v, rescaled %v; sidecars read %d bytes from the store",
		rep.WithoutLineage.Summary(), rep.WithoutFirst.Ready, rep.WithoutRescaled.Ready, rep.WithoutFirst.StoreBytes+rep.WithoutRescaled.StoreBytes)

	// The second job's sidecars reported what they read as they stopped;
	// the operator writes a job's reports every 30 s.
	err = WaitFor(ctx, 2*time.Minute, "the second job's reads in status.jobs", func() (bool, error) {
		ds, err := again.Dataset(ctx)
		if err != nil {
			return false, err
		}
		for _, j := range ds.Status.Jobs {
			if j.Job == again.jobName() && j.Reads != nil && j.Reads.NodeCacheHits >= rep.Second.NodeHits {
				rep.SecondStatus = j.Reads
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return rep, err
	}
	c.Detail("second: status.jobs reads %+v", *rep.SecondStatus)
	// The chart as the other stories had it.
	return rep, c.InstallOperator(ctx)
}

// sidecarReads sums the sidecars' last log lines of job's pods (the
// current and previous container of each pod still there): JSON, as the
// webhook has them log.
func (e *Env) sidecarReads(ctx context.Context, job *batchv1.Job) (SidecarReads, error) {
	var r SidecarReads
	logs, err := e.SidecarLogs(ctx, job)
	if err != nil {
		return r, err
	}
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg                                       string
			After                                     time.Duration
			StoreBytes, NodeCacheHits, NodeCacheBytes int64
			NodeCacheMisses                           int64
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		switch line.Msg {
		case "Stopped":
			r.Sidecars++
			r.StoreBytes += line.StoreBytes
			r.NodeHits += line.NodeCacheHits
			r.NodeBytes += line.NodeCacheBytes
			r.NodeMisses += line.NodeCacheMisses
		case "Ready":
			r.Ready = append(r.Ready, line.After)
		}
	}
	return r, nil
}

func (r *SidecarReads) add(o SidecarReads) {
	r.Sidecars += o.Sidecars
	r.StoreBytes += o.StoreBytes
	r.NodeHits += o.NodeHits
	r.NodeBytes += o.NodeBytes
	r.NodeMisses += o.NodeMisses
	r.Ready = append(r.Ready, o.Ready...)
}

// scrape sums the running sidecars' counters of pods (their metrics
// port: HTTPS with a certificate each sidecar makes).
func (e *Env) scrape(ctx context.Context, pods []corev1.Pod) (SidecarReads, error) {
	var r SidecarReads
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the sidecar's own certificate
	for _, p := range pods {
		if p.Status.PodIP == "" {
			return r, fmt.Errorf("pod %s has no address to scrape", p.Name)
		}
		var m map[string]float64
		err := WaitFor(ctx, 20*time.Second, "pod "+p.Name+"'s sidecar metrics", func() (bool, error) {
			var err error
			m, err = metrics(ctx, client, "https://"+net.JoinHostPort(p.Status.PodIP, "9464")+"/metrics")
			return err == nil, err
		})
		if err != nil {
			return r, err
		}
		r.Sidecars++
		r.StoreBytes += int64(m["shardfeed_sidecar_fetched_bytes_total"])
		r.NodeHits += int64(m["shardfeed_sidecar_node_cache_hits_total"])
		r.NodeBytes += int64(m["shardfeed_sidecar_node_cache_bytes_total"])
		r.NodeMisses += int64(m["shardfeed_sidecar_node_cache_misses_total"])
	}
	return r, nil
}

// metrics reads a Prometheus text page into series → value.
func metrics(ctx context.Context, client *http.Client, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		if f, err := strconv.ParseFloat(value, 64); err == nil {
			out[name] = f
		}
	}
	return out, nil
}

// agentCounters reads the node agent's metrics (its pod's port 9465:
// HTTPS, with a token allowed to get /metrics).
func (c *Cluster) agentCounters(ctx context.Context) (AgentCounters, error) {
	var out AgentCounters
	var pods corev1.PodList
	if err := c.Client.List(ctx, &pods, client.InNamespace(operatorNS), client.MatchingLabels{"app.kubernetes.io/component": "node-agent"}); err != nil {
		return out, err
	}
	if len(pods.Items) != 1 || pods.Items[0].Status.PodIP == "" {
		return out, fmt.Errorf("%d node agent pods, want one running", len(pods.Items))
	}
	token, err := c.prometheusToken(ctx)
	if err != nil {
		return out, err
	}
	// Bounded: an agent that does not answer is a finding, not a hang.
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &bearer{token: token,
		next: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}} //nolint:gosec // the scrape's rule, as the PodMonitor's
	m, err := metrics(ctx, hc, "https://"+net.JoinHostPort(pods.Items[0].Status.PodIP, "9465")+"/metrics")
	if err != nil {
		return out, err
	}
	out.FetchedBytes = int64(m["shardfeed_node_cache_fetched_bytes_total"])
	out.Hits = int64(m[`shardfeed_node_cache_requests_total{result="hit"}`])
	out.Fills = int64(m[`shardfeed_node_cache_requests_total{result="fill"}`])
	out.HitBytes = int64(m[`shardfeed_node_cache_served_bytes_total{how="hit"}`])
	out.Discarded = int64(m["shardfeed_node_cache_discarded_total"])
	out.WarmFills = int64(m[`shardfeed_node_cache_warm_shards_total{result="filled"}`])
	out.WarmHits = int64(m["shardfeed_node_cache_warm_hits_total"])
	out.LeadSeconds = m["shardfeed_node_cache_prewarm_lead_seconds_sum"]
	out.Wanted = int64(m["shardfeed_node_cache_wanted_entries"])
	return out, nil
}

// bearer adds a bearer token to each request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// files counts the files under dir and their bytes.
func files(dir string) (n, bytes int64, err error) {
	err = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			n++
			bytes += info.Size()
		}
		return err
	})
	return n, bytes, err
}

// dirBytes is the bytes of the shards under dir.
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.IsDir() && info.Name() == "_shardfeed" {
			return filepath.SkipDir // the indexes, which sidecars read from the store
		}
		if err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return err
	})
	return n, err
}

// RunNodeCache plays the node cache story on its own: MinIO on the node,
// the operator with the node cache, the two jobs.
func RunNodeCache(ctx context.Context, o Options) (*NodeCacheReport, error) {
	c, err := NewCluster(o.withDefaults())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.Step("Starting MinIO on the node address")
	if err := c.StartMinIO(ctx); err != nil {
		return nil, err
	}
	return c.NodeCacheStory(ctx)
}

// NodeCache is the chart's node cache as a story turned it on.
type NodeCache struct {
	c *Cluster
	// Dir is the agent's cache directory on the node.
	Dir     string
	mounted bool
}

// EnableNodeCache turns the chart's node cache on for namespace ns, its
// cache directory on the node a tmpfs of diskBytes when that is above 0
// (a node disk that fills); Disable turns it off again.
func (c *Cluster) EnableNodeCache(ctx context.Context, ns string, diskBytes int64) (*NodeCache, error) {
	base := filepath.Join(c.work, "node-agent-"+ns)
	nc := &NodeCache{c: c, Dir: filepath.Join(base, "cache")}
	if err := os.MkdirAll(nc.Dir, 0o755); err != nil {
		return nil, err
	}
	if diskBytes > 0 {
		if out, err := execCommand(ctx, "mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", diskBytes), "tmpfs", nc.Dir); err != nil {
			return nil, fmt.Errorf("mount a tmpfs of %d bytes at %s: %w: %s", diskBytes, nc.Dir, err, out)
		}
		nc.mounted = true
	}
	err := c.InstallOperator(ctx, "--set", "nodeCache.enabled=true", "--set", "nodeCache.namespaces={"+ns+"}",
		"--set", "nodeCache.hostPath="+nc.Dir,
		"--set", "nodeCache.limit=1Gi", "--set", "nodeCache.resources.requests.cpu=50m")
	if err != nil {
		_ = nc.Disable(context.WithoutCancel(ctx))
		return nil, err
	}
	return nc, nil
}

// Disable reinstalls the chart without the node cache and unmounts the
// tmpfs it was given.
func (nc *NodeCache) Disable(ctx context.Context) error {
	err := nc.c.InstallOperator(ctx)
	if nc.mounted {
		if out, uerr := execCommand(ctx, "umount", "-l", nc.Dir); uerr != nil && err == nil {
			err = fmt.Errorf("umount %s: %w: %s", nc.Dir, uerr, out)
		}
	}
	return err
}

// KillAgent kills the node agent's container (SIGKILL, through
// containerd) and waits until the kubelet restarted it.
func (nc *NodeCache) KillAgent(ctx context.Context, e *Env) error {
	pod, err := nc.agentPod(ctx)
	if err != nil {
		return err
	}
	cs := pod.Status.ContainerStatuses
	if len(cs) != 1 || cs[0].State.Running == nil {
		return fmt.Errorf("the node agent's pod %s runs no container", pod.Name)
	}
	restarts := cs[0].RestartCount
	if err := e.sigkill(ctx, strings.TrimPrefix(cs[0].ContainerID, "containerd://")); err != nil {
		return err
	}
	return WaitFor(ctx, 2*time.Minute, "the node agent to restart", func() (bool, error) {
		p, err := nc.agentPod(ctx)
		if err != nil {
			return false, err
		}
		s := p.Status.ContainerStatuses
		return len(s) == 1 && s[0].RestartCount > restarts && s[0].Ready, nil
	})
}

func (nc *NodeCache) agentPod(ctx context.Context) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := nc.c.Client.List(ctx, &pods, client.InNamespace(operatorNS), client.MatchingLabels{"app.kubernetes.io/component": "node-agent"}); err != nil {
		return nil, err
	}
	if len(pods.Items) != 1 {
		return nil, fmt.Errorf("%d node agent pods, want one", len(pods.Items))
	}
	return &pods.Items[0], nil
}

// Garble overwrites half the agent's entries on the node with garbage of
// their size and truncates the other half; it returns how many of each.
func (nc *NodeCache) Garble() (garbled, truncated int, err error) {
	var files []string
	err = filepath.Walk(filepath.Join(nc.Dir, "shards"), func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	for i, f := range files {
		info, err := os.Stat(f)
		if err != nil {
			return garbled, truncated, err
		}
		if i%2 == 0 {
			err = os.WriteFile(f, bytes.Repeat([]byte{0xA5}, int(info.Size())), 0o644)
			garbled++
		} else {
			err = os.Truncate(f, info.Size()/2)
			truncated++
		}
		if err != nil {
			return garbled, truncated, err
		}
	}
	return garbled, truncated, nil
}

// Agent returns the node agent's counters (its metrics).
func (nc *NodeCache) Agent(ctx context.Context) (AgentCounters, error) {
	return nc.c.agentCounters(ctx)
}

// rescaleStory trains job name of e's dataset on 4 pods, deletes pod 2
// mid-epoch, rescales to 2 and trains to the end: what the first 4 pods'
// sidecars (and the deleted one's replacement) read, what the rescaled
// pods' read, and the lineage.
func (e *Env) rescaleStory(ctx context.Context, name string) (reads, rescaled SidecarReads, lineage Lineage, err error) {
	first, err := e.ForJob(name)
	if err != nil {
		return reads, rescaled, lineage, err
	}
	// The trainers hold before step holdAt until the rescale deletes them:
	// on a slow node the scrapes below took longer than the rest of the
	// epoch, and the story ended before its rescale. Steps holdAt-2 and
	// holdAt-1 are trained, never committed, and trained again after it.
	const holdAt = 6*commitEvery + 2
	job, err := first.startJob(ctx, 4, corev1.EnvVar{Name: "E2E_HOLD_AT", Value: strconv.Itoa(holdAt)})
	if err != nil {
		return reads, rescaled, lineage, err
	}
	if err := first.WaitPodsRunning(ctx, job, 4); err != nil {
		return reads, rescaled, lineage, err
	}
	at, err := first.WaitCommitted(ctx, 3*commitEvery)
	if err != nil {
		return reads, rescaled, lineage, err
	}
	// A sidecar's counters go with its pod: pod 2's are read before it
	// is deleted, the others' (and its replacement's) before the rescale.
	deleted, err := first.PodAt(ctx, job, 2)
	if err != nil {
		return reads, rescaled, lineage, err
	}
	if reads, err = first.scrape(ctx, []corev1.Pod{*deleted}); err != nil {
		return reads, rescaled, lineage, err
	}
	if err := first.DeletePod(ctx, job, 2); err != nil {
		return reads, rescaled, lineage, err
	}
	if _, err = first.WaitCommitted(ctx, min(at+3*commitEvery, holdAt/commitEvery*commitEvery)); err != nil {
		return reads, rescaled, lineage, err
	}
	pods, err := first.PodsOf(ctx, job.Name)
	if err != nil {
		return reads, rescaled, lineage, err
	}
	live, err := first.scrape(ctx, pods)
	if err != nil {
		return reads, rescaled, lineage, err
	}
	reads.add(live)
	if ready, err := first.sidecarReads(ctx, job); err == nil {
		reads.Ready = ready.Ready
	}
	second, err := first.Rescale(ctx, job, 2)
	if err != nil {
		return reads, rescaled, lineage, err
	}
	if err := first.WaitJobDone(ctx, second, 10*time.Minute); err != nil {
		return reads, rescaled, lineage, err
	}
	if rescaled, err = first.sidecarReads(ctx, second); err != nil {
		return reads, rescaled, lineage, err
	}
	st, err := first.State(ctx)
	if err != nil {
		return reads, rescaled, lineage, err
	}
	if lineage, err = first.CheckLineage(ctx, st); err != nil {
		return reads, rescaled, lineage, err
	}
	return reads, rescaled, lineage, nil
}

// nodeCacheDashboard runs the node cache row's queries once Prometheus has
// scraped the agent and the sidecars of ns for a rate interval.
func (c *Cluster) nodeCacheDashboard(ctx context.Context, p *Prometheus, ns string) (map[DashboardQuery]int, error) {
	out, _, err := c.dashboardWhileTraining(ctx, p, ns, "shardfeed-node-agents", NodeCacheQuery)
	if err == nil {
		c.Detail("the dashboard's node cache row: %d queries run while the job trains", len(out))
	}
	return out, err
}

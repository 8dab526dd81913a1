// Package chaos is the fault-injection suite: on the local cluster (the
// operator, MinIO, sidecars and trainers of test/e2e), each scenario trains
// a job through one epoch while a seeded random schedule breaks things —
// sidecars and trainers killed, the job rescaled, MinIO stopped, the
// kube-apiserver restarted, a shard corrupted at the source, the store made
// slow — and then checks the committed lineage against `shardfeed plan
// --ids`: no sample lost, none repeated, the same global batches.
package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/shardfeed/shardfeed/internal/index/mdsindex"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/test/e2e/scenario"
)

// Fault is one kind of injection.
type Fault string

// The faults of the suite.
const (
	KillSidecar      Fault = "sidecar SIGKILL"
	KillTrainer      Fault = "trainer SIGKILL"
	Rescale          Fault = "rescale"
	MinIOOutage      Fault = "MinIO stopped"
	APIServerRestart Fault = "kube-apiserver restart"
	CorruptShard     Fault = "corrupt shard"
	SlowStore        Fault = "slow store"
	// KillManager and RollManager put the operator, now on the commit
	// path, through a crash of one replica and a rolling restart.
	KillManager Fault = "manager replica SIGKILL"
	RollManager Fault = "manager rolling restart"
	// UpgradeOperator upgrades the release (helm upgrade to a new image
	// tag, the new default sidecar image), then deletes a pod of the job:
	// the upgraded webhook must give it the sidecar image the job started
	// with, and the job keeps its state and progress.
	UpgradeOperator Fault = "operator upgrade"
	// KillAgent kills the node agent (Scenario.NodeCache) while the store
	// is slowed, so that fills and answers are in flight; GarbleNodeCache
	// overwrites half its entries on the node with garbage and truncates
	// the others, then replaces a pod of the job (a trainer SIGKILL), whose
	// new sidecar reads its window from the node.
	KillAgent       Fault = "node agent SIGKILL"
	GarbleNodeCache Fault = "node cache garbled"
)

// upgradeTag is the image tag UpgradeOperator upgrades to.
const upgradeTag = "e2e-next"

// Scenario is one job trained through its faults.
type Scenario struct {
	Name string
	// Worlds are the job's pod counts in order: each change is a Rescale
	// injection. Every world size must divide NumSplits.
	Worlds []int
	// Faults besides the rescales; the seed orders them among the
	// rescales and picks the steps, pods and durations.
	Faults []Fault
	// OnCorruptShard is the dataset's policy ("" = the default, fail).
	OnCorruptShard string
	// Outage bounds MinIO's downtime (default 10–60 s).
	OutageMin, OutageMax time.Duration
	// Samples per stream, when the schedule needs a longer epoch than the
	// suite's (Options.Samples).
	Samples int
	// StepTime is the trainers' time per step (default 100 ms), and Latest
	// the fraction of the epoch by which every fault has begun (default
	// 0.7): a slow fault needs the job still running when it ends.
	StepTime time.Duration
	Latest   float64
	// NodeCache runs the job with the chart's node cache, its directory
	// on the node a tmpfs of NodeDiskBytes when set (a disk that fills).
	NodeCache     bool
	NodeDiskBytes int64
}

// Options of a suite run.
type Options struct {
	scenario.Options
	Seed uint64
	// Samples per stream of every scenario's dataset.
	Samples int
}

// Result is what one scenario found.
type Result struct {
	Scenario   string
	Injections []string
	scenario.Lineage
	// Recover is, per injection, the time from the injection to the next
	// commit of a step past the one committed when it began.
	Recover []time.Duration
	// SkippedShards is what the job's state recorded.
	SkippedShards int
	Duration      time.Duration
	Err           error
}

// OK is the scenario's verdict.
func (r Result) OK() bool { return r.Err == nil && r.Lineage.OK() }

// MaxRecover is the longest recovery of the scenario.
func (r Result) MaxRecover() time.Duration {
	var m time.Duration
	for _, d := range r.Recover {
		m = max(m, d)
	}
	return m
}

// The dataset every scenario trains on: 12 splits, so that 1, 2, 3, 4 and
// 6 pods all divide them.
const (
	numSplits   = 12
	globalBatch = 24
	commitEvery = 4
	stepTime    = 100 * time.Millisecond
)

// Suite runs scenarios on one cluster with one operator and one MinIO.
type Suite struct {
	o     Options
	c     *scenario.Cluster
	proxy *testenv.SlowProxy
}

// NewSuite installs the operator and starts MinIO and the slow proxy in
// front of it (on the node's address, where pods reach both).
func NewSuite(ctx context.Context, o Options) (*Suite, error) {
	if o.Samples == 0 {
		o.Samples = 4800
	}
	c, err := scenario.NewCluster(o.Options)
	if err != nil {
		return nil, err
	}
	s := &Suite{o: o, c: c}
	c.Step("Installing the operator with Helm; MinIO and a TCP proxy in front of it (a slow store on demand) on %s", o.NodeIP)
	if err := c.InstallOperator(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if err := c.StartMinIO(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if s.proxy, err = testenv.NewSlowProxy(o.NodeIP, c.MinIO.Endpoint, 0); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close stops the proxy and MinIO.
func (s *Suite) Close() {
	if s.proxy != nil {
		s.proxy.Close()
	}
	s.c.Close()
}

// play is one scenario's run.
type play struct {
	s   *Suite
	sc  Scenario
	rng *rand.Rand
	env *scenario.Env
	job *batchv1.Job
	res *Result
	// worlds left to rescale to.
	worlds []int
	// corrupted object: its key, shard name and original bytes, restored
	// at the end whatever happened.
	corruptKey, corruptShard string
	corruptData              []byte
	// samples per stream of the scenario's dataset.
	samples int
	// corruptFirst is the first step that reads the corrupt shard.
	corruptFirst int64
	// nodeCache is the node cache of a NodeCache scenario, and agent its
	// agent's counters summed over the agent's lives before the last.
	nodeCache *scenario.NodeCache
	agent     scenario.AgentCounters
}

// Run plays sc with the suite's seed (mixed with the scenario's name, so
// that adding a scenario does not change the others).
func (s *Suite) Run(ctx context.Context, sc Scenario) Result {
	res := Result{Scenario: sc.Name}
	start := time.Now()
	seed := s.o.Seed
	for _, ch := range sc.Name {
		seed = seed*31 + uint64(ch)
	}
	p := &play{s: s, sc: sc, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), res: &res, samples: s.o.Samples}
	if sc.Samples > 0 {
		p.samples = sc.Samples
	}
	res.Err = p.run(ctx)
	if p.corruptKey != "" {
		_ = p.restore(context.WithoutCancel(ctx))
	}
	res.Duration = time.Since(start)
	return res
}

func (p *play) run(ctx context.Context) error {
	c, sc := p.s.c, p.sc
	extra := ""
	if sc.OnCorruptShard != "" {
		extra = "  onCorruptShard: " + sc.OnCorruptShard + "\n"
	}
	c.Step("Scenario %s: %d pods, then %v; faults %v", sc.Name, sc.Worlds[0], sc.Worlds[1:], sc.Faults)
	var err error
	step := stepTime
	if sc.StepTime > 0 {
		step = sc.StepTime
	}
	ns := "chaos-" + sc.Name
	if sc.NodeCache {
		if p.nodeCache, err = c.EnableNodeCache(ctx, ns, sc.NodeDiskBytes); err != nil {
			return err
		}
		defer func() { _ = p.nodeCache.Disable(context.WithoutCancel(ctx)) }()
		c.Detail("the node cache on for namespace %s (its directory a tmpfs of %d bytes: 0 for none)", ns, sc.NodeDiskBytes)
	}
	p.env, err = c.NewEnv(ctx, ns, scenario.DatasetOptions{Samples: p.samples, NumSplits: numSplits,
		GlobalBatchSize: globalBatch, BlockSize: 64, Extra: extra, Endpoint: "http://" + p.s.proxy.Addr,
		CommitEvery: commitEvery, StepTime: step})
	if err != nil {
		return err
	}
	steps := int64(2*p.samples) / globalBatch
	// The schedule: every fault and rescale at its own step, in the seed's
	// order, between 5 % and 70 % (sc.Latest) of the epoch.
	events := slices.Clone(sc.Faults)
	for range sc.Worlds[1:] {
		events = append(events, Rescale)
	}
	// A corrupt shard is armed before the job starts, on a shard the plan
	// first reads at a step the seed picks: sidecars fetch ahead, so a
	// shard corrupted mid-run may already be in their caches.
	corrupt := slices.Contains(events, CorruptShard)
	events = slices.DeleteFunc(events, func(f Fault) bool { return f == CorruptShard })
	p.rng.Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })
	at := make([]int64, len(events))
	latest := 0.7
	if sc.Latest > 0 {
		latest = sc.Latest
	}
	lo, hi := steps/20, int64(float64(steps)*latest)
	for i := range at {
		at[i] = lo + p.rng.Int64N(max(hi-lo, 1))
	}
	slices.Sort(at)
	p.worlds = slices.Clone(sc.Worlds[1:])

	var armed string
	if corrupt {
		if armed, err = p.arm(ctx, steps); err != nil {
			return fmt.Errorf("%s: %w", CorruptShard, err)
		}
		c.Detail("before the start: %s", armed)
	}
	if p.job, err = p.env.StartJob(ctx, sc.Worlds[0]); err != nil {
		return err
	}
	// Under fail, a watcher waits for a sidecar to refuse the shard, then
	// restores the object; the job stalls at the shard until then.
	watched := make(chan watch, 1)
	if corrupt && sc.OnCorruptShard != "skip" {
		wctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		wg.Go(func() { watched <- p.watchCorrupt(wctx, armed) })
	} else {
		watched <- watch{what: armed}
	}
	if err := p.env.WaitPodsRunning(ctx, p.job, sc.Worlds[0]); err != nil {
		return err
	}
	next := int64(0)
	for i, f := range events {
		committed, err := p.env.WaitCommitted(ctx, min(max(at[i], next), steps))
		if err != nil {
			return err
		}
		if committed >= steps {
			return fmt.Errorf("the epoch ended before injection %d of %d (%s): the schedule needs more samples (Options.Samples)", i+1, len(events), f)
		}
		began := time.Now()
		what, err := p.inject(ctx, f)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		p.res.Injections = append(p.res.Injections, what)
		c.Detail("at committed step %d: %s", committed, what)
		after, err := p.env.WaitCommitted(ctx, committed+1)
		if err != nil {
			return fmt.Errorf("after %s: %w", what, err)
		}
		p.res.Recover = append(p.res.Recover, time.Since(began))
		next = after + commitEvery
	}
	if err := p.env.WaitJobDone(ctx, p.job, 10*time.Minute); err != nil {
		return err
	}
	if corrupt {
		w := <-watched
		if w.err != nil {
			return fmt.Errorf("%s: %w", CorruptShard, w.err)
		}
		p.res.Injections = append(p.res.Injections, w.what)
		p.res.Recover = append(p.res.Recover, w.recover)
		c.Detail("%s", w.what)
	}
	st, err := p.env.State(ctx)
	if err != nil {
		return err
	}
	p.res.SkippedShards = st.SkippedShards
	if p.res.Lineage, err = p.env.CheckLineage(ctx, st); err != nil {
		return err
	}
	c.Detail("%s", p.res.Summary())
	return p.check(ctx)
}

// check asserts what the scenario's faults must have left behind.
func (p *play) check(ctx context.Context) error {
	if p.nodeCache != nil {
		// The node cache served the job: not a scenario passed by it.
		ag, err := p.nodeCache.Agent(ctx)
		if err != nil {
			return err
		}
		ag.Add(p.agent)
		p.s.c.Detail("the node agent over its lives: %d fills, %d hits (%d bytes), %d bytes fetched, %d entries found changed on disk and filled again",
			ag.Fills, ag.Hits, ag.HitBytes, ag.FetchedBytes, ag.Discarded)
		if ag.Fills+ag.Hits == 0 {
			return fmt.Errorf("the node agent served nothing: the job did not use the node cache")
		}
	}
	if slices.Contains(p.sc.Faults, UpgradeOperator) {
		// Pods of the job's last attempt, whenever admitted, ran the
		// sidecar the job started with.
		pods, err := p.env.PodsOf(ctx, p.job.Name)
		if err != nil {
			return err
		}
		for i := range pods {
			if img := scenario.SidecarImage(&pods[i]); img != scenario.OperatorImage {
				return fmt.Errorf("pod %s of the job's last attempt runs sidecar %q, not the job's %s", pods[i].Name, img, scenario.OperatorImage)
			}
		}
	}
	if !slices.Contains(p.sc.Faults, CorruptShard) || p.sc.OnCorruptShard != "skip" {
		if p.res.Skipped > 0 || p.res.SkippedShards > 0 {
			return fmt.Errorf("%d samples skipped without onCorruptShard: skip", p.res.Skipped)
		}
		return nil
	}
	ds, err := p.env.Dataset(ctx)
	if err != nil {
		return err
	}
	switch {
	case p.res.SkippedShards != 1:
		return fmt.Errorf("the job's state records %d skipped shards, want 1", p.res.SkippedShards)
	case p.res.Skipped == 0:
		return fmt.Errorf("no sample was skipped although shard %s was corrupt", p.corruptKey)
	case len(ds.Status.Jobs) != 1 || ds.Status.Jobs[0].SkippedShards != 1:
		return fmt.Errorf("status.jobs does not count the skipped shard: %+v", ds.Status.Jobs)
	}
	return nil
}

// inject applies one fault and returns what it did.
func (p *play) inject(ctx context.Context, f Fault) (string, error) {
	env, job := p.env, p.job
	pods := int(*job.Spec.Completions)
	switch f {
	case KillSidecar:
		idx := p.rng.IntN(pods)
		if _, err := env.KillSidecar(ctx, job, idx); err != nil {
			return "", err
		}
		return fmt.Sprintf("SIGKILL of the sidecar of pod %d", idx), nil
	case KillTrainer:
		idx := p.rng.IntN(pods)
		if err := env.KillTrainer(ctx, job, idx); err != nil {
			return "", err
		}
		return fmt.Sprintf("SIGKILL of the trainer of pod %d", idx), nil
	case Rescale:
		from, to := int(*job.Spec.Completions), p.worlds[0]
		p.worlds = p.worlds[1:]
		next, err := env.Rescale(ctx, job, to)
		if err != nil {
			return "", err
		}
		p.job = next
		if err := env.WaitPodsRunning(ctx, next, to); err != nil {
			return "", err
		}
		return fmt.Sprintf("rescale %d → %d pods", from, to), nil
	case MinIOOutage:
		lo, hi := p.sc.OutageMin, p.sc.OutageMax
		if lo == 0 {
			lo, hi = 10*time.Second, 60*time.Second
		}
		down := lo + time.Duration(p.rng.Int64N(int64(hi-lo)+1)).Round(time.Second)
		p.s.c.MinIO.Kill()
		time.Sleep(down)
		if err := p.s.c.MinIO.Restart(ctx); err != nil {
			return "", err
		}
		return fmt.Sprintf("MinIO stopped (SIGKILL) for %s", down), nil
	case APIServerRestart:
		began := time.Now()
		cmd := exec.CommandContext(ctx, filepath.Join(p.s.o.Root, "hack", "cluster-restart.sh"), "kube-apiserver")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("%w: %s", err, out)
		}
		return fmt.Sprintf("kube-apiserver killed and restarted (back after %s)", time.Since(began).Round(100*time.Millisecond)), nil
	case KillManager:
		which := p.rng.IntN(2)
		pod, err := p.s.c.KillManager(ctx, which)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("SIGKILL of manager replica %s (restarted, ready again)", pod), nil
	case RollManager:
		began := time.Now()
		if err := p.s.c.RollManager(ctx); err != nil {
			return "", err
		}
		return fmt.Sprintf("the manager's Deployment rolled (in %s)", time.Since(began).Round(100*time.Millisecond)), nil
	case UpgradeOperator:
		return p.upgrade(ctx)
	case KillAgent:
		if p.nodeCache == nil {
			return "", fmt.Errorf("%s in a scenario without the node cache", f)
		}
		p.s.proxy.SetDelay(20 * time.Millisecond)
		time.Sleep(2 * time.Second)       // fills from the slowed store in flight
		ag, err := p.nodeCache.Agent(ctx) // its counters die with it
		if err != nil {
			p.s.proxy.SetDelay(0)
			return "", err
		}
		p.agent.Add(ag)
		err = p.nodeCache.KillAgent(ctx, env)
		p.s.proxy.SetDelay(0)
		if err != nil {
			return "", err
		}
		return "SIGKILL of the node agent with the store slowed (fills and answers in flight); restarted", nil
	case GarbleNodeCache:
		if p.nodeCache == nil {
			return "", fmt.Errorf("%s in a scenario without the node cache", f)
		}
		garbled, truncated, err := p.nodeCache.Garble()
		if err != nil {
			return "", err
		}
		// A new pod, with an empty cache of its own, reads its window from
		// the node.
		idx := p.rng.IntN(pods)
		if err := env.KillTrainer(ctx, job, idx); err != nil {
			return "", err
		}
		return fmt.Sprintf("the node cache's entries garbled (%d) and truncated (%d) on the node; pod %d replaced (its trainer SIGKILLed) to read them", garbled, truncated, idx), nil
	case SlowStore:
		d := 10*time.Second + time.Duration(p.rng.Int64N(int64(20*time.Second)))
		d = d.Round(time.Second)
		p.s.proxy.SetDelay(20 * time.Millisecond)
		time.Sleep(d)
		p.s.proxy.SetDelay(0)
		return fmt.Sprintf("every chunk from the store delayed 20 ms for %s", d), nil
	}
	return "", fmt.Errorf("unknown fault %q", f)
}

// upgrade upgrades the operator, then deletes a pod of the job and checks
// that the upgraded webhook gave its replacement the job's sidecar image,
// not the new default, and that the job's state kept it.
func (p *play) upgrade(ctx context.Context) (string, error) {
	env, job := p.env, p.job
	before, err := env.State(ctx)
	if err != nil {
		return "", err
	}
	if before.SidecarImage != scenario.OperatorImage {
		return "", fmt.Errorf("the job's state pins sidecar image %q before the upgrade, want %s", before.SidecarImage, scenario.OperatorImage)
	}
	began := time.Now()
	if err := p.s.c.UpgradeOperator(ctx, upgradeTag); err != nil {
		return "", err
	}
	took := time.Since(began).Round(100 * time.Millisecond)
	idx := p.rng.IntN(int(*job.Spec.Completions))
	old, err := env.PodAt(ctx, job, idx)
	if err != nil {
		return "", fmt.Errorf("after the upgrade (%s): %w: the epoch needs to be longer", took, err)
	}
	if err := env.DeletePod(ctx, job, idx); err != nil {
		return "", err
	}
	var fresh *corev1.Pod
	err = scenario.WaitFor(ctx, 3*time.Minute, fmt.Sprintf("a new running pod %d of %s", idx, job.Name), func() (bool, error) {
		fresh, err = env.PodAt(ctx, job, idx)
		return err == nil && fresh.UID != old.UID, nil
	})
	if err != nil {
		return "", err
	}
	after, err := env.State(ctx)
	if err != nil {
		return "", err
	}
	switch {
	case scenario.SidecarImage(fresh) != before.SidecarImage:
		return "", fmt.Errorf("pod %d, admitted by the upgraded webhook, runs sidecar %q: the job started with %s", idx, scenario.SidecarImage(fresh), before.SidecarImage)
	case after.SidecarImage != before.SidecarImage:
		return "", fmt.Errorf("the job's state pins %q after the upgrade, %q before", after.SidecarImage, before.SidecarImage)
	case after.Generation < before.Generation || after.Epoch < before.Epoch || (after.Epoch == before.Epoch && after.Step < before.Step):
		return "", fmt.Errorf("the job's state went back across the upgrade: generation %d, epoch %d step %d, after generation %d, epoch %d step %d",
			after.Generation, after.Epoch, after.Step, before.Generation, before.Epoch, before.Step)
	}
	return fmt.Sprintf("operator upgraded to :%s (helm upgrade, %s); pod %d, deleted and admitted again by the new webhook, kept the job's sidecar %s",
		upgradeTag, took, idx, before.SidecarImage), nil
}

// arm flips bytes of an MDS shard of the tokens stream, keeping its
// size: one the plan first reads between 20 % and 60 % of the epoch, the
// seed picks which. It returns what it did.
func (p *play) arm(ctx context.Context, steps int64) (string, error) {
	env := p.env
	f, err := os.Open(filepath.Join(env.Dir(), "data", "tokens", "index.json"))
	if err != nil {
		return "", err
	}
	idx, err := mdsindex.Read(f)
	_ = f.Close()
	if err != nil {
		return "", err
	}
	plan, err := env.PlannedIDs(ctx, p.sc.Worlds[0])
	if err != nil {
		return "", err
	}
	firstStep := map[int]int64{}
	for step, ids := range plan {
		for _, id := range ids {
			if id >= int64(p.samples) {
				continue // the Parquet stream
			}
			sh := shardOf(idx, id)
			if f, ok := firstStep[sh]; !ok || step < f {
				firstStep[sh] = step
			}
		}
	}
	var candidates []int
	for sh, f := range firstStep {
		if f >= steps/5 && f <= steps*6/10 {
			candidates = append(candidates, sh)
		}
	}
	if len(candidates) == 0 {
		return "", fmt.Errorf("no shard of the tokens stream is first read between steps %d and %d", steps/5, steps*6/10)
	}
	slices.Sort(candidates)
	victim := candidates[p.rng.IntN(len(candidates))]
	shard := idx.Shards[victim].Stored().Basename
	key := "tokens/" + shard
	mc := p.s.c.MinIO.Client
	obj, err := mc.GetObject(ctx, env.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return "", err
	}
	data, err := io.ReadAll(obj)
	if err != nil {
		return "", err
	}
	p.corruptKey, p.corruptShard, p.corruptData, p.corruptFirst = key, shard, data, firstStep[victim]
	bad := bytes.Clone(data)
	for i := len(bad) / 3; i < len(bad)/3+8 && i < len(bad); i++ {
		bad[i] ^= 0x5a
	}
	if _, err := mc.PutObject(ctx, env.Bucket, key, bytes.NewReader(bad), int64(len(bad)), minio.PutObjectOptions{}); err != nil {
		return "", err
	}
	policy := p.sc.OnCorruptShard
	if policy == "" {
		policy = "fail"
	}
	return fmt.Sprintf("shard %s (first read at step %d) corrupted at the source (onCorruptShard: %s)", shard, firstStep[victim], policy), nil
}

// watch is what the watcher of a corrupt shard saw.
type watch struct {
	what    string
	recover time.Duration
	err     error
}

// watchCorrupt waits until a sidecar refuses the corrupt shard, naming it,
// and the job stalls before the shard, then restores the object and waits
// for the job to commit again (the time to recover counts from then).
func (p *play) watchCorrupt(ctx context.Context, armed string) watch {
	env, shard := p.env, p.corruptShard
	var w watch
	err := scenario.WaitFor(ctx, 8*time.Minute, "a sidecar to refuse the corrupt shard "+shard, func() (bool, error) {
		logs, err := env.SidecarLogs(ctx, p.job)
		return strings.Contains(logs, shard) && strings.Contains(logs, "mismatch"), err
	})
	if err != nil {
		w.err = err
		return w
	}
	// The job must stop before the shard: no commit for 10 s, none past the
	// step that first reads it.
	var stalled int64
	last, since := int64(-1), time.Now()
	err = scenario.WaitFor(ctx, 5*time.Minute, "the job to stall before the corrupt shard", func() (bool, error) {
		st, err := env.State(ctx)
		if err != nil {
			return false, err
		}
		if st.Step != last {
			last, since = st.Step, time.Now()
		}
		stalled = st.Step
		return time.Since(since) >= 10*time.Second, nil
	})
	if err != nil {
		w.err = err
		return w
	}
	if stalled > p.corruptFirst {
		w.err = fmt.Errorf("the job committed step %d, past step %d, which reads the corrupt shard %s", stalled, p.corruptFirst, shard)
		return w
	}
	restored := time.Now()
	if w.err = p.restore(ctx); w.err != nil {
		return w
	}
	if _, w.err = env.WaitCommitted(ctx, stalled+1); w.err != nil {
		return w
	}
	w.recover = time.Since(restored)
	w.what = fmt.Sprintf("%s: refused by a sidecar (its log names the shard and the hash mismatch), the job stalled at committed step %d; the object restored", armed, stalled)
	return w
}

// shardOf is the index of the MDS shard holding sample id of the stream.
func shardOf(idx *mdsindex.Index, id int64) int {
	var first int64
	for i, sh := range idx.Shards {
		if id < first+sh.Samples {
			return i
		}
		first += sh.Samples
	}
	return len(idx.Shards) - 1
}

// restore puts the corrupted object back.
func (p *play) restore(ctx context.Context) error {
	if p.corruptKey == "" {
		return nil
	}
	_, err := p.s.c.MinIO.Client.PutObject(ctx, p.env.Bucket, p.corruptKey, bytes.NewReader(p.corruptData), int64(len(p.corruptData)), minio.PutObjectOptions{})
	if err == nil {
		p.corruptKey = ""
	}
	return err
}

// Table prints the results as the docs show them.
func Table(w io.Writer, results []Result) {
	_, _ = fmt.Fprintln(w, "| scenario | injections | samples checked | lost | duplicated | skipped | time to recover (max) | verdict |")
	_, _ = fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range results {
		verdict := "exactly once"
		if !r.OK() {
			verdict = "FAILED"
			if r.Err != nil {
				verdict += ": " + strings.ReplaceAll(r.Err.Error(), "\n", " ")
			}
		}
		_, _ = fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %d | %s | %s |\n", r.Scenario, strings.Join(r.Injections, "; "),
			r.Samples, r.Lost, r.Duplicated, r.Skipped, r.MaxRecover().Round(100*time.Millisecond), verdict)
	}
}

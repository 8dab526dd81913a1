package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/testenv"
)

// The monitoring story: a real Prometheus scrapes the manager and the
// sidecars while a healthy job trains (no alert of its namespace or of the
// operator goes off; every query of the chart's dashboard but the node
// cache's row returns series), then while a job reads through a slow store
// (ShardfeedTrainingStarved fires for its pods).

const (
	monitoredNamespace = "e2e-prometheus"
	starvedNamespace   = "e2e-starved"
	// alertFor replaces the alerts' `for` (10 minutes for the starved
	// alert): long enough that a moment's wait at a job's start fires
	// nothing, short enough for a test.
	alertFor = 6 * time.Second
	// alertWindow replaces the rules' 5-minute windows.
	alertWindow = 20 * time.Second
	// rateInterval is the dashboard's $__rate_interval here: Grafana makes
	// it 4 scrape intervals at least.
	rateInterval = 4 * scrapeInterval
	// slowStoreDelay is how late the slow store's every 32 KiB is.
	slowStoreDelay = 4 * time.Second
)

// MonitoringReport is what the monitoring story saw.
type MonitoringReport struct {
	// Rules Prometheus loaded from the chart's rule file.
	Rules []PromRule
	// Targets are the scrape targets while the healthy job ran.
	Targets []PromTarget
	// Healthy is the healthy job's lineage; HealthyAlerts the alerts of
	// its namespace or of the operator (no namespace) that were pending or
	// firing while it ran; HealthyWaitShare the most of their time its
	// ranks waited for data (the recording rule).
	Healthy          Lineage
	HealthyAlerts    []string
	HealthyWaitShare float64
	// Dashboard is each dashboard query's series while the healthy job
	// ran (the node cache's row: in the node cache story).
	Dashboard map[DashboardQuery]int
	// Starved is the ShardfeedTrainingStarved alert that fired for the
	// slow store's job (nil if none), StarvedWaitShare its ranks' share
	// of time waiting, and StarvedAfter how long after the store slowed
	// down it fired.
	Starved          *PromAlert
	StarvedWaitShare float64
	StarvedAfter     time.Duration
}

// RunMonitoring plays the monitoring story on the local cluster.
func RunMonitoring(ctx context.Context, o Options) (*MonitoringReport, error) {
	c, err := NewCluster(o.withDefaults())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.Step("Starting MinIO on the node address, a slow proxy in front of it; the operator's chart")
	if err := c.StartMinIO(ctx); err != nil {
		return nil, err
	}
	proxy, err := testenv.NewSlowProxy(c.o.NodeIP, c.MinIO.Endpoint, 0)
	if err != nil {
		return nil, err
	}
	defer proxy.Close()
	if err := c.InstallOperator(ctx); err != nil {
		return nil, err
	}
	opts := DatasetOptions{Samples: c.o.Samples, NumSplits: numSplits, GlobalBatchSize: globalBatch, BlockSize: 256,
		CommitEvery: commitEvery, StepTime: c.o.StepTime}
	// The healthy job's steps are long enough that it trains a while after
	// Prometheus finds its pods (its discovery sends targets every 5 s)
	// and the dashboard's rates have their samples.
	healthyOpts := opts
	healthyOpts.StepTime = 4 * c.o.StepTime
	healthy, err := c.NewEnv(ctx, monitoredNamespace, healthyOpts)
	if err != nil {
		return nil, err
	}
	// The starved job's dataset: through the proxy, an epoch three times
	// as long, nothing fetched ahead of the step (so that a slow store
	// shows in the steps, not only in a cache filling ahead: past the
	// shards prefetch asks for, small ones are fetched while under 32 MiB
	// are ahead, and this data set's every shard would be).
	opts.Endpoint, opts.Samples, opts.Extra = "http://"+proxy.Addr, 3*c.o.Samples, "  sidecar:\n    prefetch: 0\n"
	starved, err := c.NewEnv(ctx, starvedNamespace, opts)
	if err != nil {
		return nil, err
	}
	// A dataset that cannot be Ready (its streams' prefixes hold nothing):
	// the dashboard's "Datasets not Ready" has something to count.
	broken := starved.obj.DeepCopy()
	broken.ObjectMeta = metav1.ObjectMeta{Name: "missing", Namespace: starvedNamespace}
	broken.Status = datav1alpha1.TrainingDatasetStatus{}
	for i := range broken.Spec.Streams {
		broken.Spec.Streams[i].Source.URI += "missing/"
	}
	if err := c.Client.Create(ctx, broken); err != nil {
		return nil, err
	}
	// A dataset the operator is to index (spec.index), suspended: its
	// stream's indexing shows on the dashboard's indexing row.
	unindexed := broken.DeepCopy()
	unindexed.ObjectMeta = metav1.ObjectMeta{Name: "unindexed", Namespace: starvedNamespace}
	unindexed.Spec.Streams = slices.DeleteFunc(unindexed.Spec.Streams, func(s datav1alpha1.Stream) bool { return s.Format == datav1alpha1.FormatMDS })
	unindexed.Spec.Index = &datav1alpha1.IndexJob{WriteCredentialsSecretRef: datav1alpha1.SecretReference{Name: secretName}, Suspend: true}
	if err := c.Client.Create(ctx, unindexed); err != nil {
		return nil, err
	}

	c.Step("Prometheus (bin/prometheus) scraping the manager and the sidecars as the chart's monitors say, with its rules (each `for` %s, each 5-minute window %s)", alertFor, alertWindow)
	p, err := c.StartPrometheus(ctx, alertFor, alertWindow)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	rep := &MonitoringReport{}
	if err := c.healthyMonitoredJob(ctx, p, healthy, rep); err != nil {
		return rep, err
	}
	if err := c.starvedJob(ctx, p, proxy, starved, rep); err != nil {
		return rep, err
	}
	// Each rule evaluated many times by now: its health is its last.
	if rep.Rules, err = p.Rules(ctx); err != nil {
		return rep, err
	}
	c.Detail("%d rules loaded", len(rep.Rules))
	return rep, nil
}

// healthyMonitoredJob trains a job of 2 pods on MinIO, watching the
// alerts, and runs the dashboard's queries while it trains.
func (c *Cluster) healthyMonitoredJob(ctx context.Context, p *Prometheus, e *Env, rep *MonitoringReport) error {
	c.Step("A healthy job of 2 pods in %s, watched", e.NS)
	job, err := e.StartJob(ctx, 2)
	if err != nil {
		return err
	}
	if err := e.WaitPodsRunning(ctx, job, 2); err != nil {
		return err
	}
	// Both sidecars and the manager scraped: every query but the node
	// cache row's.
	if rep.Dashboard, rep.Targets, err = c.dashboardWhileTraining(ctx, p, e.NS, "shardfeed-manager",
		func(q DashboardQuery) bool { return !NodeCacheQuery(q) }); err != nil {
		return err
	}
	c.Detail("%d dashboard queries run while the job trains", len(rep.Dashboard))
	watchErr := WaitFor(ctx, 10*time.Minute, "Job "+job.Name+" to complete, watched", func() (bool, error) {
		alerts, err := p.Alerts(ctx)
		if err != nil {
			return false, err
		}
		for _, a := range alerts {
			if ns := a.Labels["namespace"]; ns == "" || ns == e.NS {
				if s := a.Name + " " + a.State + " " + a.Labels["pod"]; !slices.Contains(rep.HealthyAlerts, s) {
					rep.HealthyAlerts = append(rep.HealthyAlerts, s)
				}
			}
		}
		share, err := maxValue(ctx, p, `shardfeed:data_wait_share:rate5m{namespace="`+e.NS+`"}`)
		if err != nil {
			return false, err
		}
		rep.HealthyWaitShare = max(rep.HealthyWaitShare, share)
		return e.jobDone(ctx, job)
	})
	if watchErr != nil {
		return watchErr
	}
	st, err := e.State(ctx)
	if err != nil {
		return err
	}
	if rep.Healthy, err = e.CheckLineage(ctx, st); err != nil {
		return err
	}
	c.Detail("healthy: %s; its ranks waited at most %.0f%% of their time; alerts seen: %v", rep.Healthy.Summary(), 100*rep.HealthyWaitShare, rep.HealthyAlerts)
	return nil
}

// starvedJob trains a job of 2 pods through the proxy; once it has
// committed, the store slows down (every 32 KiB of its answers 4 s late)
// until ShardfeedTrainingStarved fires for the job; then the job goes.
func (c *Cluster) starvedJob(ctx context.Context, p *Prometheus, proxy *testenv.SlowProxy, e *Env, rep *MonitoringReport) error {
	c.Step("A job of 2 pods in %s, reading through the proxy", e.NS)
	job, err := e.StartJob(ctx, 2)
	if err != nil {
		return err
	}
	at, err := e.WaitCommitted(ctx, commitEvery)
	if err != nil {
		return err
	}
	proxy.SetDelay(slowStoreDelay)
	c.Step("The store slows down after the commit of step %d: %s per 32 KiB", at, slowStoreDelay)
	start := time.Now()
	var terminal error
	err = WaitFor(ctx, 4*time.Minute, "ShardfeedTrainingStarved to fire for "+e.NS, func() (bool, error) {
		alerts, err := p.Alerts(ctx)
		if err != nil {
			return false, err
		}
		share, err := maxValue(ctx, p, `shardfeed:data_wait_share:rate5m{namespace="`+e.NS+`"}`)
		if err != nil {
			return false, err
		}
		rep.StarvedWaitShare = max(rep.StarvedWaitShare, share)
		for _, a := range alerts {
			if a.Name == "ShardfeedTrainingStarved" && a.State == "firing" && a.Labels["namespace"] == e.NS {
				rep.Starved, rep.StarvedAfter = &a, time.Since(start)
				return true, nil
			}
		}
		done, err := e.jobDone(ctx, job)
		if done {
			terminal = errors.New("it completed")
		}
		return done, err
	})
	if err == nil && terminal != nil {
		// What the sidecars were told of the waits, and their own.
		var seen []string
		for _, q := range []string{"shardfeed_sidecar_data_wait_seconds_sum", "shardfeed_sidecar_data_wait_seconds_count", "shardfeed_sidecar_batch_wait_seconds_sum"} {
			series, qerr := p.Query(ctx, `max_over_time(`+q+`{namespace="`+e.NS+`"}[10m])`)
			for _, s := range series {
				seen = append(seen, fmt.Sprintf("%s{pod=%s,rank=%s}=%s", q, s.Labels["pod"], s.Labels["rank"], s.Value))
			}
			if qerr != nil {
				seen = append(seen, qerr.Error())
			}
		}
		err = fmt.Errorf("the starved job ended before the alert fired (its ranks waited at most %.0f%% of their time): %w; %s",
			100*rep.StarvedWaitShare, terminal, strings.Join(seen, ", "))
	}
	if err != nil {
		return err
	}
	c.Detail("ShardfeedTrainingStarved fired for %s %s after the store slowed (its ranks waited %.0f%% of their time)", rep.Starved.Labels["pod"],
		rep.StarvedAfter.Round(time.Second), 100*rep.StarvedWaitShare)
	proxy.SetDelay(0)
	return e.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationForeground))
}

// jobDone says whether every pod of job succeeded; a failed Job is an
// error.
func (e *Env) jobDone(ctx context.Context, job *batchv1.Job) (bool, error) {
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
		return false, err
	}
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return false, fmt.Errorf("job %s failed: %s", job.Name, c.Message)
		}
	}
	return job.Status.Succeeded == ptr.Deref(job.Spec.Completions, 1), nil
}

// maxValue is the largest value of a query's series (0 for none).
func maxValue(ctx context.Context, p *Prometheus, q string) (float64, error) {
	series, err := p.Query(ctx, q)
	if err != nil {
		return 0, err
	}
	best := 0.0
	for _, s := range series {
		if v, err := strconv.ParseFloat(s.Value, 64); err == nil && v > best {
			best = v
		}
	}
	return best, nil
}

// targetsText says each target's pool, namespace/pod, health and error.
func targetsText(targets []PromTarget) string {
	var b strings.Builder
	for _, t := range targets {
		fmt.Fprintf(&b, "\n  %s %s/%s %s %s", t.Job, t.Labels["namespace"], t.Labels["pod"], t.Health, t.LastError)
	}
	return b.String()
}

// dashboardWhileTraining runs the dashboard's queries that want picks once
// Prometheus scrapes two sidecars of ns and a target of pool, and has done
// so for a rate interval; it returns each query's series and the targets.
func (c *Cluster) dashboardWhileTraining(ctx context.Context, p *Prometheus, ns, pool string, want func(DashboardQuery) bool) (map[DashboardQuery]int, []PromTarget, error) {
	var targets []PromTarget
	if err := WaitFor(ctx, time.Minute, "Prometheus to scrape "+pool+" and the sidecars of "+ns, func() (bool, error) {
		var err error
		if targets, err = p.Targets(ctx); err != nil {
			return false, err
		}
		up := map[string]int{}
		for _, t := range targets {
			if t.Health == "up" && (t.Job == pool || t.Labels["namespace"] == ns) {
				up[t.Job]++
			}
		}
		return up[pool] >= 1 && up["shardfeed-sidecars"] >= 2, nil
	}); err != nil {
		return nil, targets, fmt.Errorf("%w; targets: %s", err, targetsText(targets))
	}
	time.Sleep(rateInterval)
	queries, err := c.DashboardQueries(rateInterval)
	if err != nil {
		return nil, targets, err
	}
	out := map[DashboardQuery]int{}
	for _, q := range queries {
		if !want(q) {
			continue
		}
		series, err := p.Query(ctx, q.Expr)
		if err != nil {
			return nil, targets, err
		}
		out[q] = len(series)
	}
	return out, targets, nil
}

package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	alertFor = 10 * time.Second
	// rateInterval is the dashboard's $__rate_interval here: Grafana makes
	// it 4 scrape intervals at least.
	rateInterval = 4 * scrapeInterval
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
	// of time waiting, and StarvedAfter how long after the job's start it
	// fired.
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
	healthy, err := c.NewEnv(ctx, monitoredNamespace, opts)
	if err != nil {
		return nil, err
	}
	opts.Endpoint = "http://" + proxy.Addr
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

	c.Step("Prometheus (bin/prometheus) scraping the manager and the sidecars as the chart's monitors say, with its rules (each `for` %s)", alertFor)
	p, err := c.StartPrometheus(ctx, alertFor)
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
	// Both sidecars and the manager scraped, and for long enough that a
	// rate over the dashboard's interval has two samples.
	if err := WaitFor(ctx, time.Minute, "Prometheus to scrape the manager and both sidecars", func() (bool, error) {
		targets, err := p.Targets(ctx)
		if err != nil {
			return false, err
		}
		rep.Targets = targets
		up := map[string]int{}
		for _, t := range targets {
			if t.Health == "up" && (t.Job == "shardfeed-manager" || t.Labels["namespace"] == e.NS) {
				up[t.Job]++
			}
		}
		return up["shardfeed-manager"] >= 1 && up["shardfeed-sidecars"] >= 2, nil
	}); err != nil {
		return err
	}
	time.Sleep(rateInterval)
	queries, err := c.DashboardQueries(rateInterval)
	if err != nil {
		return err
	}
	rep.Dashboard = map[DashboardQuery]int{}
	for _, q := range queries {
		if NodeCacheQuery(q) {
			continue
		}
		series, err := p.Query(ctx, q.Expr)
		if err != nil {
			return err
		}
		rep.Dashboard[q] = len(series)
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

// starvedJob trains a job of 2 pods through the slow proxy (every 32 KiB
// of the store's answers 600 ms late) until ShardfeedTrainingStarved fires
// for it, then deletes it.
func (c *Cluster) starvedJob(ctx context.Context, p *Prometheus, proxy *testenv.SlowProxy, e *Env, rep *MonitoringReport) error {
	proxy.SetDelay(600 * time.Millisecond)
	c.Step("A job of 2 pods in %s reading through the slow store (600 ms per 32 KiB)", e.NS)
	job, err := e.StartJob(ctx, 2)
	if err != nil {
		return err
	}
	start := time.Now()
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
			err = errors.New("it completed")
		}
		if err != nil {
			return false, fmt.Errorf("the starved job ended before the alert fired (its ranks waited at most %.0f%% of their time): %w", 100*rep.StarvedWaitShare, err)
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	c.Detail("ShardfeedTrainingStarved fired for %s after %s (its ranks waited %.0f%% of their time)", rep.Starved.Labels["pod"],
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
		if c.Type == batchv1.JobFailed && c.Status == "True" {
			return false, fmt.Errorf("job %s failed: %s", job.Name, c.Message)
		}
	}
	return job.Status.Succeeded == *job.Spec.Completions, nil
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

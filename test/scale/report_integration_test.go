//go:build integration

package scale_test

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// counters are the replicas' and the API server's counters at one moment.
type counters struct {
	at                                         time.Time
	admissions, requests, webhookRequests, cpu float64
	connections                                float64 // TCP connections the proxy forwarded
	hook                                       histogram
	reconcileSum, reconcileCount               float64
}

func snapshot(t *testing.T, reps []*replica) counters {
	t.Helper()
	return counters{
		at:              time.Now(),
		admissions:      metrics(t, reps, "controller_runtime_webhook_requests_total", `webhook="/mutate-v1-pod"`),
		requests:        metrics(t, reps, "rest_client_requests_total"),
		webhookRequests: metrics(t, reps, "shardfeed_admission_api_requests_total"),
		cpu:             measure(t, reps).cpu,
		connections:     float64(proxied.Load()),
		hook:            apiServerHistogram(t, "apiserver_admission_webhook_admission_duration_seconds_bucket", `name="pods.shardfeed.io"`),
		reconcileSum:    metrics(t, reps, "controller_runtime_reconcile_time_seconds_sum", `controller="trainingdataset"`),
		reconcileCount:  metrics(t, reps, "controller_runtime_reconcile_time_seconds_count", `controller="trainingdataset"`),
	}
}

// phaseFigures are a phase's admissions and what they cost.
type phaseFigures struct {
	admissions, webhookRequests, requests, cpu float64
	connections                                float64
	hookP50, hookP99, reconcile                time.Duration
}

func phase(before, after counters) phaseFigures {
	return phaseFigures{admissions: after.admissions - before.admissions, webhookRequests: after.webhookRequests - before.webhookRequests,
		requests: after.requests - before.requests, cpu: after.cpu - before.cpu, connections: after.connections - before.connections,
		hookP50: quantile(after.hook, before.hook, 0.5), hookP99: quantile(after.hook, before.hook, 0.99), reconcile: meanReconcile(after, before)}
}

// histogram is a Prometheus histogram's cumulative counts by upper bound.
type histogram map[float64]float64

func apiServerHistogram(t *testing.T, name, match string) histogram {
	t.Helper()
	rc, err := apiServer.RawGet(t.Context(), "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	h := histogram{}
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, match) {
			continue
		}
		_, le, ok := strings.Cut(line, `le="`)
		if !ok {
			continue
		}
		le, _, _ = strings.Cut(le, `"`)
		bound := math.Inf(1)
		if le != "+Inf" {
			bound, _ = strconv.ParseFloat(le, 64)
		}
		v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		h[bound] += v
	}
	return h
}

// quantile of the observations between before and after, interpolated
// within the bucket (as Prometheus's histogram_quantile).
func quantile(after, before histogram, q float64) time.Duration {
	var bounds []float64
	for b := range after {
		bounds = append(bounds, b)
	}
	slices.Sort(bounds)
	if len(bounds) == 0 {
		return 0
	}
	total := after[math.Inf(1)] - before[math.Inf(1)]
	if total <= 0 {
		return 0
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for _, b := range bounds {
		n := after[b] - before[b]
		if n >= rank {
			if math.IsInf(b, 1) {
				return time.Duration(lower * float64(time.Second))
			}
			frac := (rank - below) / math.Max(n-below, 1e-9)
			return time.Duration((lower + (b-lower)*frac) * float64(time.Second))
		}
		lower, below = b, n
	}
	return 0
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(p*float64(len(sorted)-1))]
}

// configMapWrites is the writes of ConfigMaps the API server has served.
func configMapWrites(t *testing.T) float64 {
	t.Helper()
	var n float64
	for _, verb := range []string{"POST", "PUT", "PATCH"} {
		n += apiServerMetric(t, "apiserver_request_total", `resource="configmaps"`, `verb="`+verb+`"`)
	}
	return n
}

func meanReconcile(after, before counters) time.Duration {
	n := after.reconcileCount - before.reconcileCount
	if n <= 0 {
		return 0
	}
	return time.Duration((after.reconcileSum - before.reconcileSum) / n * float64(time.Second))
}

// report is one run's figures.
type report struct {
	sc                      scenario
	paced, burst            phaseFigures
	peak                    int64
	p50, p99                time.Duration
	pacedRate               float64
	burstPods               int
	burstTook               time.Duration
	registrations, commits  int
	regTook                 time.Duration
	regWrites, commitWrites float64
	wave                    waveFigures
	waveCost                phaseFigures
	gone, readyIn           time.Duration
	statusP50, statusMax    time.Duration // a commit to its job's progress in the dataset's status
}

func (r report) log(t *testing.T) {
	t.Helper()
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d.Microseconds())/1000) }
	s := func(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
	cost := func(p phaseFigures) string {
		return fmt.Sprintf("%.3f API requests per admission by the webhook (%.0f / %.0f), %.3f by the whole manager; %.2f ms of manager CPU per admission; %.2f new TLS connections from the API server per admission; API server's webhook time p50 %s, p99 %s",
			p.webhookRequests/p.admissions, p.webhookRequests, p.admissions, p.requests/p.admissions, p.cpu*1000/p.admissions, p.connections/p.admissions, ms(p.hookP50), ms(p.hookP99))
	}
	rows := [][2]string{
		{"scenario", fmt.Sprintf("%d KWOK nodes; %d TrainingDatasets in %d namespaces; %d pods: paced Jobs %v, then Indexed Jobs %v, StatefulSets %v, JobSets (Jobs × pods) %v; %d unrelated ConfigMaps, %d unrelated Jobs; 2 manager replicas",
			r.sc.nodes, r.sc.datasets, r.sc.namespaces, r.sc.pods(), r.sc.paced, r.sc.indexed, r.sc.statefulSets, r.sc.jobSets, r.sc.unrelatedConfigMaps, r.sc.unrelatedJobs)},
		{"datasets ready (index read from MinIO, planned, plan ConfigMap applied)", s(r.readyIn)},
		{fmt.Sprintf("pods created at %.0f/s (%.0f/s reached), each creation timed by the client", r.sc.rate, r.pacedRate), fmt.Sprintf("admission p50 **%s**, p99 **%s**; %s", ms(r.p50), ms(r.p99), cost(r.paced))},
		{fmt.Sprintf("a burst: %d pods of every other job created at once by the Job and StatefulSet controllers", r.burstPods), fmt.Sprintf("all admitted and bound to nodes in %s; %s", s(r.burstTook), cost(r.burst))},
		{"mean dataset reconcile during the burst (status of the jobs' states)", ms(r.burst.reconcile)},
		{"manager peak RSS (VmHWM of the larger replica, whole run)", fmt.Sprintf("**%.0f MiB**", float64(r.peak)/(1<<20))},
		{"registrations (one per sidecar start), 32 at a time", fmt.Sprintf("%d in %s (%.0f/s); %.0f ConfigMap writes at the API server", r.registrations, s(r.regTook), float64(r.registrations)/r.regTook.Seconds(), r.regWrites)},
		{"commits (each job's rank 0 every 100 steps at 1 step/s)", fmt.Sprintf("%d in %s: **%.2f** ConfigMap writes/s at the API server; a commit to its job's step in the dataset's `status.jobs`: p50 %s, max %s",
			r.commits, s(r.sc.commitFor), r.commitWrites/r.sc.commitFor.Seconds(), ms(r.statusP50), ms(r.statusMax))},
		{fmt.Sprintf("a rescale wave: %d Indexed Jobs (%d pods) deleted and made again with half their pods under the same `shardfeed.io/job`, at once", r.wave.jobs, r.wave.oldPods),
			fmt.Sprintf("%d new pods admitted and on nodes in %s, the old ones gone in %s; each job's state kept, the next generation; %s", r.wave.pods, s(r.wave.admitted), s(r.wave.cleaned), cost(r.waveCost))},
		{"the datasets' deletion to every plan and state ConfigMap gone", s(r.gone)},
	}
	var b strings.Builder
	b.WriteString("| figure | value |\n| --- | --- |\n")
	for _, row := range rows {
		fmt.Fprintf(&b, "| %s | %s |\n", row[0], row[1])
	}
	t.Logf("scale run:\n%s", b.String())
	if path := os.Getenv("SCALE_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil { //nolint:gosec // a report
			t.Error(err)
		}
	}
}

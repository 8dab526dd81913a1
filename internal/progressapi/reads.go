package progressapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/progress"
)

// Reads reports. Every sidecar reports what it read every minute: a job
// of thousands of pods would update its state ConfigMap many times a
// second. The endpoint sums the reports of each job in memory and writes
// the sum into the state at most every Endpoint.ReadsFlush (each replica its own
// sums: they add up), and when it stops. A replica that crashes loses at
// most that much of the counts, never progress.

// DefaultReadsFlush is how long a job's reports are summed before they
// are written into its state.
const DefaultReadsFlush = 30 * time.Second

func (e *Endpoint) readsFlush() time.Duration {
	if e.ReadsFlush > 0 {
		return e.ReadsFlush
	}
	return DefaultReadsFlush
}

// readsKey names a job's state.
type readsKey struct{ namespace, dataset, job string }

// pendingReads are a job's reports not yet written, with the last
// reporter's identity (an admitted attempt of the job).
type pendingReads struct {
	reads configmaps.Reads
	who   *identity
	since time.Time
}

func (e *Endpoint) reads(ctx context.Context, who *identity, req *http.Request) (*configmaps.State, error) {
	var r progress.ReadsRequest
	if err := progress.DecodeRequest(req.Body, &r); err != nil {
		return nil, refuse(http.StatusBadRequest, "%v", err)
	}
	if err := progress.CheckReads(r); err != nil {
		return nil, refuse(http.StatusBadRequest, "%v", err)
	}
	key := readsKey{who.namespace, who.contract.Dataset, who.contract.Job}
	now := time.Now()
	e.readsMu.Lock()
	if e.pending == nil {
		e.pending = map[readsKey]*pendingReads{}
	}
	p := e.pending[key]
	if p == nil {
		p = &pendingReads{since: now}
		e.pending[key] = p
	}
	p.reads.Add(r)
	p.who = who
	due := now.Sub(p.since) >= e.readsFlush()
	e.readsMu.Unlock()
	if due {
		e.flush(ctx, key)
	}
	// The answer is the job's identity, not its state: a report costs
	// no read of the ConfigMap.
	return &configmaps.State{Layout: configmaps.LayoutVersion, Dataset: who.contract.Dataset, Job: who.contract.Job}, nil
}

// flush writes a job's summed reports into its state. What could not be
// written for a passing reason is kept for the next flush; what the state
// refuses (its job gone, the attempt not admitted) is dropped.
func (e *Endpoint) flush(ctx context.Context, key readsKey) {
	e.readsMu.Lock()
	p := e.pending[key]
	delete(e.pending, key)
	e.readsMu.Unlock()
	if p == nil || p.reads.IsZero() {
		return
	}
	j := e.job(p.who, "", 0)
	_, err := progress.RecordReads(ctx, e.store(p.who), &j, p.reads)
	switch {
	case err == nil:
	case errors.Is(err, progress.ErrRefused) || errors.Is(err, progress.ErrNoState):
		e.Log.V(1).Info("Dropped reads reports", "namespace", key.namespace, "dataset", key.dataset, "job", key.job, "reason", err.Error())
	default:
		e.Log.Info("Could not write reads reports; kept for the next flush", "namespace", key.namespace, "job", key.job, "err", err.Error())
		e.readsMu.Lock()
		if q := e.pending[key]; q != nil {
			q.reads.Add(p.reads)
		} else {
			e.pending[key] = p
		}
		e.readsMu.Unlock()
	}
}

// FlushReads writes every job's summed reports into its state.
func (e *Endpoint) FlushReads(ctx context.Context) {
	e.readsMu.Lock()
	keys := make([]readsKey, 0, len(e.pending))
	for k := range e.pending {
		keys = append(keys, k)
	}
	e.readsMu.Unlock()
	for _, k := range keys {
		e.flush(ctx, k)
	}
}

// Start flushes the reports every ReadsFlush until ctx ends, then once
// more: a manager Runnable of every replica (NeedLeaderElection).
func (e *Endpoint) Start(ctx context.Context) error {
	t := time.NewTicker(e.readsFlush())
	defer t.Stop()
	for {
		select {
		case <-t.C:
			e.FlushReads(ctx)
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			e.FlushReads(fctx)
			return nil
		}
	}
}

// NeedLeaderElection is false: each replica flushes the reports it took.
func (e *Endpoint) NeedLeaderElection() bool { return false }

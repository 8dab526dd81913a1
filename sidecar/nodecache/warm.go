package nodecache

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/shardfeed/shardfeed/sidecar/cache"
)

// Pre-warm. A pod's sidecar names the shards it reads next (its plan's
// next window, the next epoch's first steps); the agent keeps those it
// holds before plain recency, and fetches those it lacks ahead of the
// pod's requests, with the credentials of that warm request, into room
// beside what its pods read next. The entries are addressed as a shard
// request's are: a warm request fills only what its own credentials read.

// warm takes a warm request: it marks its shards wanted and queues the
// fills of those the node lacks, answering at once.
func (a *Agent) warm(w http.ResponseWriter, r *http.Request) error {
	var req WarmRequest
	caller, err := a.admit(w, r, "warm", &req)
	if err != nil {
		return err
	}
	reqs := req.Requests()
	shards := make([]cache.Shard, len(reqs))
	for i, sr := range reqs {
		if shards[i], err = a.entry(caller, sr); err != nil {
			return refuse(http.StatusBadRequest, "%v", err)
		}
	}
	// Asked before wantMu is taken: the cache asks keep, which takes it,
	// with its own lock held.
	present := make([]bool, len(shards))
	for i, sh := range shards {
		present[i] = a.cache.Present(sh)
	}
	var ans WarmAnswer
	now := time.Now()
	a.wantMu.Lock()
	for addr, until := range a.wanted {
		if now.After(until) {
			delete(a.wanted, addr)
		}
	}
	for addr, at := range a.warmed {
		if now.Sub(at) > a.opts.WantedFor {
			delete(a.warmed, addr) // never asked for: no lead time
		}
	}
	for i, sh := range shards {
		a.wanted[sh.Key] = now.Add(a.opts.WantedFor)
		switch {
		case present[i]:
			ans.Present++
		case a.queued[sh.Key]:
			ans.Queued++
		default:
			select {
			case a.warmQ <- warmJob{req: reqs[i], shard: sh, at: now}:
				a.queued[sh.Key] = true
				ans.Queued++
			default:
				ans.Dropped++
			}
		}
	}
	a.wantMu.Unlock()
	a.count(func(s *Stats) {
		s.WarmRequests++
		s.WarmDropped += int64(ans.Dropped)
	})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	return json.NewEncoder(w).Encode(ans)
}

// keep says an entry is wanted: a pod named it in a warm request lately.
// The cache asks it with its lock held: nothing holding wantMu may call
// the cache.
func (a *Agent) keep(s cache.Shard) bool {
	a.wantMu.Lock()
	defer a.wantMu.Unlock()
	until, ok := a.wanted[s.Key]
	return ok && time.Now().Before(until)
}

// warmFills runs the warm fills until ctx ends.
func (a *Agent) warmFills(ctx context.Context) {
	for range a.opts.WarmFillers {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case job := <-a.warmQ:
					a.warmFill(ctx, job)
				}
			}
		}()
	}
}

// warmFill fetches one shard a warm request named, unless it waited too
// long (its credentials go with it), came meanwhile, or has no room beside
// the entries held and wanted.
func (a *Agent) warmFill(ctx context.Context, job warmJob) {
	defer func() {
		a.wantMu.Lock()
		delete(a.queued, job.shard.Key)
		a.wantMu.Unlock()
	}()
	if a.cache.Present(job.shard) {
		return
	}
	if time.Since(job.at) > a.opts.WarmMaxAge || !a.cache.FitsBesideHeld(job.shard.Size) {
		a.count(func(s *Stats) { s.WarmDropped++ })
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	file, hit, err := a.acquire(ctx, job.req, job.shard)
	if err != nil {
		a.count(func(s *Stats) { s.WarmFailed++ })
		a.opts.Log.Info("A warm fill failed; the pod reads the shard itself", "reason", err.Error())
		return
	}
	_ = file.Close()
	a.cache.Release(job.shard)
	if hit {
		return // a request filled it meanwhile
	}
	a.wantMu.Lock()
	a.warmed[job.shard.Key] = time.Now()
	a.wantMu.Unlock()
	a.count(func(s *Stats) { s.WarmFills++ })
}

// servedWarm says, for an entry served, whether a warm fill fetched it and
// how long before this first request (recorded once).
func (a *Agent) servedWarm(s cache.Shard, hit bool) (time.Duration, bool) {
	if !hit {
		return 0, false
	}
	a.wantMu.Lock()
	at, ok := a.warmed[s.Key]
	delete(a.warmed, s.Key)
	a.wantMu.Unlock()
	if !ok {
		return 0, false
	}
	lead := time.Since(at)
	a.lead.Observe(lead.Seconds())
	return lead, true
}

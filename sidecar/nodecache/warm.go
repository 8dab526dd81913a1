package nodecache

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/shardfeed/shardfeed/sidecar/cache"
	"github.com/shardfeed/shardfeed/sidecar/nodecache/nodewire"
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
	var req nodewire.WarmRequest
	caller, release, err := a.admit(w, r, "warm", &req, &req.Source)
	if err != nil {
		return err
	}
	defer release()
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
	var ans nodewire.WarmAnswer
	now := time.Now()
	pod := caller.Namespace + "/" + caller.Pod
	a.wantMu.Lock()
	a.sweepWanted(now)
	for i, sh := range shards {
		if !a.markWanted(pod, sh.Key, now) {
			ans.Dropped++ // no room in the wanted set
			continue
		}
		switch {
		case present[i]:
			ans.Present++
		case a.queued[sh.Key]:
			ans.Queued++
		case a.warmQ.push(warmJob{req: reqs[i], shard: sh, at: now, pod: pod}):
			a.queued[sh.Key] = true
			ans.Queued++
		default:
			ans.Dropped++ // the queue, or the pod's share of it, is full
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

// want is a wanted entry: until when, and the pod that named it last.
type want struct {
	until time.Time
	by    string
}

// podWants are a pod's wanted entries, oldest first, and when it last
// named one.
type podWants struct {
	addrs []string
	last  time.Time
}

// sweepInterval spaces the sweeps of expired wanted entries: a sweep
// reads them all.
const sweepInterval = 30 * time.Second

// sweepWanted drops the expired wanted entries and the pods that named
// none lately, at most every sweepInterval, or at once when the set is
// full. wantMu is held.
func (a *Agent) sweepWanted(now time.Time) {
	if now.Sub(a.swept) < sweepInterval && len(a.wanted) < a.opts.MaxWanted {
		return
	}
	a.swept = now
	for addr, w := range a.wanted {
		if now.After(w.until) {
			delete(a.wanted, addr)
		}
	}
	for pod, pw := range a.wantedBy {
		if now.Sub(pw.last) > a.opts.WantedFor {
			delete(a.wantedBy, pod)
			continue
		}
		pw.addrs = slices.DeleteFunc(pw.addrs, func(addr string) bool { return a.wanted[addr].by != pod })
	}
	for addr, at := range a.warmed {
		if now.Sub(at) > a.opts.WantedFor {
			delete(a.warmed, addr) // never asked for: no lead time
		}
	}
}

// markWanted keeps addr before plain recency for WantedFor, named by
// pod: within the pod's share (its oldest let go first) and the set's
// bound. false: no room. wantMu is held.
func (a *Agent) markWanted(pod, addr string, now time.Time) bool {
	w, ok := a.wanted[addr]
	if !ok && len(a.wanted) >= a.opts.MaxWanted {
		return false
	}
	pw := a.wantedBy[pod]
	if pw == nil {
		pw = &podWants{}
		a.wantedBy[pod] = pw
	}
	pw.last = now
	if !ok || w.by != pod {
		pw.addrs = append(pw.addrs, addr)
	}
	a.wanted[addr] = want{until: now.Add(a.opts.WantedFor), by: pod}
	for len(pw.addrs) > a.opts.MaxWantedPerPod {
		old := pw.addrs[0]
		pw.addrs = pw.addrs[1:]
		if a.wanted[old].by == pod {
			delete(a.wanted, old)
		}
	}
	return true
}

// keep says an entry is wanted: a pod named it in a warm request lately.
// The cache asks it with its lock held: nothing holding wantMu may call
// the cache.
func (a *Agent) keep(s cache.Shard) bool {
	a.wantMu.Lock()
	defer a.wantMu.Unlock()
	w, ok := a.wanted[s.Key]
	return ok && time.Now().Before(w.until)
}

// warmFills runs the warm fills until ctx ends; wait returns once every
// filler has stopped.
func (a *Agent) warmFills(ctx context.Context) (wait func()) {
	context.AfterFunc(ctx, a.warmQ.close)
	var wg sync.WaitGroup
	for range a.opts.WarmFillers {
		wg.Go(func() {
			for {
				job, ok := a.warmQ.pop()
				if !ok {
					return
				}
				a.warmFill(ctx, job)
				a.warmQ.done(job.pod)
			}
		})
	}
	return wg.Wait
}

// warmQueue holds the warm fills waiting, each pod's apart, and hands
// them to the fillers in turn, pod after pod: one pod's many fills, or its
// slow ones, take at most its share of the queue and of the fillers, and
// the next pod's fill runs beside them.
type warmQueue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	byPod   map[string][]warmJob
	order   []string // the pods with fills waiting, in turn
	next    int
	running map[string]int
	total   int
	closed  bool
	// max and perPod bound the fills waiting; fillers bounds one pod's
	// running.
	max, perPod, fillers int
}

func newWarmQueue(maxJobs, perPod, fillers int) *warmQueue {
	q := &warmQueue{byPod: map[string][]warmJob{}, running: map[string]int{}, max: maxJobs, perPod: perPod, fillers: fillers}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// push queues job, false when the queue or its pod's share is full.
func (q *warmQueue) push(job warmJob) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.total >= q.max || len(q.byPod[job.pod]) >= q.perPod {
		return false
	}
	if len(q.byPod[job.pod]) == 0 {
		q.order = append(q.order, job.pod)
	}
	q.byPod[job.pod] = append(q.byPod[job.pod], job)
	q.total++
	q.cond.Signal()
	return true
}

// pop waits for the next pod in turn with a fill waiting and a filler to
// spare; false once the queue is closed.
func (q *warmQueue) pop() (warmJob, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for !q.closed {
		for i := range q.order {
			idx := (q.next + i) % len(q.order)
			pod := q.order[idx]
			if q.running[pod] >= q.fillers {
				continue
			}
			job := q.byPod[pod][0]
			q.byPod[pod] = q.byPod[pod][1:]
			q.total--
			q.running[pod]++
			q.next = idx + 1
			if len(q.byPod[pod]) == 0 {
				delete(q.byPod, pod)
				q.order = slices.Delete(q.order, idx, idx+1)
				q.next = idx
			}
			return job, true
		}
		q.cond.Wait()
	}
	return warmJob{}, false
}

// done notes that a fill of pod's ended.
func (q *warmQueue) done(pod string) {
	q.mu.Lock()
	if q.running[pod]--; q.running[pod] <= 0 {
		delete(q.running, pod)
	}
	q.cond.Broadcast()
	q.mu.Unlock()
}

func (q *warmQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
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

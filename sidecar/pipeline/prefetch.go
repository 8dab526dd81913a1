package pipeline

import (
	"context"
	"sync"

	"github.com/shardfeed/shardfeed/planner"
)

// scopeKey names the splits of one epoch that one prefetcher covers: a
// pod's (rank mode pod) or a rank's.
type scopeKey struct {
	epoch    int64
	first, n int
}

// scope prefetches the shards of its splits in the order the plan needs
// them (planner.ShardsNeeded): every shard the readers need at the
// slowest reader's step (the front), and PrefetchShards more, decoded and
// held until the front has passed the last step that reads them.
type scope struct {
	p      *Pipeline
	key    scopeKey
	needs  []planner.ShardNeed
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	front   int64
	readers map[int]int64
	nextID  int
	wake    chan struct{}
}

// scope returns the prefetcher of (epoch, splits), started at step start;
// prefetchers of earlier epochs stop.
func (p *Pipeline) scope(ep *planner.EpochPlan, first, n int, start int64) *scope {
	key := scopeKey{ep.Epoch(), first, n}
	p.mu.Lock()
	sc, ok := p.scopes[key]
	var stale []*scope
	if !ok {
		for k, old := range p.scopes {
			if k.epoch < key.epoch {
				stale = append(stale, old)
				delete(p.scopes, k)
			}
		}
		ctx, cancel := context.WithCancel(p.ctx)
		sc = &scope{p: p, key: key, needs: ep.ShardsNeeded(first, n), cancel: cancel, done: make(chan struct{}),
			front: start, readers: map[int]int64{}, wake: make(chan struct{}, 1)}
		p.scopes[key] = sc
		go sc.run(ctx)
	}
	p.mu.Unlock()
	for _, old := range stale {
		old.stop()
	}
	return sc
}

// Prefetch starts fetching and decoding the shards of splits [first,
// first+n) of epoch e from step start, before any reader asks: a pod's
// sidecar warms its splits at start-up.
func (p *Pipeline) Prefetch(e int64, first, n int, start int64) error {
	ep, err := p.Epoch(e)
	if err != nil {
		return err
	}
	p.scope(ep, first, n, start)
	return nil
}

// Ready reports whether the shards of step k of splits [first, first+n)
// of epoch e are decoded: the first batch is served without waiting.
func (p *Pipeline) Ready(e int64, first, n int, k int64) bool {
	ep, err := p.Epoch(e)
	if err != nil || k >= p.plan.Steps() {
		return err == nil
	}
	batch, err := ep.SplitsBatch(nil, k, first, n)
	if err != nil {
		return false
	}
	p.decoded.mu.Lock()
	defer p.decoded.mu.Unlock()
	for _, s := range batch {
		d, ok := p.decoded.shards[shardKey{s.Stream, s.Shard}]
		if !ok || d.sh == nil {
			return false
		}
	}
	return true
}

func (s *scope) stop() {
	s.cancel()
	<-s.done
}

func (s *scope) register(step int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextID
	s.nextID++
	s.readers[id] = step
	s.updateLocked()
	return id
}

func (s *scope) advance(id int, step int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readers[id] = step
	s.updateLocked()
}

func (s *scope) unregister(id int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.readers, id)
}

// updateLocked moves the front to the slowest reader's step.
func (s *scope) updateLocked() {
	f := int64(-1)
	for _, k := range s.readers {
		if f < 0 || k < f {
			f = k
		}
	}
	if f >= 0 && f != s.front {
		s.front = f
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

func (s *scope) run(ctx context.Context) {
	defer close(s.done)
	// held maps a need's index to its decoded shard (nil while in flight).
	held := map[int]*decodedShard{}
	var mu sync.Mutex // guards held against the fetch goroutines
	sem := make(chan struct{}, s.p.opts.Fetchers)
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		for _, d := range held {
			if d != nil {
				s.p.decoded.release(d)
			}
		}
	}()
	done := make(chan struct{}, 1)
	next := 0
	for {
		s.mu.Lock()
		front := s.front
		s.mu.Unlock()
		if front >= s.p.plan.Steps() {
			return
		}
		ahead := 0
		mu.Lock()
		for i, d := range held {
			nd := s.needs[i]
			switch {
			case d != nil && nd.LastStep < front:
				s.p.decoded.release(d)
				delete(held, i)
			case nd.FirstStep > front:
				ahead++
			}
		}
		mu.Unlock()
		room, freed := s.p.decoded.room()
	fetch:
		for next < len(s.needs) {
			nd := s.needs[next]
			if nd.LastStep < front {
				next++
				continue
			}
			if nd.FirstStep > front && (ahead >= s.p.opts.PrefetchShards || !room) {
				break
			}
			select {
			case sem <- struct{}{}:
			default:
				break fetch // every fetcher is busy
			}
			if nd.FirstStep > front {
				ahead++
			}
			i := next
			next++
			mu.Lock()
			held[i] = nil
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				d, err := s.p.decoded.acquire(ctx, shardKey{nd.Stream, nd.Shard})
				<-sem
				mu.Lock()
				if err != nil {
					s.p.stats.prefetchErrors.Add(1)
					delete(held, i) // the reader meets the error itself
				} else {
					s.p.stats.prefetched.Add(1)
					held[i] = d
				}
				mu.Unlock()
				select {
				case done <- struct{}{}:
				default:
				}
			}()
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-done:
		case <-freed:
		}
	}
}

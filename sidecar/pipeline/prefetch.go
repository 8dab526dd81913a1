package pipeline

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/cache"
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
	p     *Pipeline
	key   scopeKey
	needs []planner.ShardNeed
	// urgent is how many of needs, first in it, the steps from the
	// scope's start read (startFirst): sized and fetched before the rest.
	urgent int
	// sized is how many of needs are at hand: their entries resolved and
	// their bytes set, where the streams' indexes are read in parts (the
	// run's goroutine sizes them, a window ahead of what it fetches);
	// all of them otherwise.
	sized int
	sizer *planner.NeedSizer
	// last is the last step that reads each shard of needs.
	last   map[shardKey]int64
	cancel context.CancelFunc
	done   chan struct{}
	// warmed says the next epoch's first steps were warmed (warmNext).
	warmed bool

	mu      sync.Mutex
	front   int64
	readers map[int]reader
	// left is, for each split of the scope, the step its last reader
	// stopped at (the scope's start until one comes); low is the lowest
	// step any split is at, counting those with no reader now: a shard
	// read at low or later is still to be read.
	left   []int64
	low    int64
	nextID int
	wake   chan struct{}
}

// reader is a registered reader's step and splits (from the scope's first).
type reader struct {
	step     int64
	first, n int
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
		sc = &scope{p: p, key: key, last: map[shardKey]int64{}, cancel: cancel, done: make(chan struct{}),
			front: start, readers: map[int]reader{}, left: make([]int64, n), low: start, wake: make(chan struct{}, 1)}
		if p.lean {
			sc.needs, sc.sizer = ep.ShardsAhead(first, n), p.plan.NeedSizer()
			sc.urgent = startFirst(sc.needs, ep, p.plan.Steps(), start, first, n)
		} else {
			sc.needs = ep.ShardsNeeded(first, n)
			sc.sized = len(sc.needs)
			sc.urgent = startFirst(sc.needs, ep, p.plan.Steps(), start, first, n)
			// The objects' shared parts on their first shards in the new order.
			p.plan.NeedSizer().Size(sc.needs)
		}
		for i := range sc.left {
			sc.left[i] = start
		}
		for _, nd := range sc.needs {
			sc.last[shardKey{nd.Stream, nd.Shard}] = nd.LastStep
		}
		p.scopes[key] = sc
		go sc.run(ctx)
	}
	p.mu.Unlock()
	for _, old := range stale {
		old.stop()
	}
	if len(stale) > 0 {
		p.unwarmBefore(key.epoch)
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

// urgentSteps are the steps from a prefetcher's start whose shards it
// fetches first, in the order those steps read them.
const urgentSteps = 8

// urgentRun is how many of those needs a prefetcher sizes at once, where
// the streams' indexes are read in parts: as many entries as one round of
// an index's concurrent reads resolves.
const urgentRun = 32

// startFirst moves to the front of needs the shards that the steps
// [start, start+urgentSteps) of splits [first, first+n) read, in the order
// they first read them, and returns how many it moved. With shuffle a
// need's FirstStep is its block's first step: every shard of a split's
// block is needed from there on, a split's share of hundreds of shards for
// a pod, in no order; and a pod is ready when its start step's shards are
// decoded, a few of them.
func startFirst(needs []planner.ShardNeed, ep *planner.EpochPlan, steps, start int64, first, n int) int {
	last := min(start+urgentSteps, steps)
	order := map[shardKey]int{}
	var batch []planner.Sample
	for k := start; k < last; k++ {
		var err error
		if batch, err = ep.SplitsBatch(batch[:0], k, first, n); err != nil {
			return 0 // the prefetcher keeps the plan's order
		}
		for _, smp := range batch {
			if key := (shardKey{smp.Stream, smp.Shard}); !hasKey(order, key) {
				order[key] = len(order)
			}
		}
	}
	// Needs are in the order of their first step: those of the steps
	// before last are a prefix.
	end := 0
	for end < len(needs) && needs[end].FirstStep < last {
		end++
	}
	prefix := needs[:end]
	slices.SortStableFunc(prefix, func(a, b planner.ShardNeed) int {
		ra, oka := order[shardKey{a.Stream, a.Shard}]
		rb, okb := order[shardKey{b.Stream, b.Shard}]
		switch {
		case oka && okb:
			return cmp.Compare(ra, rb)
		case oka:
			return -1
		case okb:
			return 1
		}
		return 0
	})
	moved := 0
	for moved < len(prefix) {
		if _, ok := order[shardKey{prefix[moved].Stream, prefix[moved].Shard}]; !ok {
			break
		}
		moved++
	}
	return moved
}

func hasKey(m map[shardKey]int, k shardKey) bool {
	_, ok := m[k]
	return ok
}

// needed reports whether the readers of a prefetch scope have yet to read
// the shard.
func (p *Pipeline) needed(k shardKey) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, sc := range p.scopes {
		if sc.toRead(k) {
			return true
		}
	}
	return false
}

// toRead reports whether a split of the scope has yet to pass the last step
// that reads the shard: one whose reader is behind, gone, or not come yet
// (a pod's ranks do not connect at once).
func (s *scope) toRead(k shardKey) bool {
	last, ok := s.last[k]
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return last >= s.low
}

// maxGroup bounds the needs one prefetch fetches together; the read-ahead
// looks for their neighbours among the aheadScan needs that follow.
const (
	maxGroup  = 16
	aheadScan = 4 * maxGroup
	nowScan   = 16 * aheadScan
)

// readAhead returns the parts of the needs among the aheadScan from next
// that continue the group's ranges in their object, up to maxGroup needs in
// all; none if the cache lacks room for them. Needs no step from front on
// reads are passed over (nor are their entries at hand); those the front's
// step needs are all looked at. Needs the cache
// has or is fetching bridge the ranges without counting: a run of row
// groups read ahead is continued past them. Where the group itself costs
// no request (the cache has it) and the run would bring fewer than half a
// group, it waits: the need at the run's edge is fetched with its own
// neighbours when its turn comes, rather than one GET each as the window
// moves on by a need at a time (the splits' needs interleave, so a split's
// next row group is aheadScan needs on).
func (s *scope) readAhead(group []int, next int, front int64) []cache.Shard {
	first := s.needs[group[0]]
	ps := s.p.opts.Streams[first.Stream]
	fp := ps.Parts(first.Shard)
	lo, hi, ok := rangeOf(fp)
	if !ok {
		return nil
	}
	key := fp[0].Key
	c := s.p.opts.Cache
	free := c.Fetched(fp[0])
	for _, i := range group[1:] {
		parts := ps.Parts(s.needs[i].Shard)
		if l, h, ok := rangeOf(parts); ok {
			lo, hi = min(lo, l), max(hi, h)
			free = free && c.Fetched(parts[0])
		}
	}
	type cand struct {
		lo, hi int64
		i      int
		bridge bool
	}
	// The needs of the front's step on, and those it needs now (a shuffle
	// block's, in no order: their neighbours are needed now too), up to
	// nowScan.
	end := next + aheadScan
	for end < min(s.sized, next+nowScan) && s.needs[end].FirstStep <= front {
		end++
	}
	var cands []cand
	for j := next; j < min(s.sized, end); j++ {
		nd := s.needs[j]
		if nd.Stream != first.Stream || nd.LastStep < front || passed(nd) || s.p.decoded.has(shardKey{nd.Stream, nd.Shard}) {
			continue
		}
		parts := ps.Parts(nd.Shard)
		if l, h, ok := rangeOf(parts); ok && parts[0].Key == key {
			cands = append(cands, cand{l, h, j, c.Fetched(parts[0])})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Compare(a.lo, b.lo) })
	var take []int
	var bytes int64
	for grew := true; grew && len(group)+len(take) < maxGroup; {
		grew = false
		for k, c := range cands {
			if c.i < 0 || len(group)+len(take) >= maxGroup {
				continue
			}
			if c.lo == hi || c.hi == lo {
				lo, hi = min(lo, c.lo), max(hi, c.hi)
				if !c.bridge {
					take = append(take, c.i)
					bytes += s.needs[c.i].Bytes
				}
				cands[k].i = -1
				grew = true
			}
		}
	}
	if len(take) == 0 || free && len(take) < maxGroup/2 || !c.Fits(bytes) {
		return nil
	}
	var out []cache.Shard
	for _, j := range take {
		out = append(out, ps.Parts(s.needs[j].Shard)...)
	}
	return out
}

// rangeOf returns the bytes of an object a shard's first part spans: its
// range, if it is one of known size.
func rangeOf(parts []cache.Shard) (lo, hi int64, ok bool) {
	if len(parts) == 0 || !parts[0].Range || parts[0].Size < 0 {
		return 0, 0, false
	}
	return parts[0].Offset, parts[0].Offset + parts[0].Size, true
}

// neighbours reports whether the shards of a and b are ranges of one
// object next to each other (either way round), which one GET can bring.
func (p *Pipeline) neighbours(a, b planner.ShardNeed) bool {
	if a.Stream != b.Stream {
		return false
	}
	pa, pb := p.opts.Streams[a.Stream].Parts(a.Shard), p.opts.Streams[b.Stream].Parts(b.Shard)
	la, ha, oka := rangeOf(pa)
	lb, hb, okb := rangeOf(pb)
	return oka && okb && pa[0].Key == pb[0].Key && (lb == ha || hb == la)
}

func (s *scope) stop() {
	s.cancel()
	<-s.done
}

// register adds a reader of splits [first, first+n) at step.
func (s *scope) register(step int64, first, n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextID
	s.nextID++
	lo := min(max(first-s.key.first, 0), len(s.left))
	hi := min(max(first+n-s.key.first, lo), len(s.left))
	s.readers[id] = reader{step: step, first: lo, n: hi - lo}
	s.updateLocked()
	return id
}

func (s *scope) advance(id int, step int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.readers[id]
	r.step = step
	s.readers[id] = r
	s.updateLocked()
}

func (s *scope) unregister(id int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.readers[id]
	delete(s.readers, id)
	for i := r.first; i < r.first+r.n; i++ {
		s.left[i] = r.step
	}
	s.updateLocked()
}

// updateLocked moves the front to the slowest reader's step, and low to
// the slowest split's.
func (s *scope) updateLocked() {
	low := int64(math.MaxInt64)
	for i, left := range s.left {
		at, read := int64(math.MaxInt64), false
		for _, r := range s.readers {
			if i >= r.first && i < r.first+r.n {
				at, read = min(at, r.step), true
			}
		}
		if !read {
			at = left
		}
		low = min(low, at)
	}
	s.low = low
	f := int64(-1)
	for _, r := range s.readers {
		if f < 0 || r.step < f {
			f = r.step
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

// inFlight is what a scope's prefetcher holds while it runs.
type inFlight struct {
	mu sync.Mutex // guards held against the fetch goroutines
	// held maps a need's index to its decoded shard (nil while in flight).
	held map[int]*decodedShard
	// fetches and bytes are the fetches in flight and their shards' bytes.
	fetches int
	bytes   int64
	wg      sync.WaitGroup
	done    chan struct{} // a fetch ended
}

// hintAhead is how many needs from the next one a prefetcher names to the
// node's cache (cache.Hint): fetched there while the pod reads the ones
// before, and kept there before plain recency.
const hintAhead = 64

// hint names the needs [next, next+hintAhead) not named yet (hinted is
// where the last hint ended) once half of the last window is fetched, and
// returns where this one ends.
func (s *scope) hint(next, hinted int) int {
	end := min(next+hintAhead, s.sized)
	if hinted-next >= hintAhead/2 || end <= hinted {
		return hinted
	}
	var parts []cache.Shard
	for _, nd := range s.needs[max(next, hinted):end] {
		if !passed(nd) {
			parts = append(parts, s.p.opts.Streams[nd.Stream].Parts(nd.Shard)...)
		}
	}
	if !s.p.opts.Cache.Hint(parts) {
		return hinted // the last one is in flight: at the next wake
	}
	return end
}

// Fetch slots. Options.Fetchers fetches are in flight at once whatever
// their size; more, up to cache.MaxDownloads, while the bytes in flight
// stay under cache.SmallInFlightBytes: small shards are latency-bound, as
// the cache's download slots count them (sidecar/cache/slots.go).

// slotBytes is what a need counts in the bytes in flight: its shard's,
// or, not known, all the room for small ones.
func slotBytes(nd planner.ShardNeed) int64 {
	if nd.Bytes <= 0 {
		return cache.SmallInFlightBytes
	}
	return nd.Bytes
}

// take claims a fetch slot for a need of n bytes; past the fixed
// fetchers only where fits says the cache has room for it and the fetches
// in flight without evicting (a full cache's fetches wait on its room,
// not the store, and more of them would only contend for it).
func (f *inFlight) take(fetchers int, n int64, fits func(int64) bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fetches >= fetchers && (f.fetches >= cache.MaxDownloads || f.bytes+n > cache.SmallInFlightBytes || !fits(f.bytes+n)) {
		return false
	}
	f.fetches++
	f.bytes += n
	return true
}

// grow counts n more bytes to a slot taken (the group's neighbours).
func (f *inFlight) grow(n int64) {
	f.mu.Lock()
	f.bytes += n
	f.mu.Unlock()
}

// give returns a slot of n bytes, as take and grow counted them.
func (f *inFlight) give(n int64) {
	f.mu.Lock()
	f.fetches--
	f.bytes -= n
	f.mu.Unlock()
}

// holds says need i is held or in flight.
func (f *inFlight) holds(i int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.held[i]
	return ok
}

// idle says no fetch is in flight.
func (f *inFlight) idle() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range f.held {
		if d == nil {
			return false
		}
	}
	return true
}

func (s *scope) run(ctx context.Context) {
	defer close(s.done)
	f := &inFlight{held: map[int]*decodedShard{}, done: make(chan struct{}, 1)}
	next, hinted := 0, 0
	var was int64 // the front at the last round
	// letGo waits for the fetches in flight and releases what they hold.
	letGo := func() {
		f.wg.Wait()
		f.mu.Lock()
		for i, d := range f.held {
			if d != nil {
				s.p.decoded.release(d, keep)
			}
			delete(f.held, i)
		}
		f.mu.Unlock()
	}
	defer letGo()
	for {
		s.mu.Lock()
		front := s.front
		s.mu.Unlock()
		if front >= s.p.plan.Steps() {
			// The readers finished the epoch. What is held goes; the next
			// epoch's first steps are warmed if this loop had not yet
			// (the readers fetched the last shards themselves, or the
			// last fetch had not ended). The loop then waits: a reader of
			// this epoch again (a trainer restarted at its committed
			// step) has it prefetch from that reader's step.
			letGo()
			if !s.warmed && ctx.Err() == nil {
				s.warmed = true
				s.p.warms.Add(1)
				go s.warmNext()
			}
			was = front
			select {
			case <-ctx.Done():
				return
			case <-s.wake:
			}
			continue
		}
		if front < was {
			// A reader came at an earlier step: the needs from there on
			// are fetched again, those still held passed over.
			next, hinted = 0, 0
		}
		was = front
		ahead := s.releaseBehind(f, front)
		room, freed := s.p.decoded.room()
		for {
			sized := s.sizeTo(next, SizedAhead(s.p.opts.PrefetchShards), front)
			var group []int
			if group, next = s.nextGroup(f, next, front, &ahead, room); group == nil {
				if next == s.sized && sized {
					continue // it passed over every need sized: size more
				}
				break
			}
			// Their neighbours among the needs further on come in the same
			// GET, into the cache only (not decoded: the window bounds
			// memory), while the cache has room for them without evicting.
			parts := s.readAhead(group, next, front)
			// Their bytes count in the fetch's slot: the bound on bytes
			// in flight holds with them.
			var extra int64
			for _, p := range parts {
				extra += max(p.Size, 0)
			}
			f.grow(extra)
			f.mu.Lock()
			for _, i := range group {
				f.held[i] = nil
			}
			f.mu.Unlock()
			f.wg.Add(1)
			go s.fetch(ctx, f, group, parts, extra)
		}
		if s.p.opts.Cache.Hints() {
			hinted = s.hint(next, hinted)
		}
		if next == len(s.needs) && !s.warmed && f.idle() {
			s.warmed = true
			s.p.warms.Add(1)
			go s.warmNext()
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-f.done:
		case <-freed:
		}
	}
}

// warmNext fetches into the cache the shards the next epoch's first
// urgentSteps steps read from the scope's splits, once the scope has
// fetched every shard of its own (none in flight: they would evict
// these): the epoch's first batch then waits for no store. They are not
// decoded (the readers' window bounds memory) but held until that epoch's
// prefetcher takes them, and fetched only while the cache has room for
// them without evicting a shard a reader still needs (those this epoch's
// readers have passed give way, decoded or not), in the order the steps
// read them. It runs on the pipeline's context, not the scope's: the next
// epoch's readers stop this scope and join its fetches in flight.
func (s *scope) warmNext() {
	defer s.p.warms.Done()
	ctx := store.Ahead(s.p.ctx)
	ep, err := s.p.Epoch(s.key.epoch + 1)
	if err != nil {
		return
	}
	var keys []shardKey
	seen := map[shardKey]bool{}
	var batch []planner.Sample
	for k := range min(int64(urgentSteps), s.p.plan.Steps()) {
		if batch, err = ep.SplitsBatch(batch[:0], k, s.key.first, s.key.n); err != nil {
			return
		}
		for _, smp := range batch {
			if key := (shardKey{smp.Stream, smp.Shard}); !seen[key] {
				seen[key] = true
				keys = append(keys, key)
			}
		}
	}
	if err := s.p.resolve(keys); err != nil {
		return // the readers meet the error themselves
	}
	c := s.p.opts.Cache
	if c.Hints() {
		var parts []cache.Shard
		for _, k := range keys {
			parts = append(parts, s.p.opts.Streams[k.stream].Parts(k.shard)...)
		}
		c.Hint(parts) // the node fetches them while this one asks
	}
	for _, k := range keys {
		if ctx.Err() != nil {
			return
		}
		if s.p.decoded.has(k) {
			s.p.stats.warmedNext.Add(1)
			continue
		}
		parts := s.p.opts.Streams[k.stream].Parts(k.shard)
		var missing int64
		for _, part := range parts {
			if !c.Present(part) {
				missing += max(part.Size, 0)
			}
		}
		// No room yet while this epoch's readers still read the shards the
		// cache holds: try again as they pass them, until the next epoch's
		// prefetcher starts (it fetches what is left itself).
		for missing > 0 && !s.p.decoded.dropUnneeded(seen, func() bool { return c.FitsBesideHeld(missing) }) {
			if s.p.epochStarted(s.key.epoch+1) || !sleepCtx(ctx, warmRetry) {
				return
			}
		}
		// Held until the next epoch's prefetcher takes them (unwarm): the
		// cache would evict them first otherwise, nothing else holding them.
		var held []cache.Shard
		for _, part := range parts {
			if _, err := c.Acquire(ctx, part); err != nil {
				break // the readers meet the error themselves
			}
			held = append(held, part)
		}
		if len(held) < len(parts) || !s.p.keepWarm(s.key.epoch+1, k, held) {
			for _, part := range held {
				c.Release(part)
			}
			return
		}
		s.p.stats.warmedNext.Add(1)
	}
}

// warmRetry is how often warmNext looks again for room.
const warmRetry = 25 * time.Millisecond

// epochStarted says a prefetcher of epoch e or later was started.
func (p *Pipeline) epochStarted(e int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.scopes {
		if k.epoch >= e {
			return true
		}
	}
	return false
}

// sleepCtx waits d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// keepWarm records the parts warmed for epoch e's shard k, held until a
// prefetcher of that epoch has the shard decoded (unwarm), or one of a
// later epoch starts; false if the pipeline closed meanwhile or they are
// kept already.
func (p *Pipeline) keepWarm(e int64, k shardKey, parts []cache.Shard) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		return false
	}
	if p.warmed[e] == nil {
		p.warmed[e] = map[shardKey][]cache.Shard{}
	}
	if _, ok := p.warmed[e][k]; ok {
		return false
	}
	p.warmed[e][k] = parts
	return true
}

// unwarm lets go of the parts warmed for epoch e's shard k.
func (p *Pipeline) unwarm(e int64, k shardKey) {
	p.mu.Lock()
	parts := p.warmed[e][k]
	delete(p.warmed[e], k)
	p.mu.Unlock()
	for _, part := range parts {
		p.opts.Cache.Release(part)
	}
}

// unwarmBefore lets go of the parts warmed for epochs before e (every
// epoch: math.MaxInt64) that no prefetcher took.
func (p *Pipeline) unwarmBefore(e int64) {
	p.mu.Lock()
	var parts []cache.Shard
	for we, keys := range p.warmed {
		if we < e {
			for _, ps := range keys {
				parts = append(parts, ps...)
			}
			delete(p.warmed, we)
		}
	}
	p.mu.Unlock()
	for _, part := range parts {
		p.opts.Cache.Release(part)
	}
}

// releaseBehind releases the shards held that no step from front on
// reads, and counts those held for steps after front.
func (s *scope) releaseBehind(f *inFlight, front int64) (ahead window) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, d := range f.held {
		nd := s.needs[i]
		switch {
		case d != nil && nd.LastStep < front:
			s.p.decoded.release(d, keep)
			delete(f.held, i)
		case nd.FirstStep > front:
			ahead.add(nd)
		}
	}
	return ahead
}

// window is what a prefetcher holds ahead of the front: shards a later
// step reads, fetched or in flight.
type window struct {
	shards int
	bytes  int64
}

func (w *window) add(nd planner.ShardNeed) {
	w.shards++
	w.bytes += slotBytes(nd)
}

// full says nd waits: PrefetchShards shards are ahead, and more would pass
// cache.MaxDownloads or extra bytes (aheadBytes), or the cache's room
// beside what it holds. A window of 2 shards of 64 KiB keeps 3 requests in
// flight, each a round trip to the store, and an epoch of small objects
// waits on them; counted in bytes past the shards asked for, small shards
// fill it to what a few large ones would. Prefetch 0 asks for none ahead,
// and gets none.
func (w window) full(prefetch int, extra int64, nd planner.ShardNeed, c *cache.Cache) bool {
	if w.shards < prefetch {
		return false
	}
	n := slotBytes(nd)
	// Fits first: constant time, and enough for an unbounded cache or one
	// not yet full; FitsBesideHeld walks the entries, for a full one.
	return prefetch == 0 || w.shards >= cache.MaxDownloads || w.bytes+n > extra || !c.Fits(n) && !c.FitsBesideHeld(n)
}

// aheadBytes bounds the bytes of the shards a window holds past its
// PrefetchShards: cache.SmallInFlightBytes, and a 32nd of the memory for
// decoded shards (they are held decoded, and a shard decodes to several
// times its bytes: images decoded in the sidecar, compressed columns).
func (p *Pipeline) aheadBytes() int64 {
	return min(cache.SmallInFlightBytes, p.opts.DecodedLimitBytes/32)
}

// nextGroup takes the next needs to fetch from next on, with a fetcher's
// slot: one need, and the needs next in line that are neighbouring ranges
// of one object (Parquet row groups), fetched with one GET. It returns nil
// when there is none to fetch now: every fetcher is busy, or the next one
// is for a later step and the prefetch window (ahead of the front, and the
// memory for decoded shards: room) is full.
func (s *scope) nextGroup(f *inFlight, next int, front int64, ahead *window, room bool) ([]int, int) {
	for next < s.sized && (s.needs[next].LastStep < front || passed(s.needs[next]) || f.holds(next)) {
		next++
	}
	wait := func(nd planner.ShardNeed) bool {
		return nd.FirstStep > front && (!room || ahead.full(s.p.opts.PrefetchShards, s.p.aheadBytes(), nd, s.p.opts.Cache))
	}
	if next == s.sized || wait(s.needs[next]) {
		return nil, next
	}
	if !f.take(s.p.opts.Fetchers, slotBytes(s.needs[next]), s.p.opts.Cache.Fits) {
		return nil, next // every fetch slot is taken
	}
	if s.needs[next].FirstStep > front {
		ahead.add(s.needs[next])
	}
	group := []int{next}
	next++
	for len(group) < maxGroup && next < s.sized {
		nx := s.needs[next]
		if nx.LastStep < front || passed(nx) || f.holds(next) || wait(nx) || !s.p.neighbours(s.needs[group[len(group)-1]], nx) {
			break
		}
		if nx.FirstStep > front {
			ahead.add(nx)
		}
		f.grow(slotBytes(nx))
		group = append(group, next)
		next++
	}
	return group, next
}

// SizedAhead is how many needs past the next one to fetch a prefetcher
// has at hand (their entries resolved, where the streams' indexes are read
// in parts): those its next group and read-ahead look at, and the
// prefetched shards.
func SizedAhead(prefetchShards int) int { return maxGroup + aheadScan + prefetchShards }

// sizeTo resolves the entries of the window of needs past next, where the
// streams' indexes are read in parts and fewer are at hand, and sets their
// bytes: those no step from front on reads are passed over, marked so
// (passed) and never fetched by the prefetcher, even should a reader come
// at an earlier step (the readers resolve their batches' shards). A failed
// read leaves them unsized, to try again at the next wake; the readers
// meet the error themselves. It says whether it sized more.
func (s *scope) sizeTo(next, window int, front int64) (more bool) {
	// Twice the window: its entries in a few reads at once, not one need's
	// at a time as the window moves.
	want, hi := min(next+window, len(s.needs)), min(next+2*window, len(s.needs))
	if next < s.urgent {
		// The needs of the start's steps, in runs of urgentRun as they are
		// fetched: a pod is ready when the first few are decoded, and
		// sizing them all first would have it wait for all their entries.
		want, hi = min(want, s.urgent, next+1), min(hi, s.urgent, next+urgentRun)
	}
	if s.sized >= want {
		return false
	}
	var keys []shardKey
	for _, nd := range s.needs[s.sized:hi] {
		if nd.LastStep >= front {
			keys = append(keys, shardKey{nd.Stream, nd.Shard})
		}
	}
	if err := s.p.resolve(keys); err != nil {
		s.p.stats.prefetchErrors.Add(1)
		return false
	}
	for i := s.sized; i < hi; i++ {
		if s.needs[i].LastStep >= front {
			s.sizer.Size(s.needs[i : i+1])
		} else {
			s.needs[i].Bytes = -1
		}
	}
	s.sized = hi
	return true
}

// passed says whether sizeTo passed over the need, its entry not resolved.
func passed(nd planner.ShardNeed) bool { return nd.Bytes < 0 }

// fetch brings a group's shards (and parts, read ahead into the cache)
// and decodes them, holding each until the front passes it; it gives its
// fetcher's slot back and says it is done.
func (s *scope) fetch(ctx context.Context, f *inFlight, group []int, parts []cache.Shard, extra int64) {
	defer f.wg.Done()
	if len(group) > 1 || len(parts) > 0 {
		for _, i := range group {
			// A shard in memory may have left the cache (moved to the
			// heap), and the readers may have passed one: neither is
			// fetched again.
			if nd := s.needs[i]; !s.p.decoded.has(shardKey{nd.Stream, nd.Shard}) && s.p.needed(shardKey{nd.Stream, nd.Shard}) {
				parts = append(parts, s.p.opts.Streams[nd.Stream].Parts(nd.Shard)...)
			}
		}
		// An error is each need's to meet below, on its own.
		parts, _ = s.p.opts.Cache.AcquireRun(ctx, parts)
	}
	for _, i := range group {
		nd := s.needs[i]
		d, err := s.p.decoded.acquire(ctx, shardKey{nd.Stream, nd.Shard}, keep)
		s.p.unwarm(s.key.epoch, shardKey{nd.Stream, nd.Shard})
		f.mu.Lock()
		switch {
		case errors.Is(err, errNotNeeded):
			delete(f.held, i)
		case err != nil:
			s.p.stats.prefetchErrors.Add(1)
			delete(f.held, i) // the reader meets the error itself
		default:
			s.p.stats.prefetched.Add(1)
			f.held[i] = d
		}
		f.mu.Unlock()
	}
	for _, part := range parts {
		s.p.opts.Cache.Release(part)
	}
	// The slot is free before the loop wakes to take it.
	n := extra
	for _, i := range group {
		n += slotBytes(s.needs[i])
	}
	f.give(n)
	select {
	case f.done <- struct{}{}:
	default:
	}
}

package cache

import (
	"context"
	"sync"
)

// Download slots. Options.Parallel downloads run at once whatever their
// size; more, up to MaxDownloads, while the bytes in flight stay under
// SmallInFlightBytes. A small object (tens of KiB: an MDS shard, a chunk, a
// row group) costs a request's round trip, tens of milliseconds on a cloud
// store, for what the link moves in a fraction of one: a few at a time wait
// on latency, not bandwidth (objects of 64 KiB 30 ms away, 4 at once, come
// at 8 MiB/s). Large shards keep the fixed few: each is already fetched in
// parallel parts.
const (
	MaxDownloads       = 64
	SmallInFlightBytes = 32 << 20
)

// slots hands the slots out first come, first served: a download that
// must wait queues, and while any waits a newcomer queues behind it, so
// neither a stream of small downloads nor one that gives its slot back
// and asks again at once keeps a large one waiting.
type slots struct {
	fixed int

	mu    sync.Mutex
	n     int   // downloads in flight
	bytes int64 // their bytes
	queue []*slotWaiter
}

type slotWaiter struct {
	size    int64
	granted chan struct{} // closed when the slot is this waiter's
}

func newSlots(fixed int) *slots { return &slots{fixed: fixed} }

// fitsLocked says a download of size may start now.
func (s *slots) fitsLocked(size int64) bool {
	return s.n < s.fixed || s.n < MaxDownloads && s.bytes+size <= SmallInFlightBytes
}

// acquire waits for a slot for a download of size bytes (not known: size
// <= 0) and returns its release.
func (s *slots) acquire(ctx context.Context, size int64) (release func(), err error) {
	if size <= 0 || size > SmallInFlightBytes {
		size = SmallInFlightBytes
	}
	release = func() { s.release(size) }
	s.mu.Lock()
	if len(s.queue) == 0 && s.fitsLocked(size) {
		s.n++
		s.bytes += size
		s.mu.Unlock()
		return release, nil
	}
	w := &slotWaiter{size: size, granted: make(chan struct{})}
	s.queue = append(s.queue, w)
	s.mu.Unlock()
	select {
	case <-w.granted:
		return release, nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-w.granted: // granted meanwhile: given back
		s.n--
		s.bytes -= size
	default:
		for i, q := range s.queue {
			if q == w {
				s.queue = append(s.queue[:i], s.queue[i+1:]...)
				break
			}
		}
	}
	s.grantLocked() // the head may have waited behind this one
	return nil, context.Cause(ctx)
}

func (s *slots) release(size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n--
	s.bytes -= size
	s.grantLocked()
}

// grantLocked gives slots to the waiters in order, while the head's fits.
func (s *slots) grantLocked() {
	for len(s.queue) > 0 && s.fitsLocked(s.queue[0].size) {
		w := s.queue[0]
		s.queue = s.queue[1:]
		s.n++
		s.bytes += w.size
		close(w.granted)
	}
}

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

type slots struct {
	fixed int

	mu    sync.Mutex
	n     int   // downloads in flight
	bytes int64 // their bytes
	// large counts the waiters only a fixed slot takes: while one waits,
	// no small download takes a slot past the fixed ones, so a stream of
	// small ones does not keep a large one waiting for ever.
	large int
	wake  chan struct{} // closed when a slot is given back
}

func newSlots(fixed int) *slots { return &slots{fixed: fixed, wake: make(chan struct{})} }

// acquire waits for a slot for a download of size bytes (not known: size
// <= 0) and returns its release.
func (s *slots) acquire(ctx context.Context, size int64) (release func(), err error) {
	if size <= 0 || size > SmallInFlightBytes {
		size = SmallInFlightBytes
	}
	counted := false
	defer func() {
		if counted {
			s.mu.Lock()
			s.large--
			s.mu.Unlock()
		}
	}()
	for {
		s.mu.Lock()
		small := s.n < MaxDownloads && s.bytes+size <= SmallInFlightBytes && s.large == 0
		if s.n < s.fixed || small {
			s.n++
			s.bytes += size
			s.mu.Unlock()
			return func() { s.release(size) }, nil
		}
		if !counted && size == SmallInFlightBytes {
			counted = true
			s.large++
		}
		wake := s.wake
		s.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

func (s *slots) release(size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n--
	s.bytes -= size
	close(s.wake)
	s.wake = make(chan struct{})
}

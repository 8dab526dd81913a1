// Package handoff hands batches to the training processes through shared
// memory instead of the socket. Each batch stream has a few slots, each a
// sealed memfd segment the sidecar writes a batch into and the client maps:
// the client's tensors are views of the segment, so a batch is copied once,
// by the sidecar, from the decoded shards into memory the trainer reads.
//
// The client learns of a segment once (its file descriptor crosses the
// socket with SCM_RIGHTS) and of each batch by a small descriptor: the
// slot, its generation and the length. When the training loop drops the
// batch, the client writes the generation into the slot's word of the
// stream's control segment; the sidecar writes into a slot only when its
// word says the last batch in it was released, so a batch a tensor still
// views is never overwritten.
//
// Nothing the client writes is trusted beyond its own stream: the words are
// read only to decide whether a slot of that stream is free, and the
// segments are sealed against shrinking, so a client cannot make the
// sidecar fault on a truncated mapping. A sidecar that dies mid-batch sent
// no descriptor for it: the client never sees a half-written batch, and
// the segments it maps stay valid after the sidecar is gone.
package handoff

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/shardfeed/shardfeed/clients/go/handoffwire"
)

// DefaultSlots is the number of segments a stream uses at most: the batch
// the training loop holds, the one it receives next, and two the sidecar
// fills ahead.
const DefaultSlots = 4

// The wire the clients read (clients/go/handoffwire).
const (
	FrameArrow   = handoffwire.FrameArrow
	FrameControl = handoffwire.FrameControl
	FrameSegment = handoffwire.FrameSegment
	FrameBatch   = handoffwire.FrameBatch
	// MaxSlots keeps the control segment to one page.
	MaxSlots = handoffwire.MaxSlots
)

// ControlBytes is the size of a stream's control segment.
func ControlBytes(slots int) int { return handoffwire.ControlBytes(slots) }

// Control is the client's side of a control segment (tests write it as a
// client does).
type Control = handoffwire.Control

// NewControl returns the client's side of the control segment mem.
func NewControl(mem []byte, slots int) *Control { return handoffwire.NewControl(mem, slots) }

// grain rounds segment sizes, so a batch a little larger than the last
// reuses its segment; smallGrain rounds those under a grain, so small
// batches do not take a grain of the budget each.
const (
	grain      = 1 << 20
	smallGrain = 64 << 10
)

// pageSize is the size of the control segment.
const pageSize = 4096

// Pool bounds the bytes of every stream's segments together. Their pages
// are shared memory charged to the sidecar's container (it writes them
// first), which is why the webhook adds the limit to its memory.
type Pool struct {
	limit    int64
	used     atomic.Int64
	segments atomic.Int64
	batches  atomic.Int64
	inline   atomic.Int64
	lastErr  atomic.Pointer[string]
}

// NewPool returns a pool of limit bytes (0: no hand-off through memory).
func NewPool(limit int64) *Pool { return &Pool{limit: limit} }

// PoolStats is what /v1/status says of the pool.
type PoolStats struct {
	LimitBytes int64 `json:"limitBytes"`
	Bytes      int64 `json:"bytes"`
	Segments   int64 `json:"segments"`
	// Batches counts batches handed over in memory.
	Batches int64 `json:"batches"`
	// InlineBatches counts batches sent through the socket because no slot
	// was free and the client held every one, or the pool was full.
	InlineBatches int64 `json:"inlineBatches"`
	// LastError is why a segment could not be made (the batch went in the
	// stream), if one could not.
	LastError string `json:"lastError,omitempty"`
}

// Stats returns the pool's use.
func (p *Pool) Stats() PoolStats {
	if p == nil {
		return PoolStats{}
	}
	st := PoolStats{LimitBytes: p.limit, Bytes: p.used.Load(), Segments: p.segments.Load(), Batches: p.batches.Load(), InlineBatches: p.inline.Load()}
	if e := p.lastErr.Load(); e != nil {
		st.LastError = *e
	}
	return st
}

// Enabled reports whether batches may go through memory.
func (p *Pool) Enabled() bool { return p != nil && p.limit > 0 }

func (p *Pool) reserve(n int64) bool {
	for {
		used := p.used.Load()
		if used+n > p.limit {
			return false
		}
		if p.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// segment is one slot's shared memory.
type segment struct {
	fd  int // until sent to the client; then -1
	mem []byte
	gen uint64
}

// Stream is the slots of one batch stream (one connection).
type Stream struct {
	pool  *Pool
	slots []*segment
	ctl   []byte // the control segment: a released generation per slot, then the descriptors read
	ctlFD int
	sent  uint64 // descriptors sent
	waits int    // sleeps waiting for the client (the tests count them)
}

// Slot is where to write one batch.
type Slot struct {
	Index int
	Gen   uint64
	// Mem is the segment: write the batch at its start.
	Mem []byte
	// FD is the segment's file descriptor when the client does not have
	// it yet, else -1; whoever sends it closes it (Sent).
	FD int
}

// NewStream returns a stream of slots segments drawn from pool.
func NewStream(pool *Pool, slots int) (*Stream, error) {
	if slots < 1 || slots > MaxSlots {
		return nil, fmt.Errorf("hand-off slots %d: use 1 to %d", slots, MaxSlots)
	}
	fd, mem, err := newSegment("shardfeed-control", pageSize)
	if err != nil {
		return nil, err
	}
	return &Stream{pool: pool, slots: make([]*segment, slots), ctl: mem, ctlFD: fd}, nil
}

// TakeControlFD hands over the control segment's descriptor, to send
// once, first (the caller closes it).
func (s *Stream) TakeControlFD() int {
	fd := s.ctlFD
	s.ctlFD = -1
	return fd
}

// Slots is the number of slots.
func (s *Stream) Slots() int { return len(s.slots) }

// The control segment's words after the slots' (handoffwire).
const (
	wordRead    = handoffwire.WordRead
	wordSeq     = handoffwire.WordSeq
	wordWaiting = handoffwire.WordWaiting
	wordsAfter  = handoffwire.WordsAfter
)

// word returns the control word i, as the client last wrote it.
func (s *Stream) word(i int) uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&s.ctl[8*i])))
}

// A wait for the client sleeps at most waitFirst before looking again
// (and at the context), and each further wait of the same Take twice as
// long, to waitMost: a client that holds its slots while it computes (a
// user's decode, a training step) costs the sidecar a few wake-ups a
// batch, not one a millisecond (at 1 ms, they were most of its CPU with
// the loop decoding JPEGs: 0.17 ms an image). A release wakes it at once
// (WordWaiting); the sleep only bounds what a wake-up the client skipped
// costs (it may read the waiting word before the sidecar's store reaches
// it).
const (
	waitFirst = time.Millisecond
	waitMost  = 32 * time.Millisecond
)

// wait sleeps until the client bumps the sequence word from seq (it
// wakes the futex after a release or read while the sidecar waits), or
// d passes.
func (s *Stream) wait(seq uint32, d time.Duration) {
	s.waits++
	addr := (*uint32)(unsafe.Pointer(&s.ctl[8*(len(s.slots)+wordSeq)]))
	waiting := (*uint64)(unsafe.Pointer(&s.ctl[8*(len(s.slots)+wordWaiting)]))
	atomic.StoreUint64(waiting, 1)
	defer atomic.StoreUint64(waiting, 0)
	if s.seq() != seq {
		return
	}
	ts := unix.NsecToTimespec(int64(d))
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWait, uintptr(seq), uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// seq returns the low 32 bits of the sequence word.
func (s *Stream) seq() uint32 {
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&s.ctl[8*(len(s.slots)+wordSeq)])))
}

// futexWait is FUTEX_WAIT on a shared mapping (not FUTEX_PRIVATE_FLAG):
// the client wakes it from its own mapping of the segment.
const futexWait = 0

func (s *Stream) free(i int) bool {
	seg := s.slots[i]
	return seg == nil || s.word(i) == seg.gen
}

// starved reports whether the client has read every descriptor sent: it
// holds every slot and waits for the next batch.
func (s *Stream) starved() bool { return s.word(len(s.slots)+wordRead) >= s.sent }

// errNoMemory is why a batch goes through the socket.
var errNoMemory = errors.New("no hand-off memory")

// Take returns a slot for a batch of size bytes, or nil when the batch
// should go through the socket: the pool is full, or the client holds
// every slot and has read every descriptor. While the client still has
// descriptors to read, it waits for one of its slots to be released.
func (s *Stream) Take(ctx context.Context, size int) (*Slot, error) {
	for d := waitFirst; ; d = min(2*d, waitMost) {
		// Read before looking, so a release after the look wakes the wait.
		seq := s.seq()
		for i := range s.slots {
			if !s.free(i) {
				continue
			}
			slot, err := s.use(i, size)
			if errors.Is(err, errNoMemory) {
				s.pool.inline.Add(1)
				return nil, nil
			}
			return slot, err
		}
		if s.starved() {
			s.pool.inline.Add(1)
			return nil, nil
		}
		if err := context.Cause(ctx); err != nil {
			return nil, err
		}
		s.wait(seq, d)
	}
}

// use returns free slot i holding size bytes, with a new segment when it
// has none or too small a one.
func (s *Stream) use(i, size int) (*Slot, error) {
	seg := s.slots[i]
	if seg == nil || len(seg.mem) < size {
		g := int64(grain)
		if size < grain {
			g = smallGrain
		}
		n := (max(int64(size), 1) + g - 1) / g * g
		old := int64(0)
		if seg != nil {
			old = int64(len(seg.mem))
		}
		if !s.pool.reserve(n - old) {
			return nil, errNoMemory
		}
		fd, mem, err := newSegment("shardfeed-batch", int(n))
		if err != nil {
			// The batch goes in the stream; the status says why.
			s.pool.used.Add(old - n)
			msg := err.Error()
			s.pool.lastErr.Store(&msg)
			return nil, fmt.Errorf("%w: %w", errNoMemory, err)
		}
		gen := uint64(0)
		if seg != nil {
			gen = seg.gen
			unmap(seg) // reserved above as the difference
		} else {
			s.pool.segments.Add(1)
		}
		seg = &segment{fd: fd, mem: mem, gen: gen}
		s.slots[i] = seg
	}
	seg.gen++
	return &Slot{Index: i, Gen: seg.gen, Mem: seg.mem, FD: seg.fd}, nil
}

// Sent records that slot's descriptor went to the client (and its segment's
// descriptor with it, which is closed here).
func (s *Stream) Sent(slot *Slot) {
	if seg := s.slots[slot.Index]; seg.fd >= 0 && seg.fd == slot.FD {
		_ = unix.Close(seg.fd)
		seg.fd = -1
	}
	s.sent++
	s.pool.batches.Add(1)
}

// Close unmaps the stream's segments and returns them to the pool; the
// client's mappings stay valid until it drops them.
func (s *Stream) Close() {
	for i, seg := range s.slots {
		if seg != nil {
			unmap(seg)
			s.pool.used.Add(-int64(len(seg.mem)))
			s.pool.segments.Add(-1)
			s.slots[i] = nil
		}
	}
	if s.ctl != nil {
		_ = unix.Munmap(s.ctl)
		s.ctl = nil
	}
	if s.ctlFD >= 0 {
		_ = unix.Close(s.ctlFD)
		s.ctlFD = -1
	}
}

func unmap(seg *segment) {
	_ = unix.Munmap(seg.mem)
	if seg.fd >= 0 {
		_ = unix.Close(seg.fd)
	}
}

// newSegment makes a sealed memfd of size bytes and maps it.
func newSegment(name string, size int) (int, []byte, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, nil, fmt.Errorf("creating a hand-off segment: %w", err)
	}
	fail := func(what string, err error) (int, []byte, error) {
		_ = unix.Close(fd)
		return -1, nil, fmt.Errorf("%s a hand-off segment of %d bytes: %w", what, size, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail("sizing", err)
	}
	// The client gets a writable descriptor (its tensors are writable);
	// sealing the size means it cannot truncate what the sidecar maps.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fail("sealing", err)
	}
	// Populated at once: the pages are charged to the pool's budget anyway,
	// and one call allocates them for a fraction of the cost of a fault
	// per page in the first batch's copy (4 µs a page on a VM).
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fail("mapping", err)
	}
	return fd, mem, nil
}

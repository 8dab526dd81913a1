// Package handoffwire is the wire of the shared-memory hand-off between the
// sidecar and a client (the sidecar's package handoff writes it, the
// clients read it): the kinds of chunk on the socket, and the control
// segment's words the client writes.
package handoffwire

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kinds of chunk of a stream handed off through memory: each chunk
// starts with its kind.
const (
	// FrameArrow: Arrow IPC messages, in the chunk.
	FrameArrow = 'A'
	// FrameControl: {"slots":N}, with the control segment's descriptor.
	FrameControl = 'C'
	// FrameSegment: {"slot":i,"size":n}, with slot i's new segment's
	// descriptor.
	FrameSegment = 'S'
	// FrameBatch: {"slot":i,"gen":g,"size":n}: Arrow IPC messages in the
	// first n bytes of slot i; the client releases the slot by writing g
	// into control word i.
	FrameBatch = 'B'
)

// ControlBytes is the size of the control segment of a stream of slots
// slots: a released generation per slot, then the words below.
func ControlBytes(slots int) int { return 8 * (slots + WordsAfter) }

// MaxSlots keeps the control segment to one page.
const MaxSlots = 256

// The control segment's words (uint64, little-endian) after the slots'
// released generations.
const (
	// WordRead: the descriptors the client has read.
	WordRead = iota
	// WordSeq: bumped by the client after each release or read; its low 32
	// bits are the futex the sidecar waits on when no slot is free.
	WordSeq
	// WordWaiting: set by the sidecar while it waits, so the client makes
	// the wake-up call only then.
	WordWaiting
	// WordsAfter is the number of words after the slots'.
	WordsAfter
)

// Control is the client's side of a stream's control segment, mapped from
// the descriptor of the FrameControl chunk.
type Control struct {
	mem   []byte
	slots int
}

// NewControl returns the client's side of the control segment mem (at
// least ControlBytes(slots) bytes).
func NewControl(mem []byte, slots int) *Control { return &Control{mem: mem, slots: slots} }

// Release tells the sidecar that the batch of generation gen in slot is
// no longer read: it may write the slot again.
func (c *Control) Release(slot int, gen uint64) {
	c.store(slot, gen)
}

// Read records that the client has read n batch descriptors.
func (c *Control) Read(n uint64) {
	c.store(c.slots+WordRead, n)
}

// store writes word i, bumps the sequence word and wakes the sidecar if it
// waits on it.
func (c *Control) store(i int, v uint64) {
	atomic.StoreUint64(c.word(i), v)
	seq := c.word(c.slots + WordSeq)
	atomic.AddUint64(seq, 1)
	if atomic.LoadUint64(c.word(c.slots+WordWaiting)) != 0 {
		_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(seq)), futexWake, 1, 0, 0, 0)
	}
}

func (c *Control) word(i int) *uint64 { return (*uint64)(unsafe.Pointer(&c.mem[8*i])) }

// futexWake is FUTEX_WAKE on a shared mapping.
const futexWake = 1

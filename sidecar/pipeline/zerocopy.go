package pipeline

import (
	"net"
	"slices"
	"sync"
	"syscall"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Zero-copy batches. Copying every row into a batch and then into the
// socket costs as much as the socket itself; so for the columns that hold
// most bytes (fixed-width values, binary and string values) a batch made
// for the socket gets placeholder buffers of the right length, and the
// batch lists, for each, the rows' bytes in the decoded shards. The
// socket writer sends those with writev (Batch.Segments) while the
// batch holds the shards. Placeholders are views of one read-only mapping
// of zero pages: they cost no memory, and a stray write faults at once
// instead of corrupting data.

// placeholderBytes bounds one zero-copy buffer; a larger one is copied.
const placeholderBytes = 1 << 30

var (
	placeholderOnce sync.Once
	placeholderMem  []byte
)

func placeholders() []byte {
	placeholderOnce.Do(func() {
		m, err := syscall.Mmap(-1, 0, placeholderBytes+1<<16, syscall.PROT_READ, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
		if err == nil {
			placeholderMem = m
		}
	})
	return placeholderMem
}

// zeroCopy collects the placeholders of one batch.
type zeroCopy struct {
	segments map[*byte][][]byte
	lists    []*[][]byte
}

// segmentLists reuses the lists of segments of released batches (a list
// per column of a batch, as long as the batch has rows).
var segmentLists = sync.Pool{New: func() any { return new([][]byte) }}

// list returns an empty list of segments with room for n, for one of the
// batch's placeholders: the batch gives it back when released.
func (z *zeroCopy) list(n int) [][]byte {
	l := segmentLists.Get().(*[][]byte)
	*l = slices.Grow((*l)[:0], n)
	z.lists = append(z.lists, l)
	return *l
}

// release gives the batch's lists back: its placeholders are not written
// after it.
func (z *zeroCopy) release() {
	for _, l := range z.lists {
		clear((*l)[:cap(*l)])
		segmentLists.Put(l)
	}
	z.lists, z.segments = nil, nil
}

// placeholder returns a buffer of size bytes whose content is segs, or
// nil when it cannot be zero-copied.
func (z *zeroCopy) placeholder(size int, segs [][]byte) *memory.Buffer {
	mem := placeholders()
	if z == nil || mem == nil || size == 0 || 8*len(z.segments)+size > len(mem) {
		return nil
	}
	if z.segments == nil {
		z.segments = map[*byte][][]byte{}
	}
	// Every buffer of a batch starts at its own address of the mapping,
	// 8-byte aligned, so the writer can tell them apart.
	b := mem[8*len(z.segments) : 8*len(z.segments)+size]
	z.segments[unsafe.SliceData(b)] = segs
	return memory.NewBufferBytes(b)
}

// appendSegment appends seg to segs, merging it with the last segment when
// it continues it in memory (consecutive rows of one shard).
func appendSegment(segs [][]byte, seg []byte) [][]byte {
	if n := len(segs); n > 0 {
		last := segs[n-1]
		if unsafe.Add(unsafe.Pointer(unsafe.SliceData(last)), len(last)) == unsafe.Pointer(unsafe.SliceData(seg)) && cap(last) >= len(last)+len(seg) {
			segs[n-1] = last[:len(last)+len(seg)]
			return segs
		}
	}
	return append(segs, seg)
}

// Segments returns the bytes a placeholder buffer of the batch stands
// for, and false for any other buffer.
func (b *Batch) Segments(buf []byte) ([][]byte, bool) {
	if b.zc == nil || len(buf) == 0 {
		return nil, false
	}
	segs, ok := b.zc.segments[unsafe.SliceData(buf)]
	return segs, ok
}

// MessageWriter collects what an Arrow IPC writer writes for one message
// (a batch) as a list of buffers to send with one writev: the small writes
// (headers, padding, whose memory the IPC writer reuses) copied, the
// batch's buffers referenced, and a zero-copy batch's placeholders
// replaced by their segments. Set Batch before writing a zero-copy batch.
type MessageWriter struct {
	Batch   *Batch
	scratch []byte
	parts   []part
	n       int
}

// part is one piece of a message: scratch[lo:hi], or buf.
type part struct {
	lo, hi int
	buf    []byte
}

// copyBelow is the size under which a write is copied, not referenced.
const copyBelow = 64 << 10

func (m *MessageWriter) Write(p []byte) (int, error) {
	if m.Batch != nil {
		if segs, ok := m.Batch.Segments(p); ok {
			for _, s := range segs {
				m.parts = append(m.parts, part{buf: s})
			}
			m.n += len(p)
			return len(p), nil
		}
	}
	if len(p) < copyBelow {
		lo := len(m.scratch)
		m.scratch = append(m.scratch, p...)
		m.parts = append(m.parts, part{lo: lo, hi: len(m.scratch)})
	} else {
		m.parts = append(m.parts, part{buf: p}) // a batch buffer: valid until the batch is released
	}
	m.n += len(p)
	return len(p), nil
}

// Len returns the bytes collected.
func (m *MessageWriter) Len() int { return m.n }

// Take appends the collected buffers to bufs and starts a new message.
// The buffers are valid until the next Write and the batch's Release.
func (m *MessageWriter) Take(bufs net.Buffers) net.Buffers {
	for _, p := range m.parts {
		if p.buf != nil {
			bufs = append(bufs, p.buf)
		} else {
			bufs = append(bufs, m.scratch[p.lo:p.hi])
		}
	}
	m.scratch, m.parts, m.n = m.scratch[:0], m.parts[:0], 0
	return bufs
}

// CopyTo copies the collected message into dst, which must hold Len
// bytes, and starts a new message, warming the parts it copies next.
// (Copying on two goroutines measured no faster on two cores: the trainer
// reading the last batch takes the other.)
func (m *MessageWriter) CopyTo(dst []byte) int {
	n := 0
	for k, p := range m.parts {
		if k+warmAhead < len(m.parts) {
			warm(m.parts[k+warmAhead].buf)
		}
		if p.buf != nil {
			n += copy(dst[n:], p.buf)
		} else {
			n += copy(dst[n:], m.scratch[p.lo:p.hi])
		}
	}
	m.scratch, m.parts, m.n = m.scratch[:0], m.parts[:0], 0
	return n
}

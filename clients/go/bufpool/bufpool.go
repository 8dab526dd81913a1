// Package bufpool is an Arrow allocator that reuses large buffers: a batch
// assembled or received and then released gives its memory to the next one,
// instead of the Go allocator zeroing (and the kernel faulting in) megabytes
// per batch.
package bufpool

import (
	"math/bits"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Pool is the allocator. Large buffers it returns are not zeroed: use it
// only where every byte is written before it is read (a gathered column, an
// IPC message body read from a socket). Small ones come zeroed from the Go
// allocator.
type Pool struct {
	classes [64]sync.Pool
}

// MinPooled is the smallest buffer the pool keeps: a user that wants small
// buffers reused reserves at least this much.
const MinPooled = 64 << 10

// Shared is the process's pool.
var Shared = &Pool{}

func class(size int) int { return bits.Len(uint(size - 1)) }

// Allocate implements memory.Allocator.
func (p *Pool) Allocate(size int) []byte {
	if size < MinPooled {
		return memory.DefaultAllocator.Allocate(size)
	}
	c := class(size)
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		return (*b)[:size]
	}
	return make([]byte, size, 1<<c)
}

// Reallocate implements memory.Allocator.
func (p *Pool) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	nb := p.Allocate(size)
	copy(nb, b)
	p.Free(b)
	return nb
}

// Free implements memory.Allocator.
func (p *Pool) Free(b []byte) {
	c := cap(b)
	if c < MinPooled || c&(c-1) != 0 {
		return
	}
	b = b[:c]
	p.classes[class(c)].Put(&b)
}

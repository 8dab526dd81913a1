package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardfeed/shardfeed/internal/index/indexparts"
	"github.com/shardfeed/shardfeed/internal/index/indexparts/jobrecords"
	"github.com/shardfeed/shardfeed/internal/store"
)

// partProgressEvery is how often a part running writes its progress.
const partProgressEvery = 10 * time.Second

// partProgress writes how far a part's indexing is beside its files
// (jobrecords.ProgressKey), where the operator reads it for the dataset's
// status: now and then from a goroutine of its own, so that the indexing
// never waits for the store, and once at the end.
type partProgress struct {
	ist  store.Store
	run  string
	part int
	head int
	// sums[i] is the bytes of the part's first i objects.
	sums []int64
	// done is the objects indexed of head and part together, as
	// format.IndexOptions.Progress counts them.
	done atomic.Int64
	then func(done, total int, object string)
	mu   sync.Mutex // one write at a time
}

func newPartProgress(ist store.Store, m *indexparts.Manifest, k int, head, objs []store.Object, then func(int, int, string)) *partProgress {
	p := &partProgress{ist: ist, run: m.Run, part: k, head: len(head), sums: make([]int64, len(objs)+1), then: then}
	for i, o := range objs {
		p.sums[i+1] = p.sums[i] + o.Size
	}
	return p
}

// observe is the indexing's progress callback.
func (p *partProgress) observe(done, total int, object string) {
	p.done.Store(int64(done))
	if p.then != nil {
		p.then(done, total, object)
	}
}

// start writes the progress every interval until stop is called.
func (p *partProgress) start(ctx context.Context, every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				// A progress not written is no failure of the index: the
				// next tick writes it again.
				_ = p.write(ctx)
			}
		}
	}()
	return func() { cancel(); <-finished }
}

// finish writes the progress of a part done.
func (p *partProgress) finish(ctx context.Context) error {
	p.done.Store(int64(p.head + len(p.sums) - 1))
	return p.write(ctx)
}

// write writes the progress as it is now.
func (p *partProgress) write(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.sums) - 1
	done := min(max(int(p.done.Load())-p.head, 0), n)
	return putJSON(ctx, p.ist, jobrecords.ProgressKey(p.run, p.part), jobrecords.Progress{Run: p.run, Part: p.part,
		Objects: int64(n), Bytes: p.sums[n], ObjectsDone: int64(done), BytesDone: p.sums[done]})
}

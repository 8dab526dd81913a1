package handoff

import (
	"context"
	"errors"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// newClient maps the stream's control segment from its descriptor, as a
// client does, and returns the client's side of it.
func newClient(t *testing.T, s *Stream) *Control {
	t.Helper()
	fd := s.TakeControlFD()
	mem, err := unix.Mmap(fd, 0, ControlBytes(s.Slots()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	_ = unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Munmap(mem) })
	return NewControl(mem, s.Slots())
}

func take(t *testing.T, s *Stream, size int) *Slot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	slot, err := s.Take(ctx, size)
	if err != nil {
		t.Fatal(err)
	}
	if slot != nil {
		s.Sent(slot)
	}
	return slot
}

func TestSlotsAreReusedOnlyOnceReleased(t *testing.T) {
	pool := NewPool(64 << 20)
	s, err := NewStream(pool, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := newClient(t, s)
	a, b := take(t, s, 1000), take(t, s, 1000)
	if a.Index == b.Index || a.FD < 0 || b.FD < 0 || len(a.Mem) != smallGrain {
		t.Fatalf("two fresh slots of one grain with their descriptors, got %+v %+v", a, b)
	}
	copy(a.Mem, "batch a")
	// Both held, one descriptor unread: the next batch waits for a release.
	c.Read(1)
	got := make(chan *Slot)
	go func() { got <- take(t, s, 1000) }()
	select {
	case slot := <-got:
		t.Fatalf("took slot %d while the client holds both", slot.Index)
	case <-time.After(50 * time.Millisecond):
	}
	c.Release(b.Index, b.Gen)
	slot := <-got
	if slot.Index != b.Index || slot.Gen != b.Gen+1 || slot.FD != -1 {
		t.Fatalf("the released slot again, next generation, no new descriptor: got %+v after %+v", slot, b)
	}
	if string(a.Mem[:7]) != "batch a" {
		t.Fatal("a held slot was written")
	}
	// Everything read and every slot held: the batch goes in the stream.
	c.Read(3)
	if slot := take(t, s, 1000); slot != nil {
		t.Fatalf("took slot %d of a client that holds every one", slot.Index)
	}
	if st := pool.Stats(); st.InlineBatches != 1 || st.Segments != 2 || st.Bytes != 2*smallGrain || st.Batches != 3 {
		t.Fatalf("pool stats %+v", st)
	}
}

func TestTheBudgetBoundsEveryStream(t *testing.T) {
	pool := NewPool(3 * grain)
	s1, _ := NewStream(pool, 4)
	s2, _ := NewStream(pool, 4)
	defer s2.Close()
	newClient(t, s1)
	newClient(t, s2)
	for range 2 {
		if take(t, s1, grain) == nil {
			t.Fatal("no slot within the budget")
		}
	}
	// A batch larger than the rest of the budget goes in the stream.
	if slot := take(t, s2, 2*grain); slot != nil {
		t.Fatalf("a second stream took %d bytes beyond the budget", len(slot.Mem))
	}
	if take(t, s2, grain) == nil {
		t.Fatal("the last grain of the budget was not given")
	}
	s1.Close()
	if st := pool.Stats(); st.Bytes != grain || st.Segments != 1 {
		t.Fatalf("a closed stream's segments were not returned: %+v", st)
	}
	if slot := take(t, s2, 2*grain); slot == nil || len(slot.Mem) != 2*grain {
		t.Fatalf("the budget a closed stream returned is not used again: %+v", slot)
	}
}

func TestAGrownSegmentReplacesTheSmallerOne(t *testing.T) {
	pool := NewPool(8 << 20)
	s, _ := NewStream(pool, 1)
	defer s.Close()
	c := newClient(t, s)
	small := take(t, s, 10)
	c.Release(small.Index, small.Gen)
	big := take(t, s, grain+1)
	if big.Index != small.Index || len(big.Mem) != 2*grain || big.FD < 0 || big.Gen != small.Gen+1 {
		t.Fatalf("the slot's new segment: got %+v", big)
	}
	if st := pool.Stats(); st.Bytes != 2*grain || st.Segments != 1 {
		t.Fatalf("pool stats %+v", st)
	}
}

func TestSegmentsAreSealedAgainstResizing(t *testing.T) {
	s, _ := NewStream(NewPool(8<<20), 1)
	defer s.Close()
	newClient(t, s)
	slot, err := s.Take(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	// What a client could do with the descriptor it receives.
	for _, size := range []int64{0, 4 * grain} {
		if err := unix.Ftruncate(slot.FD, size); !errors.Is(err, unix.EPERM) {
			t.Fatalf("ftruncate to %d: %v, want EPERM", size, err)
		}
	}
	s.Sent(slot)
}

func TestATakeEndsWithItsContext(t *testing.T) {
	s, _ := NewStream(NewPool(8<<20), 1)
	defer s.Close()
	newClient(t, s)
	take(t, s, 10) // held, and its descriptor unread
	ctx, cancel := context.WithCancelCause(context.Background())
	gone := errors.New("client gone")
	time.AfterFunc(20*time.Millisecond, func() { cancel(gone) })
	if _, err := s.Take(ctx, 10); !errors.Is(err, gone) {
		t.Fatalf("Take: %v, want the context's cause", err)
	}
}

func TestAWaitForAHeldSlotSleepsLongerEachTime(t *testing.T) {
	// Seen (issue 94): a loop holding its batch while it decoded (0.2 s)
	// woke the sidecar every millisecond, its CPU 0.17 ms an image.
	s, _ := NewStream(NewPool(8<<20), 1)
	defer s.Close()
	c := newClient(t, s)
	held := take(t, s, 10) // its descriptor unread: the next batch waits for it
	const hold = 300 * time.Millisecond
	time.AfterFunc(hold, func() { c.Release(held.Index, held.Gen) })
	if slot := take(t, s, 10); slot == nil || slot.Index != held.Index {
		t.Fatalf("took %+v, want slot %d once released", slot, held.Index)
	}
	// 1+2+…+32 ms, then 32 ms a wait: 14 waits over 0.3 s (300 at 1 ms).
	if s.waits < 2 || s.waits > 20 {
		t.Fatalf("%d waits over %v of a held slot, want 2 to 20", s.waits, hold)
	}
}

func TestSlotsOutOfRangeAreRefused(t *testing.T) {
	for _, n := range []int{0, -1, MaxSlots + 1} {
		if _, err := NewStream(NewPool(1), n); err == nil {
			t.Errorf("%d slots accepted", n)
		}
	}
}

// A segment's pages are in memory before the batch is copied into it, so
// the copy does not fault on every page of a fresh segment.
func TestSegmentsArePopulatedBeforeTheCopy(t *testing.T) {
	for _, size := range []int{1000, 3 * grain / 2} {
		s, err := NewStream(NewPool(8<<20), 1)
		if err != nil {
			t.Fatal(err)
		}
		slot := take(t, s, size)
		resident := make([]byte, (len(slot.Mem)+pageSize-1)/pageSize)
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&slot.Mem[0])), uintptr(len(slot.Mem)), uintptr(unsafe.Pointer(&resident[0]))); errno != 0 {
			t.Fatal(errno)
		}
		for i, r := range resident {
			if r&1 == 0 {
				t.Fatalf("a segment of %d bytes: page %d of %d is not in memory before the copy", len(slot.Mem), i, len(resident))
			}
		}
		s.Close()
	}
}

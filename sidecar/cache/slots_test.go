package cache

import (
	"context"
	"testing"
	"time"
)

// TestSlotsCountSmallDownloadsInBytes: the fixed slots take downloads of
// any size; past them, small ones while their bytes in flight stay under
// SmallInFlightBytes, up to MaxDownloads.
func TestSlotsCountSmallDownloadsInBytes(t *testing.T) {
	tests := []struct {
		name string
		size int64
		want int
	}{
		{"64 KiB: up to MaxDownloads", 64 << 10, MaxDownloads},
		{"1 MiB: up to the bytes' bound", 1 << 20, SmallInFlightBytes >> 20},
		{"16 MiB: the fixed slots", 16 << 20, 4},
		{"unknown size: the fixed slots", -1, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSlots(4)
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			var releases []func()
			for {
				r, err := s.acquire(ctx, tt.size)
				if err != nil {
					break // the slot it waited for never came
				}
				releases = append(releases, r)
			}
			if len(releases) != tt.want {
				t.Fatalf("%d slots taken, want %d", len(releases), tt.want)
			}
			for _, r := range releases {
				r()
			}
			if s.n != 0 || s.bytes != 0 {
				t.Fatalf("all released, %d downloads of %d bytes counted", s.n, s.bytes)
			}
		})
	}
}

// TestSlotsLargeWaiterIsNotStarved: while a download waits (a large one,
// or one of 31 MiB that fits no slot past the fixed ones), newcomers
// queue behind it, and a slot given back goes to it: neither small
// downloads nor one that gives its slot back and asks again at once
// overtake it.
func TestSlotsLargeWaiterIsNotStarved(t *testing.T) {
	for _, size := range []int64{1 << 30, 31 << 20} {
		s := newSlots(1)
		ctx := context.Background()
		// 20 small downloads in flight: 1.25 MiB, room for neither.
		var smalls []func()
		for range 20 {
			r, err := s.acquire(ctx, 64<<10)
			if err != nil {
				t.Fatal(err)
			}
			smalls = append(smalls, r)
		}
		small := func() {
			for _, r := range smalls {
				r()
			}
		}
		got := make(chan func(), 1)
		go func() {
			if r, err := s.acquire(ctx, size); err == nil {
				got <- r
			}
		}()
		waitQueue(t, s, 1)
		short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		if _, err := s.acquire(short, 64<<10); err == nil {
			t.Fatalf("%d bytes waiting: a small download took a slot past it", size)
		}
		cancel()
		small() // given back, and asked for again at once: behind the waiter
		again := make(chan func(), 1)
		go func() {
			if r, err := s.acquire(ctx, 64<<10); err == nil {
				again <- r
			}
		}()
		select {
		case r := <-got:
			r()
		case <-time.After(5 * time.Second):
			t.Fatalf("%d bytes waiting: never got a slot given back (the downloads asking again took them)", size)
		}
		(<-again)()
		if s.n != 0 || s.bytes != 0 || len(s.queue) != 0 {
			t.Fatalf("all released, %d downloads of %d bytes and %d waiters counted", s.n, s.bytes, len(s.queue))
		}
	}
}

// TestSlotsAWaiterThatGivesUpLetsTheNextIn: a waiter whose context ends
// leaves the queue, and the one behind it, which fits, starts at once.
func TestSlotsAWaiterThatGivesUpLetsTheNextIn(t *testing.T) {
	s := newSlots(1)
	ctx := context.Background()
	small, err := s.acquire(ctx, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer small()
	large, cancel := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() {
		_, err := s.acquire(large, 1<<30)
		gaveUp <- err
	}()
	waitQueue(t, s, 1)
	got := make(chan func(), 1)
	go func() {
		if r, err := s.acquire(ctx, 64<<10); err == nil {
			got <- r
		}
	}()
	waitQueue(t, s, 2)
	cancel()
	if err := <-gaveUp; err == nil {
		t.Fatal("a cancelled waiter got a slot")
	}
	select {
	case r := <-got:
		r()
	case <-time.After(5 * time.Second):
		t.Fatal("the small download behind a waiter that gave up never started")
	}
}

func waitQueue(t *testing.T, s *slots, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		q := len(s.queue)
		s.mu.Unlock()
		if q == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters queued, want %d", q, n)
		}
		time.Sleep(time.Millisecond)
	}
}

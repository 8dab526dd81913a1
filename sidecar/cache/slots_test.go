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

// TestSlotsLargeWaiterIsNotStarved: while a large download waits for a
// fixed slot, small ones take no slot past the fixed ones.
func TestSlotsLargeWaiterIsNotStarved(t *testing.T) {
	s := newSlots(1)
	ctx := context.Background()
	small, err := s.acquire(ctx, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan func(), 1)
	go func() {
		r, err := s.acquire(ctx, 1<<30)
		if err == nil {
			got <- r
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		waiting := s.large
		s.mu.Unlock()
		if waiting == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the large download never waited")
		}
		time.Sleep(time.Millisecond)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := s.acquire(short, 64<<10); err == nil {
		t.Fatal("a small download took a slot past the fixed one while a large one waited")
	}
	small()
	select {
	case r := <-got:
		r()
	case <-time.After(5 * time.Second):
		t.Fatal("the large download never got the slot given back")
	}
}

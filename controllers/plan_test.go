package controllers

import (
	"slices"
	"testing"
)

func TestMinCachePodsCoverLargeJobs(t *testing.T) {
	tests := []struct {
		name   string
		splits int
		want   []int
	}{
		{name: "a 1024-pod job of 8 ranks", splits: 8192, want: []int{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192}},
		{name: "a 1536-pod job of 8 ranks", splits: 12288, want: []int{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256,
			384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 12288}},
		{name: "a prime", splits: 7, want: []int{1, 7}},
		{name: "a square", splits: 36, want: []int{1, 2, 3, 4, 6, 9, 12, 18, 36}},
		{name: "one split", splits: 1, want: []int{1}},
		// 720720 has 240 divisors, 104 of them up to 256: only those.
		{name: "hundreds of divisors", splits: 720720},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := minCachePods(tt.splits)
			if tt.want != nil && !slices.Equal(got, tt.want) {
				t.Fatalf("pod counts %v, want %v", got, tt.want)
			}
			for i, p := range got {
				if tt.splits%p != 0 || (i > 0 && p <= got[i-1]) {
					t.Fatalf("pod counts %v: not increasing divisors of %d", got, tt.splits)
				}
			}
			if tt.want == nil && (got[len(got)-1] > smallJobPods || len(got) == 0) {
				t.Fatalf("pod counts %v: beyond the budget", got)
			}
		})
	}
}

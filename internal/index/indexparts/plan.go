// Package indexparts is the record of a stream indexed in parts
// (shardfeed index --list-parts, --part, --merge-parts): the planning of
// the parts, the run's manifest and the parts' object lists, each read
// back from the store bounded in bytes and checked, since the pods that
// write them may not be trusted by the one that merges.
package indexparts

import (
	"sort"

	"github.com/shardfeed/shardfeed/internal/store"
)

// Span is one part's objects: a contiguous run of the sorted list.
type Span struct {
	// First is the index of the part's first object in the list; Objects
	// how many it holds, Bytes their sizes' sum.
	First   int   `json:"first"`
	Objects int   `json:"objects"`
	Bytes   int64 `json:"bytes"`
}

// Plan cuts objects (in key order) into n contiguous parts balanced by
// bytes and by count: each object weighs its size plus the mean size, so
// that a part of many small objects (a request each) and a part of a few
// large ones cost alike. Every part holds an object while there are as
// many as parts; with fewer objects, the last parts are empty. The same
// objects and n always give the same parts.
func Plan(objects []store.Object, n int) []Span {
	if n < 1 {
		return nil
	}
	var total int64
	for _, o := range objects {
		total += max(o.Size, 0)
	}
	mean := int64(1)
	if len(objects) > 0 {
		mean = max(total/int64(len(objects)), 1)
	}
	// cum[i] is the weight of objects[:i].
	cum := make([]int64, len(objects)+1)
	for i, o := range objects {
		cum[i+1] = cum[i] + max(o.Size, 0) + mean
	}
	w := cum[len(objects)]
	cuts := make([]int, n+1)
	cuts[n] = len(objects)
	for k := 1; k < n; k++ {
		// target = k·w/n without overflow: k·(w/n) + k·(w mod n)/n.
		target := int64(k)*(w/int64(n)) + int64(k)*(w%int64(n))/int64(n)
		c := sort.Search(len(cum), func(i int) bool { return cum[i] >= target })
		// Nearer cut of the two around the target.
		if c > 0 && target-cum[c-1] < cum[min(c, len(objects))]-target {
			c--
		}
		lo, hi := cuts[k-1]+1, len(objects)-(n-k)
		if len(objects) < n {
			lo, hi = min(k, len(objects)), min(k, len(objects))
		}
		cuts[k] = min(max(c, lo), hi)
	}
	spans := make([]Span, n)
	for k := range n {
		s := Span{First: cuts[k], Objects: cuts[k+1] - cuts[k]}
		for _, o := range objects[cuts[k]:cuts[k+1]] {
			s.Bytes += max(o.Size, 0)
		}
		spans[k] = s
	}
	return spans
}

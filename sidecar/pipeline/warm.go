package pipeline

// Warming the rows a gather copies next. A shuffled batch's rows are
// scattered over the mapped shards, and the CPU's prefetchers stop at
// every page: each row's copy would start by waiting for its pages'
// translations and first lines, one row at a time. Asking for the first
// line of each page of the row warmAhead rows on overlaps those waits
// with the copy (about a tenth faster for 8 KiB rows; see docs/sidecar.md).

// warmAhead is how many parts ahead CopyTo warms: far enough that the
// lines arrive before the copy reaches them, near enough that they are
// still cached when it does.
const warmAhead = 2

// warmBytes is how much of a part is warmed: its first two pages. Within
// a long part the CPU's own prefetchers keep ahead.
const warmBytes = 8 << 10

// warm asks the CPU to start loading the start of b's first pages.
func warm(b []byte) {
	if len(b) > 0 {
		warmPages(&b[0], uintptr(min(len(b), warmBytes)))
	}
}

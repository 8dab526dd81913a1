package pipeline

// warmPages asks the CPU to load the first line of each 4 KiB of the n
// bytes at p (n > 0), without waiting for them (warm_amd64.s).
//
//go:noescape
func warmPages(p *byte, n uintptr)

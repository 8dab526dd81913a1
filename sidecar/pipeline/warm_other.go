//go:build !amd64

package pipeline

func warmPages(*byte, uintptr) {}

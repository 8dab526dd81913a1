// Package memlimit gives the Go runtime a soft memory limit from the
// container's cgroup limit, so that the collector works harder before the
// kernel's OOM killer ends the process (a sidecar's heap may otherwise grow
// to twice what is live under GOGC=100).
package memlimit

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// CgroupFile is the cgroup v2 memory limit of this process's container.
const CgroupFile = "/sys/fs/cgroup/memory.max"

// Fraction of the cgroup limit given to the runtime: the rest covers
// memory the runtime does not count (stacks outside the heap, the kernel's
// page cache charged to the container, mappings).
const Fraction = 0.9

// Parse reads a cgroup memory.max value: bytes, or "max" for no limit
// (ok false).
func Parse(text string) (limit int64, ok bool, err error) {
	text = strings.TrimSpace(text)
	if text == "max" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil || n <= 0 {
		return 0, false, fmt.Errorf("cgroup memory limit %q is neither \"max\" nor a positive number of bytes", text)
	}
	return n, true, nil
}

// Apply sets the runtime's soft memory limit to Fraction of the limit in
// path, unless GOMEMLIMIT is set (the user's choice wins) or there is no
// limit. It returns the limit it set, 0 if none.
func Apply(path string) (int64, error) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil // not in a cgroup v2 container
	}
	if err != nil {
		return 0, err
	}
	limit, ok, err := Parse(string(data))
	if err != nil || !ok {
		return 0, err
	}
	soft := int64(float64(limit) * Fraction)
	debug.SetMemoryLimit(soft)
	return soft, nil
}

package pipeline

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// GuardFaults runs f, which reads mapped cached shards, turning a fault on
// their memory (a file truncated under its mapping: SIGBUS) or a runtime
// error from bytes that changed after they were checked into an error: a
// batch fails, not the sidecar. The cache is the sidecar's alone (the
// webhook refuses a pod whose other containers mount it), so this guards
// against what should not happen, not against a normal path.
func GuardFaults(f func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if r := recover(); r != nil {
			re, ok := r.(runtime.Error)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("a cached shard changed while it was read (%w): nothing but the sidecar may write its cache", re)
		}
	}()
	return f()
}

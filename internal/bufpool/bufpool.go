// Package bufpool is the process's Arrow allocator that reuses large
// buffers: the Go client's (clients/go/bufpool), so a batch the sidecar's
// code and the client's code release feeds one pool.
package bufpool

import "github.com/shardfeed/shardfeed/clients/go/bufpool"

// Pool is the allocator.
type Pool = bufpool.Pool

// MinPooled is the smallest buffer the pool keeps.
const MinPooled = bufpool.MinPooled

// Shared is the process's pool.
var Shared = bufpool.Shared

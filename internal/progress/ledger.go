package progress

import (
	"context"

	"github.com/shardfeed/shardfeed/internal/configmaps"
)

// Ledger is where a sidecar records its job's progress: directly in a
// Store (Local: `shardfeed serve`'s state file), or through the operator
// (Remote: a pod, whose ServiceAccount has no access to the state).
type Ledger interface {
	// Register records j's registration and returns the state; a Job
	// without a generation is given one (State.GenerationOf).
	Register(ctx context.Context, j Job) (*configmaps.State, error)
	// Commit records c for j.
	Commit(ctx context.Context, j Job, c Commit) (*configmaps.State, error)
	// Skip records a shard delivered as pad rows.
	Skip(ctx context.Context, sk configmaps.SkippedShard) error
	// Load returns the job's state.
	Load(ctx context.Context) (*configmaps.State, error)
	// Reads adds what the sidecar read since its last report.
	Reads(ctx context.Context, r configmaps.Reads) error
}

// Local applies the rules to a Store in this process.
type Local struct{ Store Store }

// Register implements Ledger.
func (l Local) Register(ctx context.Context, j Job) (*configmaps.State, error) {
	return Register(ctx, l.Store, j)
}

// Commit implements Ledger.
func (l Local) Commit(ctx context.Context, j Job, c Commit) (*configmaps.State, error) {
	return Apply(ctx, l.Store, j, c)
}

// Skip implements Ledger.
func (l Local) Skip(ctx context.Context, sk configmaps.SkippedShard) error {
	_, err := RecordSkip(ctx, l.Store, sk)
	return err
}

// Load implements Ledger.
func (l Local) Load(ctx context.Context) (*configmaps.State, error) { return l.Store.Load(ctx) }

// Reads implements Ledger.
func (l Local) Reads(ctx context.Context, r configmaps.Reads) error {
	_, err := RecordReads(ctx, l.Store, nil, r)
	return err
}

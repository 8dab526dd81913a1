// Package progress records what a job has trained (design §4): a commit of
// (epoch, step) from the job's newest attempt, persisted by a Store — a
// local state file for `shardfeed serve`, the job's state ConfigMap in a
// cluster. The rules live here once; the stores only persist.
package progress

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/planner"
)

// Store persists a job's state.
type Store interface {
	// Load returns the stored state (the zero state when none is stored).
	Load(ctx context.Context) (*configmaps.State, error)
	// Update applies fn to the stored state and persists the result
	// atomically: fn may run more than once (optimistic concurrency).
	Update(ctx context.Context, fn func(*configmaps.State) error) (*configmaps.State, error)
}

// ErrRefused marks a commit or registration the rules refuse (a backwards
// commit, a fenced attempt, another plan): the caller's mistake, not the
// store's.
var ErrRefused = errors.New("refused")

// Job identifies what a sidecar commits for.
type Job struct {
	Dataset     string
	Job         string
	Attempt     string
	Fingerprint planner.Fingerprint
	// Generation is the attempt's generation, given by the operator when it
	// admitted the attempt's first pod; 0: the attempt is a process of its
	// own (`shardfeed serve`), and Register gives it the next one.
	Generation int64
	// Steps is the number of steps per epoch.
	Steps int64
	// Pods and WorldSize of the attempt, where the sidecar knows them.
	Pods, WorldSize int
	// DataParallel is the job's declared data-parallel size (0: none).
	DataParallel int
	// Phases are the hashes of the plan's schedule's phases (none
	// without a schedule), and PhaseStarts their global start steps.
	Phases       []string
	PhaseStarts  []int64
	SidecarImage string
	// Admitted says the attempt and generation are a pod's contract, as
	// the operator's endpoint reads them from the pod: a pod's author can
	// write any, so only the generation Admit recorded for the attempt is
	// accepted (a forged one of MaxInt64 once fenced the running job).
	Admitted bool
}

// maxSkippedSamples bounds a skipped shard's samples (the planner's bound
// on a stream's), so that the job's sum of them cannot overflow.
const maxSkippedSamples = int64(1) << 60

// MaxGeneration bounds a job's generations: far beyond any job's attempts,
// and far from overflowing when the next is counted.
const MaxGeneration = int64(1) << 62

// checkAdmitted refuses an admitted job whose generation is not the one
// the state recorded for its attempt.
func checkAdmitted(s *configmaps.State, j Job) error {
	// Below the job's generation, an attempt is fenced whatever it is
	// (checkFence says so; the list keeps only the newest attempts).
	if !j.Admitted || j.Generation < s.Generation {
		return nil
	}
	if got := s.GenerationOf(j.Attempt); got == 0 || got != j.Generation {
		return fmt.Errorf("%w: attempt %q (generation %d) of job %q is not one the operator admitted: its pod's sidecar was not injected by the operator, or was changed after (recreate the pod)",
			ErrRefused, j.Attempt, j.Generation, j.Job)
	}
	return nil
}

// nextGeneration is the generation after the state's, refused past
// MaxGeneration rather than overflowed.
func nextGeneration(s *configmaps.State) (int64, error) {
	if s.Generation < 0 || s.Generation >= MaxGeneration {
		return 0, fmt.Errorf("%w: job %q is at generation %d, past the %d a job may reach: start a new job (a new shardfeed.io/job)",
			ErrRefused, s.Job, s.Generation, MaxGeneration)
	}
	return s.Generation + 1, nil
}

// Admit gives attempt its generation: the one recorded for it, or, for an
// attempt the state does not list, the job's generation plus one, which
// fences every earlier attempt for good. It pins the sidecar image and the
// plan version the job starts with, and returns the state. The operator
// calls it when it admits a pod, before the pod can run.
func Admit(ctx context.Context, st Store, dataset, job, attempt, image string) (*configmaps.State, error) {
	return st.Update(ctx, func(s *configmaps.State) error {
		if err := checkOwner(s, dataset, job); err != nil {
			return err
		}
		s.Dataset, s.Job = dataset, job
		if s.SidecarImage == "" {
			s.SidecarImage = image
		}
		if s.PlanVersion == 0 {
			s.PlanVersion = planner.PlanVersion
		}
		if s.GenerationOf(attempt) == 0 {
			gen, err := nextGeneration(s)
			if err != nil {
				return err
			}
			recordAttempt(s, attempt, gen)
		}
		return nil
	})
}

// recordAttempt records attempt as the job's newest, of generation gen
// (above every earlier one).
func recordAttempt(s *configmaps.State, attempt string, gen int64) {
	s.Generation = gen
	s.Pods, s.WorldSize, s.DataParallelSize = 0, 0, 0
	s.Attempts = append(s.Attempts, configmaps.Attempt{ID: attempt, Generation: gen, Registered: time.Now().UTC()})
	if n := len(s.Attempts); n > configmaps.MaxAttempts {
		s.Attempts = s.Attempts[n-configmaps.MaxAttempts:]
	}
}

// Register checks that the attempt is not fenced and that the stored state
// was committed under the same plan, and returns the state. An attempt
// without a generation (j.Generation 0) is given the next one; the caller
// reads it with State.GenerationOf.
func Register(ctx context.Context, st Store, j Job) (*configmaps.State, error) {
	return st.Update(ctx, func(s *configmaps.State) error {
		if err := checkJob(s, j); err != nil {
			return err
		}
		// Only a registration names the phases: a commit's job does not.
		if err := checkPhases(s, j); err != nil {
			return err
		}
		if err := checkAdmitted(s, j); err != nil {
			return err
		}
		gen := j.Generation
		if gen < 0 || gen > MaxGeneration {
			return fmt.Errorf("%w: generation %d of attempt %q is outside 0 to %d", ErrRefused, gen, j.Attempt, MaxGeneration)
		}
		switch {
		case gen == 0 && s.GenerationOf(j.Attempt) == 0:
			next, err := nextGeneration(s)
			if err != nil {
				return err
			}
			gen = next
			recordAttempt(s, j.Attempt, gen)
		case gen == 0:
			gen = s.GenerationOf(j.Attempt)
		case gen > s.Generation: // the state was recreated after the admission
			recordAttempt(s, j.Attempt, gen)
		}
		if err := checkFence(s, j.Job, j.Attempt, gen); err != nil {
			return err
		}
		s.Dataset, s.Job = j.Dataset, j.Job
		s.Fingerprint = j.Fingerprint
		s.PlanVersion = max(j.Fingerprint.Version(), 1)
		s.Phases = slices.Clone(j.Phases)
		if s.SidecarImage == "" {
			s.SidecarImage = j.SidecarImage
		}
		if j.Pods > 0 {
			s.Pods, s.WorldSize, s.DataParallelSize = j.Pods, j.WorldSize, j.DataParallel
		}
		return nil
	})
}

// checkFence refuses an attempt of a generation below the job's.
func checkFence(s *configmaps.State, job, attempt string, gen int64) error {
	if gen >= s.Generation {
		return nil
	}
	return fmt.Errorf("%w: attempt %q (generation %d) is fenced: attempt %q (generation %d) of job %q was admitted after it, so only its pods commit (a pod of a replaced attempt is terminating)",
		ErrRefused, attempt, gen, s.Newest(), s.Generation, job)
}

// checkOwner refuses a state recorded for another dataset or job (two
// jobs whose names hash alike): each job's progress stays its own.
func checkOwner(s *configmaps.State, dataset, job string) error {
	if (s.Dataset == "" || s.Dataset == dataset) && (s.Job == "" || s.Job == job) {
		return nil
	}
	return fmt.Errorf("%w: the state holds job %q of dataset %q, not job %q of dataset %q: rename the job", ErrRefused, s.Job, s.Dataset, job, dataset)
}

// checkJob: the state is j's job's, committed under j's plan.
func checkJob(s *configmaps.State, j Job) error {
	if err := checkOwner(s, j.Dataset, j.Job); err != nil {
		return err
	}
	return checkPlan(s, j)
}

// checkPhases refuses a schedule that does not begin with the phases the
// job registered with (phases are only ever appended), or that appends a
// phase starting before the committed step: those steps were trained
// without it, and a resume would never deliver the samples the phase
// moved (the validating webhook refuses it too, but a commit can land
// between its check and the sidecar's restart).
func checkPhases(s *configmaps.State, j Job) error {
	if j.Steps > 0 && len(j.PhaseStarts) == len(j.Phases) {
		committed := s.Epoch*j.Steps + s.Step
		for i := len(s.Phases); i < len(j.Phases); i++ {
			if start := j.PhaseStarts[i]; start < committed {
				return fmt.Errorf("%w: job %q committed global step %d (epoch %d step %d of %d), and this sidecar's schedule appends phase %d (%s) starting at step %d, before it: those steps were trained without the phase; start it at step %d or later, or start a new job",
					ErrRefused, j.Job, committed, s.Epoch, s.Step, j.Steps, i, j.Phases[i], start, committed)
			}
		}
	}
	for i, h := range s.Phases {
		switch {
		case i >= len(j.Phases):
			return fmt.Errorf("%w: job %q ran with %d schedule phases, this sidecar's schedule has %d: phases are only ever appended; restore phase %d (%s) or start a new job",
				ErrRefused, j.Job, len(s.Phases), len(j.Phases), i, h)
		case j.Phases[i] != h:
			return fmt.Errorf("%w: job %q ran with schedule phase %d of hash %s, this sidecar's phase %d is %s: a phase a job used cannot change (it shapes the batches a resume reproduces); restore it, append new phases after it, or start a new job",
				ErrRefused, j.Job, i, h, i, j.Phases[i])
		}
	}
	return nil
}

func checkPlan(s *configmaps.State, j Job) error {
	if s.Fingerprint.Sum == "" || s.Fingerprint.Sum == j.Fingerprint.Sum {
		return nil
	}
	return fmt.Errorf("%w: job %q committed progress under plan %s, this sidecar has plan %s; what changed: %v; a different plan is a new TrainingDataset, or a new job (shardfeed.io/job in a cluster; shardfeed serve --job NAME or --fresh on one machine)",
		ErrRefused, j.Job, s.Fingerprint.Sum, j.Fingerprint.Sum, s.Fingerprint.Diff(j.Fingerprint))
}

// Commit is a commit request: every rank has finished the steps of Epoch
// before Step and the checkpoint is saved.
type Commit struct {
	Epoch int64 `json:"epoch"`
	Step  int64 `json:"step"`
	// Resumed says the client resumed from its own older checkpoint: its
	// commit may go below the stored one.
	Resumed bool `json:"resumed,omitempty"`
}

// Apply records c for attempt j.Attempt.
func Apply(ctx context.Context, st Store, j Job, c Commit) (*configmaps.State, error) {
	if c.Epoch < 0 || c.Step < 0 || c.Step > j.Steps {
		return nil, fmt.Errorf("%w: commit (epoch %d, step %d): the epoch must be at least 0 and the step between 0 and %d (the epoch's steps; %d means the epoch is done)",
			ErrRefused, c.Epoch, c.Step, j.Steps, j.Steps)
	}
	return st.Update(ctx, func(s *configmaps.State) error {
		if err := checkJob(s, j); err != nil {
			return err
		}
		gen := j.Generation
		if gen == 0 {
			gen = s.GenerationOf(j.Attempt)
		}
		if gen == 0 {
			return fmt.Errorf("%w: attempt %q of job %q is not registered: a sidecar registers before it commits", ErrRefused, j.Attempt, j.Job)
		}
		if err := checkAdmitted(s, j); err != nil {
			return err
		}
		if err := checkFence(s, j.Job, j.Attempt, gen); err != nil {
			return err
		}
		if before(c, s) && !c.Resumed {
			return fmt.Errorf("%w: commit (epoch %d, step %d) is behind the stored (epoch %d, step %d): only a client that resumed from its own older checkpoint goes back, and it says so with \"resumed\": true",
				ErrRefused, c.Epoch, c.Step, s.Epoch, s.Step)
		}
		if c.Epoch == s.Epoch && c.Step == s.Step && s.Attempt == j.Attempt && s.Committed != nil {
			return nil // the same commit again (a client retrying): recorded once
		}
		now := time.Now().UTC()
		s.Epoch, s.Step, s.Attempt, s.Committed = c.Epoch, c.Step, j.Attempt, &now
		s.History = append(s.History, configmaps.Commit{Epoch: c.Epoch, Step: c.Step, Attempt: j.Attempt, Resumed: c.Resumed, Time: now})
		if n := len(s.History); n > configmaps.MaxHistory {
			s.History = s.History[n-configmaps.MaxHistory:]
		}
		return nil
	})
}

func before(c Commit, s *configmaps.State) bool {
	return c.Epoch < s.Epoch || (c.Epoch == s.Epoch && c.Step < s.Step)
}

// maxReason bounds a skip's recorded reason.
const maxReason = 512

// RecordSkip records a shard delivered as pad rows (onCorruptShard: skip),
// once per stream and shard whichever sidecar finds it. It is not fenced:
// what a pod of any attempt found corrupt is worth keeping.
func RecordSkip(ctx context.Context, st Store, sk configmaps.SkippedShard) (*configmaps.State, error) {
	return recordSkip(ctx, st, nil, sk)
}

// RecordAdmittedSkip is RecordSkip for a pod's contract, as the operator's
// endpoint reads it: only an attempt the operator admitted records one.
func RecordAdmittedSkip(ctx context.Context, st Store, j Job, sk configmaps.SkippedShard) (*configmaps.State, error) {
	j.Admitted = true
	return recordSkip(ctx, st, &j, sk)
}

// RecordReads adds what sidecars read to the job's state. It is not
// fenced (a fenced attempt's reads were reads all the same); j, if not
// nil, must be an attempt the operator admitted.
func RecordReads(ctx context.Context, st Store, j *Job, r configmaps.Reads) (*configmaps.State, error) {
	if err := CheckReads(r); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return st.Update(ctx, func(s *configmaps.State) error {
		if j != nil {
			jj := *j
			jj.Admitted = true
			if err := checkAdmitted(s, jj); err != nil {
				return err
			}
		}
		if s.Reads == nil {
			s.Reads = &configmaps.Reads{}
		}
		s.Reads.Add(r)
		return nil
	})
}

func recordSkip(ctx context.Context, st Store, j *Job, sk configmaps.SkippedShard) (*configmaps.State, error) {
	if sk.Samples < 0 || sk.Samples > maxSkippedSamples {
		return nil, fmt.Errorf("%w: a skipped shard of %d samples: a shard holds 0 to %d", ErrRefused, sk.Samples, maxSkippedSamples)
	}
	if len(sk.Reason) > maxReason {
		sk.Reason = sk.Reason[:maxReason] + "…"
	}
	if sk.Time.IsZero() {
		sk.Time = time.Now().UTC()
	}
	return st.Update(ctx, func(s *configmaps.State) error {
		if j != nil {
			if err := checkAdmitted(s, *j); err != nil {
				return err
			}
		}
		if slices.ContainsFunc(s.Skipped, func(o configmaps.SkippedShard) bool { return o.Stream == sk.Stream && o.Shard == sk.Shard }) {
			return nil
		}
		s.Skipped = append(s.Skipped, sk)
		s.SkippedShards = min(s.SkippedShards, math.MaxInt-1) + 1
		s.SkippedSamples = min(s.SkippedSamples, math.MaxInt64-maxSkippedSamples) + sk.Samples
		if n := len(s.Skipped); n > configmaps.MaxSkipped {
			s.Skipped = s.Skipped[n-configmaps.MaxSkipped:]
		}
		return nil
	})
}

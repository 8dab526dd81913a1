package shardfeed

import "time"

// State is a job's committed progress as the sidecar reports it
// (/v1/state, and each commit's answer): the operator's state record, as
// far as a client reads it.
type State struct {
	Dataset string `json:"dataset"`
	Job     string `json:"job"`
	// Fingerprint of the plan the job trains on.
	Fingerprint Fingerprint `json:"fingerprint"`
	// Epoch and Step: every rank has finished the steps of Epoch before
	// Step, and the checkpoint for Step is saved. Step may equal the
	// epoch's step count: the epoch is done.
	Epoch     int64      `json:"epoch"`
	Step      int64      `json:"step"`
	Committed *time.Time `json:"committed,omitempty"`
	// Attempt that made the last commit, and the newest attempt's
	// generation.
	Attempt    string `json:"attempt,omitempty"`
	Generation int64  `json:"generation,omitempty"`
	// Pods, WorldSize and DataParallelSize of the newest generation (0: not
	// known).
	Pods             int `json:"pods,omitempty"`
	WorldSize        int `json:"worldSize,omitempty"`
	DataParallelSize int `json:"dataParallelSize,omitempty"`
	// History is the job's last commits, oldest first.
	History []Commit `json:"history,omitempty"`
	// SkippedShards and SkippedSamples count the shards skipped as
	// unreadable.
	SkippedShards  int   `json:"skippedShards,omitempty"`
	SkippedSamples int64 `json:"skippedSamples,omitempty"`
	// SidecarImage is the image the job started with; PlanVersion the
	// version of its plan.
	SidecarImage string `json:"sidecarImage,omitempty"`
	PlanVersion  int    `json:"planVersion,omitempty"`
}

// Fingerprint identifies a plan: Sum is "v<plan version>-<sha256 of the
// inputs>", Inputs every input that shapes it.
type Fingerprint struct {
	Sum    string            `json:"sum"`
	Inputs map[string]string `json:"inputs"`
}

// Commit is one commit of a job's history.
type Commit struct {
	Epoch   int64     `json:"epoch"`
	Step    int64     `json:"step"`
	Attempt string    `json:"attempt"`
	Resumed bool      `json:"resumed,omitempty"`
	Time    time.Time `json:"time"`
}

// ResumeAt is where a job reads next from this state: the committed step,
// or the next epoch's first step when the committed epoch is complete
// (steps is the plan's steps per epoch, /v1/status's "steps"; 0: not
// known). The operator's state record says the same.
func (s *State) ResumeAt(steps int64) (epoch, step int64) {
	if steps > 0 && s.Step >= steps {
		return s.Epoch + 1, 0
	}
	return s.Epoch, s.Step
}

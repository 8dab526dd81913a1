package progress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/planner"
)

// The operator's progress endpoint (design §4): a pod's sidecar registers,
// commits and reports skipped shards there, authenticated by its projected
// ServiceAccount token of audience Audience; the operator resolves the
// token's pod to the job and writes the job's state. The version is in
// the path: an operator serves its own version and the one before, so a
// sidecar pinned by a running job keeps committing across an upgrade.
const (
	APIVersion   = "v1"
	APIPrefix    = "/progress/" + APIVersion + "/"
	PathRegister = APIPrefix + "register"
	PathCommit   = APIPrefix + "commit"
	PathSkip     = APIPrefix + "skip"
	PathState    = APIPrefix + "state"
	// PathReads takes a ReadsRequest: what the sidecar read since its
	// last report (each sidecar every minute, and as it stops).
	PathReads     = APIPrefix + "reads"
	Audience      = sidecarconfig.TokenAudience
	RequestLimit  = 64 << 10
	ResponseLimit = 1 << 20
)

// RegisterRequest is the body of PathRegister: what the sidecar computed.
// Who it is (dataset, job, attempt, generation) the operator reads from
// the pod, never from the body.
type RegisterRequest struct {
	Fingerprint planner.Fingerprint `json:"fingerprint"`
	Steps       int64               `json:"steps"`
	Pods        int                 `json:"pods,omitempty"`
	WorldSize   int                 `json:"worldSize,omitempty"`
	// DataParallelSize is the declared data-parallel size (0: none).
	DataParallelSize int `json:"dataParallelSize,omitempty"`
	// Phases are the hashes of the plan's schedule's phases, and
	// PhaseStarts their global start steps.
	Phases      []string `json:"phases,omitempty"`
	PhaseStarts []int64  `json:"phaseStarts,omitempty"`
}

// CommitRequest is the body of PathCommit.
type CommitRequest struct {
	Plan    string `json:"plan"`
	Steps   int64  `json:"steps"`
	Epoch   int64  `json:"epoch"`
	Step    int64  `json:"step"`
	Resumed bool   `json:"resumed,omitempty"`
}

// SkipRequest is the body of PathSkip.
type SkipRequest = configmaps.SkippedShard

// ReadsRequest is the body of PathReads: deltas, each 0 to MaxReadsDelta.
type ReadsRequest = configmaps.Reads

// MaxReadsDelta bounds each count of a reads report (a petabyte).
const MaxReadsDelta = 1 << 50

// CheckReads refuses a reads report with a count out of bounds.
func CheckReads(r configmaps.Reads) error {
	for _, v := range []int64{r.StoreBytes, r.NodeCacheHits, r.NodeCacheBytes, r.NodeCacheMisses} {
		if v < 0 || v > MaxReadsDelta {
			return fmt.Errorf("a reads report counts %d: each count is 0 to %d, what was read since the last report", v, int64(MaxReadsDelta))
		}
	}
	return nil
}

// ErrorResponse is the body of every refusal.
type ErrorResponse struct {
	Error string `json:"error"`
}

// DecodeRequest reads a request body of at most RequestLimit bytes into v:
// one JSON object of v's fields, nothing after it.
func DecodeRequest(r io.Reader, v any) error {
	b, err := io.ReadAll(io.LimitReader(r, RequestLimit+1))
	if err != nil {
		return fmt.Errorf("reading the body: %w", err)
	}
	if len(b) > RequestLimit {
		return fmt.Errorf("the body is over %d bytes", RequestLimit)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("the body is not the expected JSON object: %w", err)
	}
	if dec.More() {
		return errors.New("the body has data after its JSON object")
	}
	return nil
}

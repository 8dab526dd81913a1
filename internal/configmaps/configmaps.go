// Package configmaps defines the versioned layout of the two ConfigMaps the
// operator and the sidecars share (design §1, §4): <dataset>-plan, which the
// reconciler writes and every sidecar reads, and <dataset>-<job>-state,
// which holds a job's committed progress. docs/configmaps.md documents both.
package configmaps

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/planner"
)

// LayoutVersion is the version of the layout of both ConfigMaps. A reader
// refuses a ConfigMap of another version instead of guessing.
const LayoutVersion = 1

// Keys of the plan ConfigMap.
const (
	KeyLayout      = "layout"
	KeyFingerprint = "fingerprint"
	KeyPlanVersion = "planVersion"
	KeySpec        = "spec.json"
	KeyInputs      = "fingerprint.json"
	KeyStreams     = "streams.json"
	KeyMinCache    = "minCache.json"
	// KeyOperatorCA is the CA bundle of the operator's progress endpoint:
	// a sidecar verifies the operator with it (mounted, so a rotation
	// reaches running pods).
	KeyOperatorCA = "operator-ca.crt"
	// KeyState is the one key of a state ConfigMap.
	KeyState = "state.json"
)

// Labels put on both ConfigMaps.
const (
	LabelDataset   = "shardfeed.io/dataset"
	LabelJob       = "shardfeed.io/job"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "shardfeed"
)

// JobLabels are the labels of a job's state ConfigMap.
func JobLabels(dataset, job string) map[string]string {
	return map[string]string{LabelDataset: LabelValue(dataset), LabelJob: LabelValue(job), LabelManagedBy: ManagedBy}
}

// StreamDigest is what the plan ConfigMap says of one stream's index: enough
// for a sidecar to check that the index it reads is the one planned.
type StreamDigest struct {
	Name        string `json:"name"`
	ContentHash string `json:"contentHash"`
	Shards      int    `json:"shards"`
	Samples     int64  `json:"samples"`
	Bytes       int64  `json:"bytes"`
	// MaxShardBytes is the size of the stream's largest shard: the webhook
	// leaves room for downloads in flight in the cache's sizeLimit.
	MaxShardBytes int64 `json:"maxShardBytes,omitempty"`
}

// Plan is the content of a <dataset>-plan ConfigMap.
type Plan struct {
	Spec        datav1alpha1.TrainingDatasetSpec
	Fingerprint planner.Fingerprint
	Streams     []StreamDigest
	// MinCacheBytes maps a pod count to the smallest cache a pod needs.
	MinCacheBytes map[int]int64
	// OperatorCA is the operator's CA bundle (PEM), if it has one.
	OperatorCA string
}

// MaxShardBytes returns the size of the plan's largest shard (0 for a plan
// written before the operator recorded it).
func (p *Plan) MaxShardBytes() int64 {
	var n int64
	for _, s := range p.Streams {
		n = max(n, s.MaxShardBytes)
	}
	return n
}

// Data returns the ConfigMap data of the plan.
func (p *Plan) Data() (map[string]string, error) {
	spec, err := json.Marshal(p.Spec)
	if err != nil {
		return nil, err
	}
	inputs, err := json.Marshal(p.Fingerprint.Inputs)
	if err != nil {
		return nil, err
	}
	streams, err := json.Marshal(p.Streams)
	if err != nil {
		return nil, err
	}
	minCache := map[string]int64{}
	for pods, n := range p.MinCacheBytes {
		minCache[strconv.Itoa(pods)] = n
	}
	mc, err := json.Marshal(minCache)
	if err != nil {
		return nil, err
	}
	data := map[string]string{
		KeyLayout:      strconv.Itoa(LayoutVersion),
		KeyFingerprint: p.Fingerprint.Sum,
		KeyPlanVersion: strconv.Itoa(p.Fingerprint.Version()),
		KeySpec:        string(spec),
		KeyInputs:      string(inputs),
		KeyStreams:     string(streams),
		KeyMinCache:    string(mc),
	}
	if p.OperatorCA != "" {
		data[KeyOperatorCA] = p.OperatorCA
	}
	return data, nil
}

// PlanFromData reads a plan ConfigMap's data.
func PlanFromData(data map[string]string) (*Plan, error) {
	if err := checkLayout(data[KeyLayout], "plan"); err != nil {
		return nil, err
	}
	if v, err := strconv.Atoi(data[KeyPlanVersion]); err != nil || v < 1 || v > planner.PlanVersion {
		return nil, fmt.Errorf("plan ConfigMap has plan version %q, this sidecar computes plan versions 1 to %d: pin the sidecar image the job started with", data[KeyPlanVersion], planner.PlanVersion)
	}
	p := &Plan{Fingerprint: planner.Fingerprint{Sum: data[KeyFingerprint]}}
	for _, f := range []struct {
		key      string
		into     any
		required bool
	}{
		{KeySpec, &p.Spec, true},
		{KeyInputs, &p.Fingerprint.Inputs, true},
		{KeyStreams, &p.Streams, true},
		{KeyMinCache, new(map[string]int64), false},
	} {
		v, ok := data[f.key]
		if !ok {
			if f.required {
				return nil, fmt.Errorf("plan ConfigMap has no key %q: it was not written by the shardfeed operator", f.key)
			}
			continue
		}
		if err := json.Unmarshal([]byte(v), f.into); err != nil {
			return nil, fmt.Errorf("plan ConfigMap key %q: %w", f.key, err)
		}
		if f.key == KeyMinCache {
			p.MinCacheBytes = map[int]int64{}
			for k, n := range *(f.into.(*map[string]int64)) {
				pods, err := strconv.Atoi(k)
				if err != nil {
					return nil, fmt.Errorf("plan ConfigMap key %q: pod count %q is not a number", f.key, k)
				}
				p.MinCacheBytes[pods] = n
			}
		}
	}
	if p.Fingerprint.Sum == "" {
		return nil, fmt.Errorf("plan ConfigMap has no key %q", KeyFingerprint)
	}
	return p, nil
}

// PlanFromDir reads a plan ConfigMap mounted as a volume: one file per key.
func PlanFromDir(dir string) (*Plan, error) {
	data := map[string]string{}
	for _, k := range []string{KeyLayout, KeyFingerprint, KeyPlanVersion, KeySpec, KeyInputs, KeyStreams, KeyMinCache} {
		b, err := os.ReadFile(filepath.Join(dir, k))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		data[k] = string(b)
	}
	p, err := PlanFromData(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return p, nil
}

func checkLayout(v, what string) error {
	if v == "" {
		return fmt.Errorf("%s ConfigMap has no %q key: it was not written by shardfeed", what, KeyLayout)
	}
	if v != strconv.Itoa(LayoutVersion) {
		return fmt.Errorf("%s ConfigMap has layout %q, this shardfeed reads layout %d: run matching operator and sidecar versions", what, v, LayoutVersion)
	}
	return nil
}

// Commit is one recorded commit of a job's lineage.
type Commit struct {
	Epoch   int64     `json:"epoch"`
	Step    int64     `json:"step"`
	Attempt string    `json:"attempt"`
	Resumed bool      `json:"resumed,omitempty"`
	Time    time.Time `json:"time"`
}

// Attempt is an admitted attempt of a job: every pod of one attempt shares
// its id and its generation (design §4).
type Attempt struct {
	ID string `json:"id"`
	// Generation orders the attempts of a job: the operator gives each new
	// attempt the job's generation plus one when it admits its first pod.
	Generation int64     `json:"generation,omitempty"`
	Registered time.Time `json:"registered"`
}

// SkippedShard is a shard a sidecar delivered as pad rows because it
// stayed corrupt (onCorruptShard: skip; design §4).
type SkippedShard struct {
	Stream  string    `json:"stream"`
	Shard   string    `json:"shard"`
	Samples int64     `json:"samples"`
	Reason  string    `json:"reason"`
	Attempt string    `json:"attempt,omitempty"`
	Time    time.Time `json:"time"`
}

// MaxAttempts, MaxHistory and MaxSkipped bound a state's lists so that the
// ConfigMap stays small whatever the job's length.
const (
	MaxAttempts = 16
	MaxHistory  = 256
	MaxSkipped  = 64
)

// State is a job's committed progress: the content of <dataset>-<job>-state
// and of `shardfeed serve`'s state file.
type State struct {
	Layout  int    `json:"layout"`
	Dataset string `json:"dataset"`
	Job     string `json:"job"`
	// Fingerprint of the plan the job trains on; a sidecar with another
	// plan refuses the job, with the diff of the inputs.
	Fingerprint planner.Fingerprint `json:"fingerprint"`
	// Epoch and Step: every rank has finished the steps of Epoch before
	// Step, and the checkpoint for Step is saved. Step may equal the
	// epoch's step count: the epoch is done.
	Epoch     int64      `json:"epoch"`
	Step      int64      `json:"step"`
	Committed *time.Time `json:"committed,omitempty"`
	// Attempt that made the last commit.
	Attempt string `json:"attempt,omitempty"`
	// Generation is the newest attempt's generation. It only grows, so an
	// attempt of a lower generation is fenced for good (design §4),
	// however many attempts came after it.
	Generation int64 `json:"generation,omitempty"`
	// Attempts in admission order, newest last (the newest MaxAttempts): what
	// generation each has, for the pods of an attempt admitted after its
	// first. Fencing does not depend on this list.
	Attempts []Attempt `json:"attempts,omitempty"`
	// Pods and WorldSize of the newest generation, as its sidecars
	// registered them (0: not known, e.g. ranks assigned at run time).
	Pods      int `json:"pods,omitempty"`
	WorldSize int `json:"worldSize,omitempty"`
	// DataParallelSize is the declared data-parallel size (0: none).
	DataParallelSize int `json:"dataParallelSize,omitempty"`
	// History is the job's last commits, oldest first: its lineage.
	History []Commit `json:"history,omitempty"`
	// Skipped lists the newest skipped shards (at most MaxSkipped);
	// SkippedShards and SkippedSamples count them all.
	Skipped        []SkippedShard `json:"skipped,omitempty"`
	SkippedShards  int            `json:"skippedShards,omitempty"`
	SkippedSamples int64          `json:"skippedSamples,omitempty"`
	// SidecarImage pins the image the job started with. PlanVersion is
	// the newest plan version that image computes, from its admission,
	// then the version of the plan its sidecars registered with.
	SidecarImage string `json:"sidecarImage,omitempty"`
	PlanVersion  int    `json:"planVersion,omitempty"`
	// Phases are the hashes of the schedule's phases the job's sidecars
	// registered with, in order (planner.Phase.Hash): a later sidecar's
	// schedule must begin with them, so that a resume reproduces the
	// batches.
	Phases []string `json:"phases,omitempty"`
	// Reads sums what the job's sidecars reported reading, every attempt's.
	Reads *Reads `json:"reads,omitempty"`
}

// Reads is what sidecars read: bytes from the stores (retries and the
// next epoch's first shards included), and the shards and bytes the node
// cache gave, and those it could not.
type Reads struct {
	StoreBytes      int64 `json:"storeBytes,omitempty"`
	NodeCacheHits   int64 `json:"nodeCacheHits,omitempty"`
	NodeCacheBytes  int64 `json:"nodeCacheBytes,omitempty"`
	NodeCacheMisses int64 `json:"nodeCacheMisses,omitempty"`
}

// Add adds o, saturating rather than overflowing.
func (r *Reads) Add(o Reads) {
	add := func(a *int64, b int64) {
		if b > 0 && *a > math.MaxInt64-b {
			*a = math.MaxInt64
			return
		}
		*a += b
	}
	add(&r.StoreBytes, o.StoreBytes)
	add(&r.NodeCacheHits, o.NodeCacheHits)
	add(&r.NodeCacheBytes, o.NodeCacheBytes)
	add(&r.NodeCacheMisses, o.NodeCacheMisses)
}

// Sub returns r - o: what a sidecar read since its last report.
func (r Reads) Sub(o Reads) Reads {
	return Reads{StoreBytes: r.StoreBytes - o.StoreBytes, NodeCacheHits: r.NodeCacheHits - o.NodeCacheHits,
		NodeCacheBytes: r.NodeCacheBytes - o.NodeCacheBytes, NodeCacheMisses: r.NodeCacheMisses - o.NodeCacheMisses}
}

// IsZero says nothing was read.
func (r Reads) IsZero() bool { return r == Reads{} }

// ResumeAt is where a job reads next from this committed state: the
// committed step, or the next epoch's first step when the committed epoch
// is complete (steps is the plan's steps per epoch; 0: not known). The one
// statement of this rule on the Go side (the Python client's is
// resume_position).
func (s *State) ResumeAt(steps int64) (epoch, step int64) {
	if steps > 0 && s.Step >= steps {
		return s.Epoch + 1, 0
	}
	return s.Epoch, s.Step
}

// Newest returns the newest attempt's id, or "".
func (s *State) Newest() string {
	if len(s.Attempts) == 0 {
		return ""
	}
	return s.Attempts[len(s.Attempts)-1].ID
}

// GenerationOf returns the generation of attempt id, or 0 when the state
// does not list it.
func (s *State) GenerationOf(id string) int64 {
	for _, a := range s.Attempts {
		if a.ID == id {
			return a.Generation
		}
	}
	return 0
}

// StateData returns the ConfigMap data of a state.
func StateData(s *State) (map[string]string, error) {
	s.Layout = LayoutVersion
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return map[string]string{KeyState: string(b)}, nil
}

// StateFromData reads a state ConfigMap's data; an empty ConfigMap (as the
// operator pre-creates it) is the zero state.
func StateFromData(data map[string]string) (*State, error) {
	v, ok := data[KeyState]
	if !ok || v == "" {
		return &State{Layout: LayoutVersion}, nil
	}
	return ParseState([]byte(v))
}

// ParseState decodes a state document and checks its layout.
func ParseState(b []byte) (*State, error) {
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("state is not valid JSON: %w", err)
	}
	if err := checkLayout(strconv.Itoa(s.Layout), "state"); err != nil {
		return nil, err
	}
	if s.Epoch < 0 || s.Step < 0 || s.Generation < 0 {
		return nil, fmt.Errorf("state has a negative epoch, step or generation (%d, %d, %d)", s.Epoch, s.Step, s.Generation)
	}
	return &s, nil
}

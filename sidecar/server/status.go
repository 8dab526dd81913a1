package server

import (
	"net/http"
	"sort"
	"time"

	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/handoff"
	"github.com/shardfeed/shardfeed/sidecar/pipeline"
)

// streamStatus is what /v1/status says of one reader (rank and worker).
type streamStatus struct {
	Key       string    `json:"key"`
	Epoch     int64     `json:"epoch"`
	Rank      int       `json:"rank"`
	World     int       `json:"world"`
	DPRank    int       `json:"dpRank"`
	DPSize    int       `json:"dpSize"`
	Worker    int       `json:"worker"`
	Workers   int       `json:"workers"`
	StartStep int64     `json:"startStep"`
	NextStep  int64     `json:"nextStep"`
	Batches   int64     `json:"batches"`
	Rows      int64     `json:"rows"`
	Active    bool      `json:"active"`
	Finished  bool      `json:"finished"`
	Error     string    `json:"error,omitempty"`
	Updated   time.Time `json:"updated"`
}

type errorRecord struct {
	Time  time.Time `json:"time"`
	Key   string    `json:"key"`
	Error string    `json:"error"`
}

// maxErrors bounds the last errors /v1/status keeps.
const maxErrors = 20

func (s *Server) openStream(key string, r batchRequest, start int64) *streamStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := &streamStatus{Key: key, Epoch: r.epoch, Rank: r.rank, World: r.world, DPRank: r.dpRank, DPSize: r.dpSize, Worker: r.worker, Workers: r.workers,
		StartStep: start, NextStep: start, Active: true, Updated: time.Now()}
	s.streams[key] = ss
	s.metrics.activeStreams.Inc()
	return ss
}

func (s *Server) sent(ss *streamStatus, step, rows int64) {
	s.mu.Lock()
	ss.NextStep = step + int64(ss.Workers)
	ss.Batches++
	ss.Rows += rows
	ss.Updated = time.Now()
	s.mu.Unlock()
	s.metrics.batchesServed.Inc()
	s.metrics.consumedRows.Add(float64(rows))
}

func (s *Server) failStream(ss *streamStatus, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss.Error = err.Error()
	ss.Updated = time.Now()
	s.errs = append(s.errs, errorRecord{Time: ss.Updated, Key: ss.Key, Error: ss.Error})
	if len(s.errs) > maxErrors {
		s.errs = s.errs[len(s.errs)-maxErrors:]
	}
	s.metrics.streamErrors.Inc()
	s.cfg.Log.Error("Stream failed", "stream", ss.Key, "nextStep", ss.NextStep, "err", err)
}

func (s *Server) finishStream(ss *streamStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss.Finished = true
}

func (s *Server) closeStream(ss *streamStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss.Active = false
	ss.Updated = time.Now()
	s.metrics.activeStreams.Dec()
}

// Status is the body of GET /v1/status.
type Status struct {
	Ready       bool                   `json:"ready"`
	RankMode    sidecarconfig.RankMode `json:"rankMode"`
	Pod         int                    `json:"pod"`
	Pods        int                    `json:"pods"`
	ProcsPerPod int                    `json:"procsPerPod"`
	// DataParallel is the declared data-parallel size (0: none).
	DataParallel int    `json:"dataParallelSize,omitempty"`
	Dataset      string `json:"dataset"`
	Job          string `json:"job"`
	Attempt      string `json:"attempt"`
	Fingerprint  string `json:"fingerprint"`
	PlanVersion  int    `json:"planVersion"`
	NumSplits    int    `json:"numSplits"`
	// GlobalBatchSize is G; Steps the steps per epoch. BatchSizes are the
	// global batch sizes of the global steps (epoch·Steps + step) as runs:
	// one run of G without a schedule; null where the size varies with
	// each epoch's order (GET /v1/steps counts them).
	BatchSizes      []planner.SizeRun `json:"batchSizes"`
	GlobalBatchSize int64             `json:"globalBatchSize"`
	Steps           int64             `json:"steps"`
	Uptime          float64           `json:"uptimeSeconds"`
	Pipeline        pipeline.Stats    `json:"pipeline"`
	// Handoff is the shared memory batches are handed over in.
	Handoff handoff.PoolStats `json:"handoff"`
	// Store is what the sidecar asked of the object stores since it started.
	Store *StoreStatus `json:"store,omitempty"`
	// Rows by stage: still to assemble for the open streams, fetched into
	// the cache and not decoded, decoded and
	// held in memory, assembled and waiting in a queue, sent to the clients
	// (in all and per dataset stream). Bytes fetched and the cache's size
	// are in pipeline.cache.
	RemainingRows int64            `json:"remainingRows"`
	FetchedRows   int64            `json:"fetchedRows"`
	DecodedRows   int64            `json:"decodedRows"`
	ReadyRows     int64            `json:"readyRows"`
	ConsumedRows  int64            `json:"consumedRows"`
	StreamRows    map[string]int64 `json:"streamRows"`
	Streams       []*streamStatus  `json:"streams"`
	LastErrors    []errorRecord    `json:"lastErrors"`
}

// StoreStatus counts the requests the sidecar made to its streams' object
// stores (indexes and shards; each attempt of a retried one) and the bytes
// they returned.
type StoreStatus struct {
	Requests  int64 `json:"requests"`
	Gets      int64 `json:"gets"`
	Stats     int64 `json:"stats"`
	Lists     int64 `json:"lists"`
	Retries   int64 `json:"retries"`
	ReadBytes int64 `json:"readBytes"`
	// AheadGets are the Gets among them made ahead of any reader's need:
	// the next epoch's first shards.
	AheadGets int64 `json:"aheadGets"`
}

func storeStatus(c *store.Counts) *StoreStatus {
	if c == nil {
		return nil
	}
	return &StoreStatus{Requests: c.Requests(), Gets: c.Gets.Load(), Stats: c.Stats.Load(), Lists: c.Lists.Load(), Retries: c.Retries.Load(),
		ReadBytes: c.ReadBytes.Load(), AheadGets: c.AheadGets.Load()}
}

func (s *Server) status(w http.ResponseWriter, _ *http.Request) {
	p := s.cfg.Pipeline
	ps := p.Stats()
	s.mu.Lock()
	st := Status{
		Ready: s.ready, RankMode: s.cfg.RankMode, Pod: s.cfg.Pod, Pods: s.cfg.Pods, ProcsPerPod: s.cfg.ProcsPerPod, DataParallel: s.cfg.DataParallel,
		Dataset: s.cfg.Job.Dataset, Job: s.cfg.Job.Job, Attempt: s.cfg.Job.Attempt,
		Fingerprint: p.Plan().Fingerprint().Sum, PlanVersion: p.Plan().Version(), NumSplits: p.Plan().NumSplits(),
		GlobalBatchSize: p.Plan().GlobalBatchSize(), BatchSizes: p.Plan().BatchSizes(), Steps: p.Plan().Steps(), Uptime: time.Since(s.started).Seconds(),
		Pipeline: ps, Handoff: s.cfg.Handoff.Stats(), Store: storeStatus(s.cfg.StoreCounts), DecodedRows: ps.DecodedRows, FetchedRows: p.FetchedRows(), LastErrors: append([]errorRecord{}, s.errs...),
	}
	st.StreamRows = map[string]int64{}
	for k, v := range s.streamRows {
		st.StreamRows[k] = v
	}
	steps := p.Plan().Steps()
	for _, ss := range s.streams {
		c := *ss
		st.Streams = append(st.Streams, &c)
		st.ConsumedRows += ss.Rows
		if ss.Active && ss.NextStep < steps {
			batches := (steps - ss.NextStep + int64(ss.Workers) - 1) / int64(ss.Workers)
			st.RemainingRows += batches * p.Plan().GlobalBatchSize() / int64(ss.DPSize)
		}
	}
	s.mu.Unlock()
	st.ReadyRows = max(ps.BatchRows-st.ConsumedRows, 0)
	sort.Slice(st.Streams, func(i, j int) bool { return st.Streams[i].Key < st.Streams[j].Key })
	writeJSON(w, http.StatusOK, st)
}

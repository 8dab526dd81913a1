package server

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
)

// Bounds on a report of waits: a client sends what it measured since its
// last report, every few seconds; anything larger is not a client of ours.
const (
	waitsBodyLimit = 64 << 10
	maxWaits       = 4096
	maxWait        = 24 * 3600.0
)

// waitReport is the body of POST /v1/waits: the seconds a training loop
// (rank) waited for each of its batches since its last report.
type waitReport struct {
	Rank    *int      `json:"rank"`
	Seconds []float64 `json:"seconds"`
}

// waits records a trainer's data-wait in the per-rank histogram. The pod's
// processes write it, so it is checked as strictly as a batch request: a
// rank of this pod (or of the plan in client mode), finite values in
// bounds, a bounded body. It changes only a metric.
func (s *Server) waits(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, waitsBodyLimit+1))
	if err != nil {
		badRequest(w, "", "reading the body: %v", err)
		return
	}
	if len(body) > waitsBodyLimit {
		s.metrics.badRequests.Inc()
		badRequest(w, "", "a report of waits is at most %d bytes: report more often", waitsBodyLimit)
		return
	}
	var r waitReport
	if err := json.Unmarshal(body, &r); err != nil {
		s.metrics.badRequests.Inc()
		badRequest(w, "", "the body is not a report of waits ({\"rank\": 0, \"seconds\": [0.01, …]}): %v", err)
		return
	}
	if field, err := s.checkWaits(r); err != nil {
		s.metrics.badRequests.Inc()
		badRequest(w, field, "%v", err)
		return
	}
	h := s.metrics.dataWait.WithLabelValues(strconv.Itoa(*r.Rank))
	for _, v := range r.Seconds {
		h.Observe(v)
	}
	w.WriteHeader(http.StatusNoContent)
}

// checkWaits says which field of a report is wrong, and how.
func (s *Server) checkWaits(r waitReport) (string, error) {
	if r.Rank == nil {
		return "rank", fmt.Errorf("the report names no rank")
	}
	rank := *r.Rank
	// The label's values are bounded by the ranks this sidecar serves.
	lo, hi := 0, s.cfg.Pipeline.Plan().Params().NumSplits
	if s.cfg.PodMode() {
		lo, hi = s.cfg.Ranks()
	}
	if rank < lo || rank >= hi {
		return "rank", fmt.Errorf("rank %d is not one this sidecar serves (%d to %d)", rank, lo, hi-1)
	}
	if len(r.Seconds) > maxWaits {
		return "seconds", fmt.Errorf("%d waits in one report, at most %d: report more often", len(r.Seconds), maxWaits)
	}
	for i, v := range r.Seconds {
		if math.IsNaN(v) || v < 0 || v > maxWait {
			return "seconds", fmt.Errorf("wait %d is %v seconds: a wait is between 0 and %.0f", i, v, maxWait)
		}
	}
	return "", nil
}

package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"golang.org/x/sys/unix"

	"github.com/shardfeed/shardfeed/internal/progress"
	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/handoff"
	"github.com/shardfeed/shardfeed/sidecar/pipeline"
)

// ArrowStream is the media type of a batch stream.
const ArrowStream = "application/vnd.apache.arrow.stream"

// Response headers of GET /v1/batches.
const (
	HeaderEpoch       = "Shardfeed-Epoch"
	HeaderStartStep   = "Shardfeed-Start-Step"
	HeaderSteps       = "Shardfeed-Steps"
	HeaderFingerprint = "Shardfeed-Fingerprint"
	// HeaderHandoff says how batches are handed over: "memfd" when through
	// shared memory (the chunks are frames, see streamConn), absent when
	// in the chunks.
	HeaderHandoff = "Shardfeed-Handoff"
)

// HandoffMemfd is the value of the handoff parameter (and of the
// Shardfeed-Handoff header) for batches handed over in memfd segments.
const HandoffMemfd = "memfd"

// errShuttingDown ends the streams open when the sidecar stops.
var errShuttingDown = errors.New("the sidecar is shutting down: reconnect at the next step once it is back")

// errClientGone ends a stream whose client closed the connection.
var errClientGone = errors.New("the client closed the connection")

// batchRequest is a parsed GET /v1/batches.
type batchRequest struct {
	rank, world, worker, workers int
	// dpRank of dpSize data-parallel ranks decide the batches; without
	// replication groups, the rank and world.
	dpRank, dpSize        int
	epoch, step           int64
	epochGiven, stepGiven bool
	// handoff: the client maps memfd segments (handoff=memfd).
	handoff bool
}

// intParam parses an integer query parameter; def is used when absent
// (a negative def makes it required).
func intParam(q url.Values, name string, def int64) (int64, bool, error) {
	if len(q[name]) > 1 {
		return 0, false, fmt.Errorf("%s is given %d times: give it once", name, len(q[name]))
	}
	v := q.Get(name)
	if v == "" {
		if def < 0 {
			return 0, false, fmt.Errorf("%s is required", name)
		}
		return def, false, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, false, fmt.Errorf("%s=%q is not a non-negative integer", name, v)
	}
	return n, true, nil
}

var batchParams = map[string]bool{"rank": true, "world": true, "dp_rank": true, "dp_size": true, "worker": true, "workers": true, "epoch": true, "step": true, "fingerprint": true, "handoff": true}

// parseBatchRequest checks a request against the plan and the rank mode.
func (s *Server) parseBatchRequest(q url.Values) (batchRequest, string, error) {
	for k := range q {
		if !batchParams[k] {
			return batchRequest{}, k, fmt.Errorf("unknown parameter %q: use rank, world, dp_rank, dp_size, worker, workers, epoch, step (and fingerprint, handoff)", k)
		}
		if n := len(q[k]); n > 1 {
			return batchRequest{}, k, fmt.Errorf("%s is given %d times: give each parameter once", k, n)
		}
	}
	var r batchRequest
	var dpRank, dpSize int64
	var dpRankGiven, dpSizeGiven bool
	ints := []struct {
		name  string
		def   int64
		into  *int64
		given *bool
	}{
		{"rank", -1, new(int64), nil}, {"world", -1, new(int64), nil},
		{"worker", 0, new(int64), nil}, {"workers", 1, new(int64), nil},
		{"dp_rank", 0, &dpRank, &dpRankGiven}, {"dp_size", 0, &dpSize, &dpSizeGiven},
		{"epoch", 0, &r.epoch, &r.epochGiven}, {"step", 0, &r.step, &r.stepGiven},
	}
	for _, p := range ints {
		v, given, err := intParam(q, p.name, p.def)
		if err != nil {
			return r, p.name, err
		}
		if v > 1<<40 {
			return r, p.name, fmt.Errorf("%s=%d is out of range", p.name, v)
		}
		*p.into = v
		if p.given != nil {
			*p.given = given
		}
	}
	r.rank, r.world, r.worker, r.workers = int(*ints[0].into), int(*ints[1].into), int(*ints[2].into), int(*ints[3].into)
	pl := s.cfg.Pipeline.Plan()
	if r.world < 1 {
		return r, "world", pl.CheckWorld(r.world)
	}
	if r.rank >= r.world {
		return r, "rank", fmt.Errorf("rank %d is outside a world of %d ranks (0 to %d)", r.rank, r.world, r.world-1)
	}
	if field, err := s.dataParallel(&r, dpRankGiven, dpSizeGiven, int(dpRank), int(dpSize)); err != nil {
		return r, field, err
	}
	if r.workers < 1 {
		return r, "workers", errors.New("workers must be at least 1 (the DataLoader's num_workers, or 1 without workers)")
	}
	if r.worker >= r.workers {
		return r, "worker", fmt.Errorf("worker %d is outside %d workers (0 to %d)", r.worker, r.workers, r.workers-1)
	}
	if s.cfg.PodMode() {
		if world := s.cfg.World(); r.world != world {
			return r, "world", fmt.Errorf("world=%d, but this job has %d pods × %d procs per pod = %d ranks", r.world, s.cfg.Pods, s.cfg.ProcsPerPod, world)
		}
		if lo, hi := s.cfg.Ranks(); r.rank < lo || r.rank >= hi {
			return r, "rank", fmt.Errorf("rank %d belongs to pod %d, this is pod %d (ranks %d to %d): a process asks its own pod's sidecar",
				r.rank, r.rank/s.cfg.ProcsPerPod, s.cfg.Pod, lo, hi-1)
		}
	}
	switch h := q.Get("handoff"); h {
	case "":
	case HandoffMemfd:
		r.handoff = true
	default:
		return r, "handoff", fmt.Errorf("handoff=%q: use %q (batches in shared memory) or leave it out (batches in the stream)", h, HandoffMemfd)
	}
	if fp := q.Get("fingerprint"); fp != "" && fp != pl.Fingerprint().Sum {
		return r, "fingerprint", fmt.Errorf("the checkpoint was taken under plan %s, this sidecar serves plan %s: a different plan is a new TrainingDataset", fp, pl.Fingerprint().Sum)
	}
	if max := pl.Steps() + int64(r.workers); r.stepGiven && r.step > max {
		return r, "step", fmt.Errorf("step %d is past the epoch's %d steps", r.step, pl.Steps())
	}
	return r, "", nil
}

// dataParallel sets the request's data-parallel coordinates: those given
// (dp_rank, dp_size), which a job that declared its data-parallel size
// must give, or else the rank and world.
func (s *Server) dataParallel(r *batchRequest, rankGiven, sizeGiven bool, dpRank, dpSize int) (string, error) {
	pl := s.cfg.Pipeline.Plan()
	declared := s.cfg.DataParallel
	switch {
	case rankGiven != sizeGiven:
		return "dp_size", errors.New("dp_rank and dp_size go together: give both (the rank's data-parallel coordinates) or neither")
	case !rankGiven && declared > 0:
		return "dp_rank", fmt.Errorf("this job declares a data-parallel size of %d (annotation shardfeed.io/data-parallel-size): give each rank's data-parallel coordinates, dp_rank and dp_size (the Python client's dp_rank= and dp_size=, or device_mesh=)", declared)
	case !rankGiven:
		r.dpRank, r.dpSize = r.rank, r.world
		if err := pl.CheckWorld(r.world); err != nil {
			return "world", err
		}
		return "", nil
	}
	r.dpRank, r.dpSize = dpRank, dpSize
	if err := pl.CheckReplication(r.world, r.dpSize); err != nil {
		return "dp_size", err
	}
	if r.dpRank >= r.dpSize {
		return "dp_rank", fmt.Errorf("dp_rank %d is outside %d data-parallel ranks (0 to %d)", r.dpRank, r.dpSize, r.dpSize-1)
	}
	if s.cfg.PodMode() && declared == 0 && r.dpSize != s.cfg.World() {
		return "dp_size", fmt.Errorf("dp_size=%d, but this job declares no data-parallel size: its %d ranks are each their own; set the pod annotation shardfeed.io/data-parallel-size: \"%d\" for replication groups", r.dpSize, r.world, r.dpSize)
	}
	if declared > 0 && r.dpSize != declared {
		return "dp_size", fmt.Errorf("dp_size=%d, but this job declares a data-parallel size of %d (annotation shardfeed.io/data-parallel-size)", r.dpSize, declared)
	}
	return "", nil
}

func (s *Server) batches(w http.ResponseWriter, req *http.Request) {
	r, field, err := s.parseBatchRequest(req.URL.Query())
	if err != nil {
		s.metrics.badRequests.Inc()
		badRequest(w, field, "%v", err)
		return
	}
	pr, ok := s.resume(w, req, &r)
	if !ok {
		return
	}
	// The stream outlives nothing but this handler; a client that goes
	// away shows as a failed write.
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(req.Context()))
	defer cancel(nil)
	go s.endOnDrain(ctx, cancel)
	s.active.Add(1)
	defer s.active.Done()
	b, err := s.cfg.Pipeline.Batches(ctx, pr)
	if err != nil {
		badRequest(w, "", "%v", err)
		return
	}
	defer b.Close()
	key := fmt.Sprintf("epoch %d rank %d/%d worker %d/%d", r.epoch, r.rank, r.world, r.worker, r.workers)
	if r.dpSize != r.world || r.dpRank != r.rank {
		key = fmt.Sprintf("epoch %d rank %d/%d dp %d/%d worker %d/%d", r.epoch, r.rank, r.world, r.dpRank, r.dpSize, r.worker, r.workers)
	}
	ss := s.openStream(key, r, pr.Start)
	defer s.closeStream(ss)

	pl := s.cfg.Pipeline.Plan()
	h := w.Header().Clone() // the protocol header
	h.Set("Content-Type", ArrowStream)
	h.Set(HeaderEpoch, strconv.FormatInt(r.epoch, 10))
	h.Set(HeaderStartStep, strconv.FormatInt(pr.Start, 10))
	h.Set(HeaderSteps, strconv.FormatInt(pl.Steps(), 10))
	h.Set(HeaderFingerprint, pl.Fingerprint().Sum)
	hs := s.negotiateHandoff(req, r, key, h)
	if hs != nil {
		defer hs.Close()
	}
	sc, err := hijackStream(w, h)
	if err != nil {
		s.failStream(ss, fmt.Errorf("taking the connection: %w", err))
		return
	}
	// Closing without the terminal chunk, as every early return does, tells
	// the client the stream was cut.
	defer func() { _ = sc.conn.Close() }()
	// The client sends nothing after its request: the connection's end,
	// read here, ends the stream, even while it waits for a shard or for
	// the client to release a slot.
	go func() {
		_, _ = io.Copy(io.Discard, sc.conn)
		cancel(errClientGone)
	}()
	if hs != nil {
		sc.handoff = hs
		fd := hs.TakeControlFD()
		err := sc.frame(handoff.FrameControl, map[string]int{"slots": hs.Slots()}, fd)
		_ = unix.Close(fd)
		if err != nil {
			return
		}
	}
	if !s.writeBatches(ctx, ss, sc, b) {
		return
	}
	if err := sc.flush(); err != nil {
		return
	}
	if err := sc.end(); err != nil {
		return
	}
	s.finishStream(ss)
}

// resume applies the resume rule to a request (design §4): the epoch is
// the committed one unless given, never before it; a step from the client
// wins, else the committed step of this epoch, else 0, and worker w starts
// w steps later. It answers the client itself where it cannot.
func (s *Server) resume(w http.ResponseWriter, req *http.Request, r *batchRequest) (pipeline.Request, bool) {
	st, err := s.cfg.Progress.Load(req.Context())
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: "reading the committed state: " + err.Error()})
		return pipeline.Request{}, false
	}
	if !r.epochGiven {
		r.epoch = st.Epoch
	}
	if r.epoch < st.Epoch {
		s.metrics.badRequests.Inc()
		badRequest(w, "epoch", "epoch %d is before the committed epoch %d (step %d): the job has moved past it", r.epoch, st.Epoch, st.Step)
		return pipeline.Request{}, false
	}
	start := r.step
	if !r.stepGiven {
		k0 := int64(0)
		if st.Epoch == r.epoch {
			k0 = st.Step
		}
		start = k0 + int64(r.worker)
	}
	pr := pipeline.Request{Epoch: r.epoch, Rank: r.dpRank, World: r.dpSize, Worker: r.worker, Workers: r.workers, Start: start, ZeroCopy: true}
	// A pod prefetches its splits together; a pod of replication groups
	// learns its data-parallel ranks from its clients, each its own scope.
	if s.cfg.PodScoped() {
		pr.ScopeFirst, pr.ScopeSplits, _ = s.cfg.Pipeline.Plan().PodSplits(s.cfg.Pod, s.cfg.Pods)
	}
	return pr, true
}

// endOnDrain ends a stream when the server drains: one waiting for a slow
// shard ends then too.
func (s *Server) endOnDrain(ctx context.Context, cancel context.CancelCauseFunc) {
	select {
	case <-s.draining:
		cancel(errShuttingDown)
	case <-ctx.Done():
	}
}

// negotiateHandoff opens the shared memory a stream's batches are handed
// over in, where the client asked for it over the Unix socket and the
// server has some, and says so in h; nil: the batches go in the stream.
func (s *Server) negotiateHandoff(req *http.Request, r batchRequest, key string, h http.Header) *handoff.Stream {
	_, unixSocket := req.Context().Value(http.LocalAddrContextKey).(*net.UnixAddr)
	if !r.handoff || !unixSocket || !s.cfg.Handoff.Enabled() {
		return nil
	}
	hs, err := handoff.NewStream(s.cfg.Handoff, s.cfg.HandoffSlots)
	if err != nil {
		s.cfg.Log.Warn("Fell back to batches in the stream", "stream", key, "err", err)
		return nil
	}
	h.Set(HeaderHandoff, HandoffMemfd)
	return hs
}

// writeBatches writes the stream's batches until its end (true) or until
// it fails, the client goes away or the server drains (false, the stream
// recorded as it ended).
func (s *Server) writeBatches(ctx context.Context, ss *streamStatus, sc *streamConn, b *pipeline.Batches) bool {
	iw := ipc.NewWriter(sc, ipc.WithSchema(s.cfg.Pipeline.Schema()))
	for {
		select {
		case <-s.draining:
			s.failStream(ss, errShuttingDown)
			return false
		default:
		}
		waitStart := time.Now()
		batch, err := b.Next(ctx)
		s.metrics.batchWait.Observe(time.Since(waitStart).Seconds())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if c := context.Cause(ctx); c != nil {
				err = c
			}
			if errors.Is(err, errClientGone) {
				return false // as a failed write: reconnecting at the next step continues there
			}
			s.failStream(ss, err)
			return false
		}
		sc.Batch = &batch
		err = iw.Write(batch.Record)
		sc.Batch = nil
		if err == nil {
			err = sc.handOff(ctx)
		}
		rows := batch.Record.NumRows()
		s.countStreams(batch.Record)
		batch.Release()
		if err != nil {
			return false // the client went away: reconnecting at the next step continues there
		}
		s.sent(ss, batch.Step, rows)
	}
	return iw.Close() == nil
}

// countStreams adds a batch's rows per stream to the metrics.
func (s *Server) countStreams(rec arrow.RecordBatch) {
	col, ok := rec.Column(rec.Schema().FieldIndices(pipeline.ColumnStream)[0]).(*array.Int16)
	if !ok {
		return
	}
	counts := map[int16]int64{}
	for _, v := range col.Int16Values() {
		counts[v]++
	}
	names := s.cfg.Pipeline.Plan().Params().Streams
	s.mu.Lock()
	defer s.mu.Unlock()
	for v, n := range counts {
		if int(v) < len(names) {
			s.metrics.rowsServed.WithLabelValues(names[v].Name).Add(float64(n))
			s.streamRows[names[v].Name] += n
		}
	}
}

func (s *Server) commit(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, progress.CommitBodyLimit+1))
	if err != nil {
		badRequest(w, "", "reading the body: %v", err)
		return
	}
	c, err := progress.ParseCommit(body)
	if err != nil {
		s.metrics.badRequests.Inc()
		badRequest(w, "", "%v", err)
		return
	}
	st, err := s.cfg.Progress.Commit(req.Context(), s.cfg.Job, c)
	if errors.Is(err, progress.ErrRefused) {
		s.metrics.commitsRefused.Inc()
		writeJSON(w, http.StatusConflict, apiError{Error: err.Error()})
		return
	}
	if err != nil {
		s.cfg.Log.Error("Commit failed", "epoch", c.Epoch, "step", c.Step, "err", err)
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: "persisting the commit: " + err.Error()})
		return
	}
	s.metrics.commits.Inc()
	s.metrics.committedEpoch.Set(float64(st.Epoch))
	s.metrics.committedStep.Set(float64(st.Step))
	s.cfg.Log.Info("Committed", "epoch", c.Epoch, "step", c.Step, "resumed", c.Resumed, "attempt", s.cfg.Job.Attempt)
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) state(w http.ResponseWriter, req *http.Request) {
	st, err := s.cfg.Progress.Load(req.Context())
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) sample(w http.ResponseWriter, req *http.Request) {
	g, _, err := intParam(req.URL.Query(), "index", -1)
	if err != nil {
		badRequest(w, "index", "%v (the global sample id, _shardfeed_index)", err)
		return
	}
	rec, err := s.cfg.Pipeline.Sample(req.Context(), g)
	if err != nil {
		badRequest(w, "index", "%v", err)
		return
	}
	defer rec.Release()
	w.Header().Set("Content-Type", ArrowStream)
	iw := ipc.NewWriter(w, ipc.WithSchema(rec.Schema()))
	if err := iw.Write(rec); err == nil {
		_ = iw.Close()
	}
}

// steps counts the steps of an epoch from a step on by their global batch
// size: what a client counts its micro-batches with where the size varies
// by step (status's batchSizes is null: a bucketed plan with a batch size
// per bucket).
func (s *Server) steps(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	e, _, err := intParam(q, "epoch", 0)
	if err != nil {
		badRequest(w, "epoch", "%v", err)
		return
	}
	from, _, err := intParam(q, "from", 0)
	if err != nil {
		badRequest(w, "from", "%v (a step of the epoch)", err)
		return
	}
	ep, err := s.cfg.Pipeline.Epoch(e)
	if err != nil {
		badRequest(w, "epoch", "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		BatchSizes []planner.SizeCount `json:"batchSizes"`
	}{ep.BatchSizeCounts(from)})
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	ready := s.ready
	s.mu.Unlock()
	if !ready {
		http.Error(w, "not ready: preparing the first batches", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

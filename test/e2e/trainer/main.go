// Command trainer is the end-to-end tests' training job: one process per
// pod of an Indexed Job, reading its rank's batches from the injected
// sidecar with the Go client (the batches handed over in shared memory,
// across the pod's containers) and "training" in lockstep with the job's
// other pods.
//
// Lockstep is a barrier in a directory every pod mounts (a hostPath on the
// single test node): after step k, each rank marks k done and waits for
// all; rank 0 then commits k+1 every E2E_COMMIT_EVERY steps. The barrier
// has a generation: a rank that starts again (its pod was replaced) bumps
// it, and every other rank leaves its stream and starts again from the
// committed step, so no rank waits for a peer that went back. A cut
// stream (the sidecar container restarted) is reopened at the step it
// stopped at.
//
// Every step a rank trains is appended to E2E_DIR/records/<attempt>.jsonl
// (attempt, generation, rank, world, epoch, step, ids, time): the test
// checks the committed lineage against `shardfeed plan --ids`.
//
// Environment: SHARDFEED_SOCKET (the webhook sets it), JOB_COMPLETION_INDEX
// (Kubernetes sets it), E2E_WORLD, E2E_DIR, E2E_ATTEMPT (the Job's UID),
// E2E_EPOCHS (1), E2E_STEP_MS (20), E2E_COMMIT_EVERY (10), E2E_HOLD_AT
// (0: none; a step of the first epoch the ranks stop before until the
// barrier's generation moves or the pod is deleted, so that a story's
// rescale always comes mid-epoch, however slow the node).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
	"github.com/shardfeed/shardfeed/test/e2e/record"
)

type config struct {
	socket               string
	rank, world          int
	dir, attempt         string
	epochs               int64
	stepTime             time.Duration
	commitEvery          int64
	holdAt               int64
	readyTimeout         time.Duration
	barrierPoll          time.Duration
	barrierStuckWarnings time.Duration
	// rankFromSidecar: the rank and world are the pod's as the webhook
	// wired its sidecar (E2E_RANK_FROM=sidecar: a JobSet's pods, whose
	// completion index is their Job's, not the JobSet's).
	rankFromSidecar bool
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	if os.Getenv("E2E_HOSTILE") != "" {
		if err := hostile(); err != nil {
			log.Fatalf("hostile: %v", err)
		}
		return
	}
	cfg, err := load()
	if err != nil {
		log.Fatalf("trainer: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	if cfg.rankFromSidecar {
		if err := rankOfPod(ctx, &cfg); err != nil {
			log.Fatalf("trainer: %v", err)
		}
	}
	err = train(ctx, cfg)
	stop()
	if err != nil {
		log.Fatalf("trainer rank %d: %v", cfg.rank, err)
	}
	log.Printf("rank %d: done", cfg.rank)
}

func load() (config, error) {
	c := config{socket: os.Getenv("SHARDFEED_SOCKET"), dir: os.Getenv("E2E_DIR"), attempt: os.Getenv("E2E_ATTEMPT"),
		epochs: 1, stepTime: 20 * time.Millisecond, commitEvery: 10, readyTimeout: 5 * time.Minute,
		barrierPoll: 5 * time.Millisecond, barrierStuckWarnings: 30 * time.Second}
	var err error
	atoi := func(name string, into *int, def int) {
		v := os.Getenv(name)
		if v == "" {
			*into = def
			return
		}
		n, e := strconv.Atoi(v)
		if e != nil && err == nil {
			err = fmt.Errorf("%s=%q is not a number", name, v)
		}
		*into = n
	}
	var epochs, stepMS, every, hold int
	atoi("JOB_COMPLETION_INDEX", &c.rank, -1)
	atoi("E2E_WORLD", &c.world, 0)
	if c.rankFromSidecar = os.Getenv("E2E_RANK_FROM") == "sidecar"; c.rankFromSidecar {
		c.rank, c.world = 0, 1 // rankOfPod reads them
	}
	atoi("E2E_EPOCHS", &epochs, 1)
	atoi("E2E_STEP_MS", &stepMS, 20)
	atoi("E2E_COMMIT_EVERY", &every, 10)
	atoi("E2E_HOLD_AT", &hold, 0)
	if err != nil {
		return c, err
	}
	c.epochs, c.stepTime, c.commitEvery, c.holdAt = int64(epochs), time.Duration(stepMS)*time.Millisecond, int64(every), int64(hold)
	switch {
	case c.socket == "":
		return c, errors.New("SHARDFEED_SOCKET is not set: is the pod labelled shardfeed.io/dataset?")
	case c.rank < 0 || c.world < 1 || c.rank >= c.world:
		return c, fmt.Errorf("rank %d of world %d: run in an Indexed Job with E2E_WORLD = completions", c.rank, c.world)
	case c.dir == "" || c.attempt == "":
		return c, errors.New("E2E_DIR and E2E_ATTEMPT are required")
	case c.commitEvery < 1:
		return c, errors.New("E2E_COMMIT_EVERY must be at least 1")
	}
	return c, nil
}

// rankOfPod takes the rank and world the webhook gave the pod's sidecar.
func rankOfPod(ctx context.Context, cfg *config) error {
	client := shardfeed.New(cfg.socket)
	waitCtx, cancel := context.WithTimeout(ctx, cfg.readyTimeout)
	defer cancel()
	if err := client.WaitReady(waitCtx); err != nil {
		return fmt.Errorf("the sidecar on %s is not ready: %w", cfg.socket, err)
	}
	var st struct {
		RankMode  string `json:"rankMode"`
		Pod, Pods int
	}
	if err := client.Status(ctx, &st); err != nil {
		return err
	}
	if st.RankMode != "pod" || st.Pods < 1 || st.Pod >= st.Pods {
		return fmt.Errorf("E2E_RANK_FROM=sidecar, but the sidecar has rank mode %q, pod %d of %d", st.RankMode, st.Pod, st.Pods)
	}
	cfg.rank, cfg.world = st.Pod, st.Pods
	log.Printf("rank %d of %d, from the sidecar's wiring", cfg.rank, cfg.world)
	return nil
}

// errRestart: the barrier's generation moved, every rank starts again from
// the committed step.
var errRestart = errors.New("a rank restarted")

func train(ctx context.Context, cfg config) error {
	client := shardfeed.New(cfg.socket)
	b := &barrier{dir: filepath.Join(cfg.dir, "barrier", cfg.attempt), rank: cfg.rank, world: cfg.world, poll: cfg.barrierPoll}
	if err := os.MkdirAll(filepath.Join(cfg.dir, "records"), 0o777); err != nil {
		return err
	}
	out, err := os.OpenFile(filepath.Join(cfg.dir, "records", fmt.Sprintf("%s-r%d.jsonl", cfg.attempt, cfg.rank)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o666)
	if err != nil {
		return err
	}
	defer func() { _ = out.Close() }()
	gen, err := b.join(true)
	if err != nil {
		return err
	}
	for {
		err := run(ctx, cfg, client, b, gen, out)
		if !errors.Is(err, errRestart) {
			return err
		}
		if gen, err = b.join(false); err != nil {
			return err
		}
		log.Printf("rank %d: starting again from the committed step under generation %d", cfg.rank, gen)
	}
}

// run trains from the committed state until the last epoch ends.
func run(ctx context.Context, cfg config, client *shardfeed.Client, b *barrier, gen int, out *os.File) error {
	waitCtx, cancel := context.WithTimeout(ctx, cfg.readyTimeout)
	err := client.WaitReady(waitCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("the sidecar on %s is not ready: %w", cfg.socket, err)
	}
	st, err := client.State(ctx)
	if err != nil {
		return err
	}
	var status struct {
		Steps int64 `json:"steps"`
	}
	if err := client.Status(ctx, &status); err != nil {
		return err
	}
	epoch, step := st.ResumeAt(status.Steps)
	// Every rank of the generation starts at the same place: the newest
	// committed state any of them read (rank 0's last commit may land
	// after another rank read the state).
	if epoch, step, err = b.agree(ctx, gen, epoch, step); err != nil {
		return err
	}
	log.Printf("rank %d of %d: generation %d starts at epoch %d step %d", cfg.rank, cfg.world, gen, epoch, step)
	for epoch < cfg.epochs {
		s := step
		steps, err := trainEpoch(ctx, cfg, client, b, gen, out, epoch, &s)
		if err != nil {
			return err
		}
		if s < steps {
			return fmt.Errorf("epoch %d ended at step %d of %d", epoch, s, steps)
		}
		epoch, step = epoch+1, 0
	}
	return nil
}

// trainEpoch reads one epoch from *step on; *step follows the steps done.
func trainEpoch(ctx context.Context, cfg config, client *shardfeed.Client, b *barrier, gen int, out *os.File, epoch int64, step *int64) (int64, error) {
	var steps int64
	cuts := 0
	for {
		from := *step
		stream, err := client.Batches(ctx, shardfeed.Request{Rank: cfg.rank, World: cfg.world, Workers: 1, Epoch: &epoch, Step: &from, Handoff: true})
		if err != nil {
			return 0, err
		}
		steps = stream.Steps
		err = readStream(ctx, cfg, client, b, gen, out, stream, epoch, step)
		_ = stream.Close()
		switch {
		case err == nil:
			return steps, nil
		case errors.Is(err, shardfeed.ErrCut) && cuts < 5:
			// The sidecar restarted (kubelet restarts a native sidecar):
			// reconnect where the stream stopped.
			cuts++
			log.Printf("rank %d: stream cut at step %d (%v); reconnecting", cfg.rank, *step, err)
			waitCtx, cancel := context.WithTimeout(ctx, cfg.readyTimeout)
			err = client.WaitReady(waitCtx)
			cancel()
			if err != nil {
				return 0, err
			}
		default:
			return 0, err
		}
	}
}

func readStream(ctx context.Context, cfg config, client *shardfeed.Client, b *barrier, gen int, out *os.File,
	stream *shardfeed.Stream, epoch int64, step *int64) error {
	waits := &waitReporter{client: client, rank: cfg.rank, last: time.Now()}
	defer waits.flush(ctx)
	for {
		asked := time.Now()
		rec, err := stream.Next()
		waits.add(ctx, time.Since(asked).Seconds())
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		k, ids, pads, err := batchIDs(rec)
		if err != nil {
			return err
		}
		if k != *step {
			return fmt.Errorf("got step %d, expected %d", k, *step)
		}
		if cfg.holdAt > 0 && epoch == 0 && k >= cfg.holdAt {
			log.Printf("rank %d: holding before step %d (E2E_HOLD_AT) until a rank restarts or the pod goes", cfg.rank, k)
			return b.hold(ctx, gen)
		}
		time.Sleep(cfg.stepTime) // the "training"
		line, err := json.Marshal(record.Record{Attempt: cfg.attempt, Gen: gen, Rank: cfg.rank, World: cfg.world, Epoch: epoch, Step: k, IDs: ids, Pad: pads, Time: time.Now(), HandedOff: stream.HandedOff()})
		if err != nil {
			return err
		}
		if _, err := out.Write(append(line, '\n')); err != nil {
			return err
		}
		if err := b.wait(ctx, gen, epoch, k); err != nil {
			return err
		}
		*step = k + 1
		if cfg.rank == 0 && (*step%cfg.commitEvery == 0 || *step == stream.Steps) {
			// Every rank finished the steps before *step: commit it.
			if _, err := client.Commit(ctx, epoch, *step, false); err != nil {
				var api *shardfeed.APIError
				if errors.As(err, &api) && api.Status == 409 {
					// Fenced: a newer attempt of the job took over.
					return fmt.Errorf("commit of step %d refused: %w", *step, err)
				}
				return err
			}
		}
	}
}

// batchIDs returns a batch's step, its ids and the rows marked pad.
func batchIDs(rec arrow.RecordBatch) (int64, []int64, []int, error) {
	var steps, index *array.Int64
	var pad *array.Boolean
	for i, f := range rec.Schema().Fields() {
		switch f.Name {
		case "_shardfeed_step":
			steps, _ = rec.Column(i).(*array.Int64)
		case "_shardfeed_index":
			index, _ = rec.Column(i).(*array.Int64)
		case "_shardfeed_pad":
			pad, _ = rec.Column(i).(*array.Boolean)
		}
	}
	if steps == nil || index == nil || pad == nil || steps.Len() == 0 {
		return 0, nil, nil, errors.New("a batch without _shardfeed_step, _shardfeed_index and _shardfeed_pad")
	}
	var pads []int
	for i := range pad.Len() {
		if pad.Value(i) {
			pads = append(pads, i)
		}
	}
	return steps.Value(0), append([]int64(nil), index.Int64Values()...), pads, nil
}

// barrier is the lockstep of the job's ranks, in files.
type barrier struct {
	dir         string
	rank, world int
	poll        time.Duration
	gen         int
}

// join enters the current generation; a rank that was in it already (its
// process starts again) opens the next one.
func (b *barrier) join(fresh bool) (int, error) {
	if err := os.MkdirAll(b.dir, 0o777); err != nil {
		return 0, err
	}
	lock, err := os.OpenFile(filepath.Join(b.dir, "lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return 0, err
	}
	defer func() { _ = lock.Close() }()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return 0, err
	}
	gen := b.current()
	member := func(g int) string {
		return filepath.Join(b.dir, fmt.Sprintf("g%d", g), fmt.Sprintf("member-%d", b.rank))
	}
	if _, err := os.Stat(member(gen)); err == nil && fresh {
		gen++
		if err := os.WriteFile(filepath.Join(b.dir, "gen.tmp"), []byte(strconv.Itoa(gen)), 0o666); err != nil {
			return 0, err
		}
		if err := os.Rename(filepath.Join(b.dir, "gen.tmp"), filepath.Join(b.dir, "gen")); err != nil {
			return 0, err
		}
		log.Printf("rank %d: started again: generation %d", b.rank, gen)
	}
	if err := os.MkdirAll(filepath.Dir(member(gen)), 0o777); err != nil {
		return 0, err
	}
	if err := os.WriteFile(member(gen), nil, 0o666); err != nil {
		return 0, err
	}
	b.gen = gen
	return gen, nil
}

func (b *barrier) current() int {
	raw, err := os.ReadFile(filepath.Join(b.dir, "gen"))
	if err != nil {
		return 0
	}
	g, _ := strconv.Atoi(string(raw))
	return g
}

// agree publishes where this rank would start and returns the newest of
// every rank's, once all of the generation have published.
func (b *barrier) agree(ctx context.Context, gen int, epoch, step int64) (int64, int64, error) {
	dir := filepath.Join(b.dir, fmt.Sprintf("g%d", gen), "start")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return 0, 0, err
	}
	// Written beside and renamed in, so that no rank reads half a file.
	tmp := filepath.Join(filepath.Dir(dir), fmt.Sprintf("start-%d.tmp", b.rank))
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%d %d", epoch, step), 0o666); err != nil {
		return 0, 0, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, strconv.Itoa(b.rank))); err != nil {
		return 0, 0, err
	}
	for {
		if b.current() != gen {
			return 0, 0, errRestart
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return 0, 0, err
		}
		if len(entries) >= b.world {
			for _, e := range entries {
				raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
				if err != nil {
					return 0, 0, err
				}
				var ep, st int64
				if _, err := fmt.Sscanf(string(raw), "%d %d", &ep, &st); err != nil {
					return 0, 0, fmt.Errorf("barrier start file %s: %w", e.Name(), err)
				}
				if ep > epoch || (ep == epoch && st > step) {
					epoch, step = ep, st
				}
			}
			return epoch, step, nil
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(b.poll):
		}
	}
}

// hold waits until the generation moves (errRestart) or ctx ends.
func (b *barrier) hold(ctx context.Context, gen int) error {
	for b.current() == gen {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(b.poll):
		}
	}
	return errRestart
}

// wait marks (epoch, step) done for this rank and waits for every rank; it
// returns errRestart if the generation moves meanwhile.
func (b *barrier) wait(ctx context.Context, gen int, epoch, step int64) error {
	dir := filepath.Join(b.dir, fmt.Sprintf("g%d", gen), fmt.Sprintf("e%d-s%d", epoch, step))
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(b.rank)), nil, 0o666); err != nil {
		return err
	}
	for {
		if b.current() != gen {
			return errRestart
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		if len(entries) >= b.world {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(b.poll):
		}
	}
}

// waitReporter sends the rank's data waits (how long each Next took) to
// its sidecar every 2 s, as the Python client does: best effort.
type waitReporter struct {
	client *shardfeed.Client
	rank   int
	waits  []float64
	last   time.Time
}

func (w *waitReporter) add(ctx context.Context, seconds float64) {
	w.waits = append(w.waits, seconds)
	if len(w.waits) >= 4096 || time.Since(w.last) >= 2*time.Second {
		w.flush(ctx)
	}
}

func (w *waitReporter) flush(ctx context.Context) {
	if len(w.waits) > 0 {
		_ = w.client.ReportWaits(ctx, w.rank, w.waits) // a lost report is a gap in a graph
	}
	w.waits, w.last = w.waits[:0], time.Now()
}

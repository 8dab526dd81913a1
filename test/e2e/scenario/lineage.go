package scenario

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardfeed/shardfeed/internal/configmaps"
	e2erecord "github.com/shardfeed/shardfeed/test/e2e/record"
)

// Lineage is the check of design §4: for each step, the batches of the
// attempt that trained it last before the first commit past it are the
// plan's, and together the steps hold every sample exactly once.
type Lineage struct {
	Steps   int64
	Samples int
	// Lost and Duplicated samples; Mismatched steps (a rank's batch is not
	// the plan's, or a rank is missing).
	Lost, Duplicated, Mismatched int
	// Skipped samples: in their planned place with their planned id, marked
	// pad by onCorruptShard: skip; counted apart, never as lost or trained.
	Skipped int
	// Repeated samples: those of the steps a schedule repeats, counted
	// apart (the step's first training counts). ScheduleSkipped: the
	// samples of the data a schedule skipped (plan --ids prints them
	// marked), never delivered and never lost.
	Repeated, ScheduleSkipped int
	// Retrained steps: trained by more than one attempt or generation
	// (those after the last commit before a kill or a rescale).
	Retrained int
	// SameGlobalBatches: the plan's global batches are the same for every
	// world size the job ran with.
	SameGlobalBatches bool
	Worlds            []int
	Problems          []string
	// HandedOff counts the steps trained whose batch came in the sidecar's
	// shared memory, of Trained in all.
	HandedOff, Trained int
}

// OK is the exactly-once verdict.
func (l Lineage) OK() bool {
	return l.Steps > 0 && l.Lost == 0 && l.Duplicated == 0 && l.Mismatched == 0 && l.SameGlobalBatches
}

// Summary is the verdict in a line.
func (l Lineage) Summary() string {
	verdict := "EXACTLY ONCE"
	if !l.OK() {
		verdict = "FAILED"
	}
	schedule := ""
	if l.Repeated+l.ScheduleSkipped > 0 {
		schedule = fmt.Sprintf(", %d repeated and %d skipped by the schedule", l.Repeated, l.ScheduleSkipped)
	}
	return fmt.Sprintf("%s: %d steps, %d samples checked, %d lost, %d duplicated, %d skipped (corrupt shards)%s, %d steps unlike the plan, %d steps retrained after a failure; same global batches for worlds %v: %v",
		verdict, l.Steps, l.Samples, l.Lost, l.Duplicated, l.Skipped, schedule, l.Mismatched, l.Retrained, l.Worlds, l.SameGlobalBatches)
}

type record = e2erecord.Record

// CheckLineage checks the records the trainers wrote against the job's
// committed state and `shardfeed plan --ids` (epoch 0).
func (e *Env) CheckLineage(ctx context.Context, st *configmaps.State) (Lineage, error) {
	var l Lineage
	recs, err := readRecords(e.recordsDir())
	if err != nil {
		return l, err
	}
	worlds := map[int]bool{}
	for _, rec := range recs {
		worlds[rec.World] = true
		l.Trained++
		if rec.HandedOff {
			l.HandedOff++
		}
	}
	plans := map[int]map[[2]int64]planned{}
	for w := range worlds {
		l.Worlds = append(l.Worlds, w)
		var skipped int
		if plans[w], skipped, err = e.planIDs(ctx, w); err != nil {
			return l, err
		}
		l.ScheduleSkipped = skipped
	}
	slices.Sort(l.Worlds)
	if len(l.Worlds) == 0 {
		return l, fmt.Errorf("no trainer recorded a step in %s", e.recordsDir())
	}
	// The global batch of step s for world w.
	global := func(w int, s int64) []int64 {
		var ids []int64
		for rank := range w {
			ids = append(ids, plans[w][[2]int64{s, int64(rank)}].IDs...)
		}
		slices.Sort(ids)
		return ids
	}
	ref := plans[l.Worlds[0]]
	for k := range ref {
		l.Steps = max(l.Steps, k[0]+1)
	}
	l.SameGlobalBatches = true
	for s := range l.Steps {
		for _, w := range l.Worlds[1:] {
			if !slices.Equal(global(w, s), global(l.Worlds[0], s)) {
				l.SameGlobalBatches = false
			}
		}
	}

	type group struct {
		attempt string
		gen     int
	}
	seen, skipped := map[int64]int{}, map[int64]int{}
	for s := range l.Steps {
		// The first commit past s, and the trainings of s before it.
		var limit time.Time
		for _, c := range st.History {
			if c.Epoch == 0 && c.Step > s {
				limit = c.Time
				break
			}
		}
		byGroup := map[group][]record{}
		var last group
		var lastAt time.Time
		for _, rec := range recs {
			if rec.Epoch != 0 || rec.Step != s || (!limit.IsZero() && !rec.Time.Before(limit)) {
				continue
			}
			g := group{rec.Attempt, rec.Gen}
			byGroup[g] = append(byGroup[g], rec)
			if rec.Time.After(lastAt) {
				last, lastAt = g, rec.Time
			}
		}
		if len(byGroup) > 1 {
			l.Retrained++
		}
		chosen := byGroup[last]
		if len(chosen) == 0 {
			l.Mismatched++
			l.Problems = append(l.Problems, fmt.Sprintf("step %d: no training before the commit past it", s))
			continue
		}
		w := chosen[0].World
		ranks := map[int]bool{}
		for _, rec := range chosen {
			want := plans[w][[2]int64{s, int64(rec.Rank)}]
			if !slices.Equal(rec.IDs, want.IDs) {
				l.Mismatched++
				l.Problems = append(l.Problems, fmt.Sprintf("step %d rank %d/%d trained %v, the plan says %v", s, rec.Rank, w, rec.IDs, want.IDs))
			}
			ranks[rec.Rank] = true
			pads := map[int]bool{}
			for _, p := range rec.Pad {
				pads[p] = true
			}
			for _, p := range want.Pad {
				if !pads[p] {
					l.Mismatched++
					l.Problems = append(l.Problems, fmt.Sprintf("step %d rank %d/%d: row %d is a planned pad row, not marked pad", s, rec.Rank, w, p))
				}
				delete(pads, p) // a planned pad repeats a real id: never counted
			}
			for i, id := range rec.IDs {
				switch {
				case slices.Contains(want.Pad, i):
				case pads[i]:
					skipped[id]++
				case want.Repeated:
					l.Repeated++
				default:
					seen[id]++
				}
			}
		}
		if len(ranks) != w {
			l.Mismatched++
			l.Problems = append(l.Problems, fmt.Sprintf("step %d: %d of %d ranks trained it", s, len(ranks), w))
		}
	}
	for s := range l.Steps {
		for _, id := range delivered(plans[l.Worlds[0]], s, l.Worlds[0]) {
			l.Samples++
			switch n := seen[id]; {
			case n == 0 && skipped[id] > 0:
				l.Skipped++
			case n == 0:
				l.Lost++
			case n > 1:
				l.Duplicated += n - 1
			}
			seen[id] = -1 // counted
		}
	}
	for id, n := range seen {
		if n > 0 {
			l.Problems = append(l.Problems, fmt.Sprintf("id %d trained but not in the plan", id))
			l.Duplicated++
		}
	}
	return l, nil
}

func readRecords(dir string) ([]record, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	var out []record
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			var rec record
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				// A trainer killed mid-write leaves a torn last line.
				continue
			}
			out = append(out, rec)
		}
		_ = fh.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// planned is one (step, rank) line of `shardfeed plan --ids`.
type planned struct {
	IDs []int64 `json:"ids"`
	Pad []int   `json:"pad"`
	// Repeated marks a step a schedule repeats; Skipped the data a
	// schedule skipped (not a step of its own).
	Repeated bool `json:"repeated"`
	Skipped  bool `json:"skipped"`
}

// delivered is the ids of step s for world w that are not pad rows.
func delivered(plan map[[2]int64]planned, s int64, w int) []int64 {
	var ids []int64
	for rank := range w {
		line := plan[[2]int64{s, int64(rank)}]
		if line.Repeated {
			continue
		}
		for i, id := range line.IDs {
			if !slices.Contains(line.Pad, i) {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// planIDs runs `shardfeed plan --ids` for world w: (step, rank) → ids,
// and the number of samples of the data a schedule skips.
func (e *Env) planIDs(ctx context.Context, w int) (map[[2]int64]planned, int, error) {
	out, err := e.Cmd(ctx, "shardfeed", "plan", "-f", e.manifest, "--ids", "--world-size", strconv.Itoa(w), "--epoch", "0")
	if err != nil {
		return nil, 0, err
	}
	skipped := 0
	ids := map[[2]int64]planned{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var line struct {
			Step, Rank int64
			planned
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			continue // progress or log lines
		}
		if line.Skipped {
			skipped += len(line.IDs)
			continue
		}
		ids[[2]int64{line.Step, line.Rank}] = line.planned
	}
	if len(ids) == 0 {
		return nil, 0, fmt.Errorf("shardfeed plan --ids printed no batch:\n%s", out)
	}
	return ids, skipped, sc.Err()
}

func execCommand(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}

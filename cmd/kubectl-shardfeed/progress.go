package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shardfeed/shardfeed/internal/bytesize"
	"github.com/shardfeed/shardfeed/internal/configmaps"
)

func newProgressCommand(c *cluster) *cobra.Command {
	return &cobra.Command{
		Use:   "progress DATASET [JOB]",
		Short: "Show a job's committed progress and check its lineage: the plan it trains on, its commits in order, the sample ids it covers (shardfeed plan --ids)",
		Long: `progress shows each job of the dataset (or the one named): where it resumes,
its attempts, pods and ranks, what its sidecars read, and the shards skipped.

It checks the job's committed lineage, which the operator keeps: the job
trains on the dataset's current plan (else its fingerprint's changed inputs
are named), its commits move forward within an epoch (a commit back is only
a client's resume from its own older checkpoint), an older attempt never
committed after a newer one, and no step passes the epoch's end. Then the
samples trained exactly once so far are the plan's ids for the committed
steps, and it prints the command that lists them. It exits 1 when a check
fails.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: c.runE(func(ctx context.Context, cl client.Client, ns string, cmd *cobra.Command, args []string) error {
			job := ""
			if len(args) == 2 {
				job = args[1]
			}
			return progress(ctx, cl, ns, args[0], job, cmd.OutOrStdout())
		}),
	}
}

func progress(ctx context.Context, cl client.Client, ns, dataset, job string, out io.Writer) error {
	plan, err := readPlan(ctx, cl, ns, dataset)
	if err != nil {
		return err
	}
	labels := client.MatchingLabels{configmaps.LabelDataset: configmaps.LabelValue(dataset), configmaps.LabelManagedBy: configmaps.ManagedBy}
	if job != "" {
		labels[configmaps.LabelJob] = configmaps.LabelValue(job)
	}
	var cms corev1.ConfigMapList
	if err := cl.List(ctx, &cms, client.InNamespace(ns), labels); err != nil {
		return err
	}
	var states []*configmaps.State
	for _, cm := range cms.Items {
		if _, ok := cm.Data["state.json"]; !ok {
			continue // the plan ConfigMap carries the dataset label too
		}
		s, err := configmaps.StateFromData(cm.Data)
		if err != nil {
			return fmt.Errorf("job state ConfigMap %s/%s: %w", ns, cm.Name, err)
		}
		// The labels may be a long name's hash: the state names its own.
		if s.Dataset == dataset && (job == "" || s.Job == job) {
			states = append(states, s)
		}
	}
	if len(states) == 0 {
		if job != "" {
			return fmt.Errorf("no job %q of TrainingDataset %s/%s has committed or registered yet (its state is made when its first pod is admitted: kubectl shardfeed why POD)", job, ns, dataset)
		}
		r := &report{w: out}
		r.printf("TrainingDataset %s/%s has no jobs yet.\n", ns, dataset)
		return r.err
	}
	slices.SortFunc(states, func(a, b *configmaps.State) int { return strings.Compare(a.Job, b.Job) })
	r := &report{w: out}
	failed := 0
	for i, s := range states {
		if i > 0 {
			r.println("")
		}
		if problems := writeProgress(r, plan, s, time.Now()); len(problems) > 0 {
			failed++
		}
	}
	if r.err != nil {
		return r.err
	}
	if failed > 0 {
		return &checkFailed{what: fmt.Sprintf("%d job(s) failed the lineage check", failed)}
	}
	return nil
}

// writeProgress shows one job and its lineage check; it returns the
// problems the check found (also written).
func writeProgress(r *report, plan *planSummary, s *configmaps.State, now time.Time) []string {
	steps := plan.StepsPerEpoch
	r.printf("Job %s (TrainingDataset %s/%s)\n", s.Job, plan.Namespace, plan.Dataset)
	epoch, step := s.ResumeAt(steps)
	pct := ""
	if steps > 0 {
		pct = fmt.Sprintf(" (%.1f%% of epoch %d)", 100*float64(step)/float64(steps), epoch)
	}
	r.printf("  resumes at epoch %d, step %d of %d%s\n", epoch, step, steps, pct)
	if s.Committed != nil {
		r.printf("  last commit %s ago by attempt %s\n", now.Sub(*s.Committed).Round(time.Second), s.Attempt)
	} else {
		r.println("  no commit yet")
	}
	ranks := fmt.Sprintf("%d pods, %d ranks", s.Pods, s.WorldSize)
	if s.Pods == 0 {
		ranks = "ranks assigned at rendezvous"
	}
	if s.DataParallelSize > 0 {
		ranks += fmt.Sprintf(", data-parallel size %d", s.DataParallelSize)
	}
	r.printf("  generation %d (%d attempts kept), %s, sidecar %s\n", s.Generation, len(s.Attempts), ranks, s.SidecarImage)
	if s.Reads != nil {
		r.printf("  read %s from the stores; node cache: %d shards (%s), %d misses\n",
			bytesize.Human(s.Reads.StoreBytes), s.Reads.NodeCacheHits, bytesize.Human(s.Reads.NodeCacheBytes), s.Reads.NodeCacheMisses)
	}
	if s.SkippedShards > 0 {
		r.printf("  %d shards skipped (%d samples delivered as pad rows, counted apart: onCorruptShard: skip)\n", s.SkippedShards, s.SkippedSamples)
	}
	problems := lineageProblems(plan, s)
	if len(problems) > 0 {
		r.println("  lineage check: FAILED")
		for _, p := range problems {
			r.println("    - " + p)
		}
		return problems
	}
	kept := ""
	if len(s.History) >= configmaps.MaxHistory {
		kept = fmt.Sprintf(" (the newest %d commits are kept)", configmaps.MaxHistory)
	}
	r.printf("  lineage check: ok: %d commits in order on the dataset's plan%s\n", len(s.History), kept)
	world := s.WorldSize
	if s.DataParallelSize > 0 {
		world = s.DataParallelSize
	}
	if s.Committed != nil && world > 0 {
		r.printf("  trained exactly once so far: %s; their sample ids:\n", trained(epoch, step))
		manifest := fmt.Sprintf("kubectl shardfeed manifest %s -n %s | shardfeed plan -f - --ids --world-size %d", plan.Dataset, plan.Namespace, world)
		if epoch > 0 {
			r.printf("    %s --epoch E   (E = 0 … %d, each whole)\n", manifest, epoch-1)
		}
		if step > 0 {
			r.printf("    %s --epoch %d --steps 0:%d\n", manifest, epoch, step)
		}
	}
	return nil
}

// trained says which steps a job's commits cover: the epochs before
// epoch, and epoch's steps before step.
func trained(epoch, step int64) string {
	var parts []string
	switch epoch {
	case 0:
	case 1:
		parts = append(parts, "epoch 0")
	default:
		parts = append(parts, fmt.Sprintf("epochs 0–%d", epoch-1))
	}
	if step > 0 {
		parts = append(parts, fmt.Sprintf("steps 0–%d of epoch %d", step-1, epoch))
	}
	if len(parts) == 0 {
		return "nothing yet"
	}
	return strings.Join(parts, " and ")
}

// lineageProblems checks a job's committed lineage against the plan and
// itself (design §4's rules); nil when it holds.
func lineageProblems(plan *planSummary, s *configmaps.State) []string {
	var out []string
	if plan.Fingerprint == "" {
		out = append(out, "the dataset has no plan yet: nothing to check against (kubectl shardfeed plan "+plan.Dataset+")")
	} else if s.Fingerprint.Sum != plan.Fingerprint {
		out = append(out, fmt.Sprintf("the job trains on plan %s, the dataset's is now %s: its ids are not the current plan's (a changed dataset is a new TrainingDataset); changed: %s",
			s.Fingerprint.Sum, plan.Fingerprint, strings.Join(s.Fingerprint.Diff(plan.inputs), "; ")))
	}
	steps := plan.StepsPerEpoch
	var prev *configmaps.Commit
	for i := range s.History {
		c := &s.History[i]
		if steps > 0 && c.Step > steps {
			out = append(out, fmt.Sprintf("commit %d: step %d passes the epoch's %d steps", i, c.Step, steps))
		}
		if prev != nil {
			switch {
			case c.Epoch < prev.Epoch:
				out = append(out, fmt.Sprintf("commit %d: epoch %d after epoch %d", i, c.Epoch, prev.Epoch))
			case c.Epoch == prev.Epoch && c.Step < prev.Step && !c.Resumed:
				out = append(out, fmt.Sprintf("commit %d: epoch %d step %d after step %d, not a resume", i, c.Epoch, c.Step, prev.Step))
			}
			if g, pg := s.GenerationOf(c.Attempt), s.GenerationOf(prev.Attempt); g > 0 && pg > 0 && g < pg {
				out = append(out, fmt.Sprintf("commit %d: attempt %s (generation %d) after generation %d: a fenced attempt committed", i, c.Attempt, g, pg))
			}
		}
		prev = c
	}
	if prev != nil && (prev.Epoch != s.Epoch || prev.Step != s.Step) {
		out = append(out, fmt.Sprintf("the state says epoch %d step %d, its last commit epoch %d step %d", s.Epoch, s.Step, prev.Epoch, prev.Step))
	}
	return out
}

//go:build integration

package progress_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/progress"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/planner"
)

var apiServer *testenv.APIServer

func TestMain(m *testing.M) {
	var err error
	if apiServer, err = testenv.StartAPIServer(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = apiServer.Stop()
	os.Exit(code)
}

// stores returns one store of each kind for a fresh job.
func stores(t *testing.T) map[string]func() progress.Store {
	t.Helper()
	cs, err := kubernetes.NewForConfig(apiServer.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := apiServer.Namespace(t)
	path := filepath.Join(t.TempDir(), "state.json")
	return map[string]func() progress.Store{
		"file": func() progress.Store {
			s, err := progress.NewFileStore(path)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"configmap": func() progress.Store { return progress.NewConfigMapStore(cs.CoreV1(), ns, "web", "train-1") },
	}
}

var fp = planner.Fingerprint{Sum: "v1-abc", Inputs: map[string]string{"spec.numSplits": "8"}}

func job(attempt string) progress.Job {
	return progress.Job{Dataset: "web", Job: "train-1", Attempt: attempt, Fingerprint: fp, Steps: 100}
}

func TestIntegrationCommitRulesHoldInEveryStore(t *testing.T) {
	for kind, open := range stores(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			st := open()
			if _, err := progress.Register(ctx, st, job("a1")); err != nil {
				t.Fatal(err)
			}
			steps := []struct {
				name    string
				attempt string
				commit  progress.Commit
				refused string // "" : accepted
			}{
				{"first commit", "a1", progress.Commit{Epoch: 0, Step: 10}, ""},
				{"forward", "a1", progress.Commit{Epoch: 0, Step: 20}, ""},
				{"backwards", "a1", progress.Commit{Epoch: 0, Step: 5}, "behind the stored (epoch 0, step 20)"},
				{"backwards from a resumed client", "a1", progress.Commit{Epoch: 0, Step: 15, Resumed: true}, ""},
				{"past the epoch", "a1", progress.Commit{Epoch: 0, Step: 101}, "between 0 and 100"},
				{"next epoch", "a1", progress.Commit{Epoch: 1, Step: 0}, ""},
				{"an attempt never registered", "zz", progress.Commit{Epoch: 1, Step: 3}, `attempt "zz" of job "train-1" is not registered`},
			}
			for _, s := range steps {
				got, err := progress.Apply(ctx, st, job(s.attempt), s.commit)
				if s.refused == "" {
					if err != nil {
						t.Fatalf("%s: %v", s.name, err)
					}
					if got.Epoch != s.commit.Epoch || got.Step != s.commit.Step || got.Attempt != s.attempt {
						t.Fatalf("%s: stored %+v", s.name, got)
					}
					continue
				}
				if !errors.Is(err, progress.ErrRefused) || !strings.Contains(err.Error(), s.refused) {
					t.Fatalf("%s: got %v, want a refusal saying %q", s.name, err, s.refused)
				}
			}
			// A new attempt registers: the old one is fenced.
			if _, err := progress.Register(ctx, st, job("a2")); err != nil {
				t.Fatal(err)
			}
			if _, err := progress.Apply(ctx, st, job("a1"), progress.Commit{Epoch: 1, Step: 9}); err == nil || !strings.Contains(err.Error(), `attempt "a1" (generation 1) is fenced: attempt "a2" (generation 2) of job "train-1" was admitted after it`) {
				t.Fatalf("a fenced attempt committed: %v", err)
			}
			// A second pod of attempt a2 registering does not fence the first.
			if _, err := progress.Register(ctx, open(), job("a2")); err != nil {
				t.Fatal(err)
			}
			got, err := progress.Apply(ctx, open(), job("a2"), progress.Commit{Epoch: 1, Step: 4})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(got.History); n != 5 || got.History[n-1].Step != 4 || got.History[n-1].Attempt != "a2" {
				t.Fatalf("lineage %+v", got.History)
			}
			// Another plan is refused, with what changed.
			other := job("a3")
			other.Fingerprint = planner.Fingerprint{Sum: "v1-def", Inputs: map[string]string{"spec.numSplits": "16"}}
			if _, err := progress.Register(ctx, st, other); err == nil || !strings.Contains(err.Error(), "spec.numSplits: 8, now 16") {
				t.Fatalf("another plan registered: %v", err)
			}
			// A restarted process reads what was committed.
			loaded, err := open().Load(ctx)
			if err != nil || loaded.Epoch != 1 || loaded.Step != 4 || loaded.Newest() != "a2" {
				t.Fatalf("reloaded %+v, %v", loaded, err)
			}
		})
	}
}

// TestIntegrationSchedulePhasesOnlyGrow: a job's state records its
// schedule's phase hashes; a sidecar whose schedule appends phases
// registers, one that changed or dropped a phase the job ran with is
// refused, naming the phase.
func TestIntegrationSchedulePhasesOnlyGrow(t *testing.T) {
	for kind, open := range stores(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			st := open()
			with := func(attempt string, phases ...string) progress.Job {
				j := job(attempt)
				j.Phases = phases
				return j
			}
			got, err := progress.Register(ctx, st, with("a1", "sha256:aa", "sha256:bb"))
			if err != nil || !slices.Equal(got.Phases, []string{"sha256:aa", "sha256:bb"}) {
				t.Fatalf("registered %+v, %v", got, err)
			}
			if got, err = progress.Register(ctx, st, with("a2", "sha256:aa", "sha256:bb", "sha256:cc")); err != nil || len(got.Phases) != 3 {
				t.Fatalf("an appended phase: %+v, %v", got, err)
			}
			// A commit names no phases (the operator's endpoint builds its
			// job from the commit alone): it is not a schedule's change.
			if _, err := progress.Apply(ctx, st, job("a2"), progress.Commit{Epoch: 0, Step: 5}); err != nil {
				t.Fatalf("a commit after a registration with phases: %v", err)
			}
			for _, tc := range []struct {
				phases []string
				says   string
			}{
				{[]string{"sha256:aa", "sha256:xx", "sha256:cc"}, "ran with schedule phase 1 of hash sha256:bb, this sidecar's phase 1 is sha256:xx"},
				{[]string{"sha256:aa", "sha256:bb"}, "ran with 3 schedule phases, this sidecar's schedule has 2"},
			} {
				if _, err := progress.Register(ctx, st, with("a3", tc.phases...)); !errors.Is(err, progress.ErrRefused) || !strings.Contains(err.Error(), tc.says) {
					t.Fatalf("phases %v: got %v, want a refusal saying %q", tc.phases, err, tc.says)
				}
			}
		})
	}
}

// TestIntegrationAPhaseBeforeTheCommittedStepIsRefusedAtRegistration: a
// phase appended before the job's committed step (the webhook's check
// passed, then a commit landed before the sidecar restarted) is refused
// when the sidecar registers, naming the step; the job's state keeps the
// phases it ran with. Before, the resumed job silently never delivered
// the samples of the pass the phase moved (36 in the red team's run).
func TestIntegrationAPhaseBeforeTheCommittedStepIsRefusedAtRegistration(t *testing.T) {
	for kind, open := range stores(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			st := open()
			with := func(attempt string, starts ...int64) progress.Job {
				j := job(attempt)
				for i, s := range starts {
					j.Phases, j.PhaseStarts = append(j.Phases, fmt.Sprintf("sha256:%02d", i)), append(j.PhaseStarts, s)
				}
				return j
			}
			if _, err := progress.Register(ctx, st, with("a1", 10)); err != nil {
				t.Fatal(err)
			}
			if _, err := progress.Apply(ctx, st, job("a1"), progress.Commit{Epoch: 1, Step: 20}); err != nil {
				t.Fatal(err)
			}
			// Committed: global step 1·100 + 20 = 120.
			_, err := progress.Register(ctx, st, with("a2", 10, 119))
			if !errors.Is(err, progress.ErrRefused) || !strings.Contains(err.Error(), "committed global step 120 (epoch 1 step 20 of 100)") ||
				!strings.Contains(err.Error(), "phase 1 (sha256:01) starting at step 119") || !strings.Contains(err.Error(), "start it at step 120 or later") {
				t.Fatalf("a phase before the committed step: %v, want a refusal naming the step", err)
			}
			loaded, err := open().Load(ctx)
			if err != nil || len(loaded.Phases) != 1 {
				t.Fatalf("the state after the refusal: %+v, %v (want the one phase it ran with)", loaded, err)
			}
			// At the committed step or after: registered.
			if got, err := progress.Register(ctx, st, with("a2", 10, 120)); err != nil || len(got.Phases) != 2 {
				t.Fatalf("a phase at the committed step: %+v, %v", got, err)
			}
			// Phases the job already ran with are not checked again.
			if _, err := progress.Register(ctx, st, with("a3", 10, 120)); err != nil {
				t.Fatalf("the same phases again: %v", err)
			}
		})
	}
}

// TestIntegrationOnlyAnAdmittedContractMovesTheJob: through the operator's
// endpoint the attempt and generation are a pod's contract, which a pod's
// author can write: one the state did not record is refused, and a forged
// generation of MaxInt64 neither fences the running job nor overflows the
// next admission (it once made the state unloadable).
func TestIntegrationOnlyAnAdmittedContractMovesTheJob(t *testing.T) {
	for kind, open := range stores(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			st := open()
			if _, err := progress.Admit(ctx, st, "web", "train-1", "a1", "img"); err != nil {
				t.Fatal(err)
			}
			admitted := func(attempt string, gen int64) progress.Job {
				j := job(attempt)
				j.Generation, j.Admitted = gen, true
				return j
			}
			if _, err := progress.Register(ctx, st, admitted("a1", 1)); err != nil {
				t.Fatal(err)
			}
			for _, forged := range []progress.Job{admitted("a1", math.MaxInt64), admitted("zz", math.MaxInt64), admitted("zz", 2), admitted("a1", 2)} {
				if _, err := progress.Register(ctx, st, forged); !errors.Is(err, progress.ErrRefused) || !strings.Contains(err.Error(), "not one the operator admitted") {
					t.Errorf("a forged contract %s/%d registered: %v", forged.Attempt, forged.Generation, err)
				}
				if _, err := progress.Apply(ctx, st, forged, progress.Commit{Epoch: 0, Step: 50}); !errors.Is(err, progress.ErrRefused) {
					t.Errorf("a forged contract %s/%d committed: %v", forged.Attempt, forged.Generation, err)
				}
				if _, err := progress.RecordAdmittedSkip(ctx, st, forged, configmaps.SkippedShard{Stream: "s", Shard: "x", Samples: 3}); !errors.Is(err, progress.ErrRefused) {
					t.Errorf("a forged contract %s/%d recorded a skip: %v", forged.Attempt, forged.Generation, err)
				}
			}
			if got, err := progress.Apply(ctx, st, admitted("a1", 1), progress.Commit{Epoch: 0, Step: 5}); err != nil || got.Generation != 1 {
				t.Fatalf("the admitted attempt after the forgeries: %+v, %v", got, err)
			}
			// The next admission counts on from the real generation.
			got, err := progress.Admit(ctx, st, "web", "train-1", "a2", "img")
			if err != nil || got.GenerationOf("a2") != 2 {
				t.Fatalf("the next admission: %+v, %v", got, err)
			}
			// A sidecar of its own (serve) with a generation past the bound.
			if _, err := progress.Register(ctx, st, func() progress.Job { j := job("a3"); j.Generation = math.MaxInt64; return j }()); !errors.Is(err, progress.ErrRefused) {
				t.Errorf("a generation of MaxInt64: %v", err)
			}
			if _, err := progress.RecordSkip(ctx, st, configmaps.SkippedShard{Stream: "s", Shard: "x", Samples: math.MaxInt64}); !errors.Is(err, progress.ErrRefused) {
				t.Errorf("a skipped shard of MaxInt64 samples: %v", err)
			}
			if loaded, err := open().Load(ctx); err != nil || loaded.Generation != 2 || loaded.Step != 5 {
				t.Fatalf("the state: %+v, %v", loaded, err)
			}
		})
	}
}

// TestIntegrationFencingIsPermanent: however many attempts come after it,
// an attempt's sidecar that restarts with its generation (from its pod's
// spec) neither registers nor commits, and the newest keeps committing
// (hardening issue, finding 5: the bounded attempt list once let the 17th
// older attempt back in).
func TestIntegrationFencingIsPermanent(t *testing.T) {
	for kind, open := range stores(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			st := open()
			admit := func(attempt string) progress.Job {
				s, err := progress.Admit(ctx, st, "web", "train-1", attempt, "img")
				if err != nil {
					t.Fatal(err)
				}
				j := job(attempt)
				j.Generation = s.GenerationOf(attempt)
				if _, err := progress.Register(ctx, st, j); err != nil {
					t.Fatal(err)
				}
				return j
			}
			old := admit("old")
			if _, err := progress.Apply(ctx, st, old, progress.Commit{Epoch: 0, Step: 5}); err != nil {
				t.Fatal(err)
			}
			var newest progress.Job
			const attempts = 10 * configmaps.MaxAttempts
			for i := range attempts {
				newest = admit(fmt.Sprintf("a%d", i))
			}
			if newest.Generation != attempts+1 {
				t.Fatalf("the newest attempt has generation %d, want %d", newest.Generation, attempts+1)
			}
			for what, err := range map[string]error{
				"registers again": func() error { _, err := progress.Register(ctx, st, old); return err }(),
				"commits":         func() error { _, err := progress.Apply(ctx, st, old, progress.Commit{Epoch: 0, Step: 9}); return err }(),
			} {
				if !errors.Is(err, progress.ErrRefused) || !strings.Contains(err.Error(), `attempt "old" (generation 1) is fenced`) {
					t.Errorf("the first attempt %s after %d newer ones: %v", what, attempts, err)
				}
			}
			got, err := progress.Apply(ctx, st, newest, progress.Commit{Epoch: 0, Step: 9})
			if err != nil || got.Step != 9 || got.Attempt != newest.Attempt {
				t.Fatalf("the newest attempt's commit: %+v, %v", got, err)
			}
			if len(got.Attempts) > configmaps.MaxAttempts {
				t.Errorf("the state lists %d attempts, at most %d", len(got.Attempts), configmaps.MaxAttempts)
			}
		})
	}
}

func TestIntegrationConcurrentCommitsNeverLoseTheNewest(t *testing.T) {
	for kind, open := range stores(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			if _, err := progress.Register(ctx, open(), job("a1")); err != nil {
				t.Fatal(err)
			}
			// Eight sidecars of one attempt commit steps 1..40 at once;
			// whatever the interleaving, the stored step is 40 and every
			// accepted commit is in order in the history.
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					st := open()
					for k := int64(w + 1); k <= 40; k += 8 {
						_, err := progress.Apply(ctx, st, job("a1"), progress.Commit{Epoch: 0, Step: k})
						if err != nil && !errors.Is(err, progress.ErrRefused) {
							t.Error(err)
						}
					}
				}()
			}
			wg.Wait()
			got, err := open().Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got.Step != 40 {
				t.Fatalf("stored step %d after commits up to 40", got.Step)
			}
			for i := 1; i < len(got.History); i++ {
				if got.History[i].Step < got.History[i-1].Step {
					t.Fatalf("history goes back: %+v", got.History)
				}
			}
		})
	}
}

func TestIntegrationStateConfigMapHasTheDocumentedLayout(t *testing.T) {
	cs, err := kubernetes.NewForConfig(apiServer.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	st := progress.NewConfigMapStore(cs.CoreV1(), ns, "web", "train-1")
	if _, err := progress.Register(ctx, st, job("a1")); err != nil {
		t.Fatal(err)
	}
	if _, err := progress.Apply(ctx, st, job("a1"), progress.Commit{Epoch: 2, Step: 7}); err != nil {
		t.Fatal(err)
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, configmaps.StateName("web", "train-1"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Labels[configmaps.LabelDataset] != "web" || cm.Labels[configmaps.LabelJob] != "train-1" {
		t.Fatalf("labels %v", cm.Labels)
	}
	s, err := configmaps.StateFromData(cm.Data)
	if err != nil {
		t.Fatal(err)
	}
	if s.Layout != configmaps.LayoutVersion || s.Epoch != 2 || s.Step != 7 || s.Fingerprint.Sum != fp.Sum || s.PlanVersion != fp.Version() {
		t.Fatalf("state %+v", s)
	}
}

func TestIntegrationTheStoreNeverAdoptsAConfigMapShardfeedDidNotCreate(t *testing.T) {
	cs, err := kubernetes.NewForConfig(apiServer.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	name := configmaps.StateName("web", "train-1")
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"state.json": "theirs"}}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st := progress.NewConfigMapStore(cs.CoreV1(), ns, "web", "train-1")
	var notOwned *progress.NotOwnedError
	if _, err := st.Load(ctx); !errors.As(err, &notOwned) || !strings.Contains(err.Error(), name) {
		t.Errorf("Load: %v", err)
	}
	if _, err := progress.Register(ctx, st, job("a1")); !errors.As(err, &notOwned) {
		t.Errorf("Register: %v", err)
	}
	got, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || got.Data["state.json"] != "theirs" || got.ResourceVersion == "" {
		t.Fatalf("their ConfigMap after the attempts: %+v, %v", got, err)
	}
	// Where the operator must have made the state, a missing one is
	// refused, not created.
	missing := progress.NewConfigMapStore(cs.CoreV1(), ns, "web", "never-admitted")
	missing.MustExist = true
	if _, err := progress.Register(ctx, missing, job("a1")); !errors.Is(err, progress.ErrNoState) {
		t.Errorf("Register without a state: %v", err)
	}
}

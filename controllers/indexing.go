package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/bytesize"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/index/sidefile"
	"github.com/shardfeed/shardfeed/internal/indexjob"
	"github.com/shardfeed/shardfeed/internal/planspec"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/streams"
)

// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;update;patch;delete

// missingIndexError is a stream with no index where its dataset's
// indexes were read.
type missingIndexError struct {
	stream int
	err    error
	// beside: the stream has its index, and lacks what is measured
	// beside it (a filter's selection, packs, buckets, token counts).
	beside bool
}

// missingBeside says whether err is a stream's that lacks a file beside
// its index: a filter's or a bucket's selection, or its packs.
func missingBeside(err error) bool {
	return errors.Is(err, sidefile.ErrNoSelection) || errors.Is(err, sidefile.ErrNoPacks) || errors.Is(err, sidefile.ErrNoLengths)
}

// tokensCounted refuses a tokenized stream whose tokens are not counted
// over its index (index -f's lengths of its tokenize output): the
// operator counts them for a stream it indexes, as index -f does.
func tokensCounted(ctx context.Context, st *streams.Stream) error {
	t := st.Tokenize
	if t == nil || st.Layout == nil || st.Packs != nil || st.Lanes != nil {
		return nil // none to count, or counted: its packs and buckets were read
	}
	key, _ := sidefile.LengthsObjects(planspec.TokenizeOutput(t), sidefile.Elements, st.Spec.Filter, planspec.TokenizeKey(t))
	// The index it was counted over is in the head of the lengths'
	// index, before its shards: the head alone is read.
	body, err := st.IndexStore.Get(ctx, key, 0, lengthsHeadBytes)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("stream %q: %w: its tokens are not counted yet (%s)", st.Spec.Name, sidefile.ErrNoLengths, indexfile.ObjectURI(st.IndexStore, key))
	}
	if err != nil {
		return err
	}
	defer func() { _ = body.Close() }()
	if over, ok := jsonField(io.LimitReader(body, lengthsHeadBytes), "index"); !ok || over != st.Index.ContentHash() {
		return fmt.Errorf("stream %q: %w: its tokens were counted over another index (%s)", st.Spec.Name, sidefile.ErrNoLengths, indexfile.ObjectURI(st.IndexStore, key))
	}
	return nil
}

// lengthsHeadBytes bounds the head of a lengths' index read for the index
// it is of.
const lengthsHeadBytes = 64 << 10

// jsonField is the string value of a top-level field of the JSON object
// r starts, read token by token up to it.
func jsonField(r io.Reader, name string) (string, bool) {
	dec := json.NewDecoder(r)
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return "", false
		}
		if t == name {
			var s string
			return s, json.Unmarshal(v, &s) == nil
		}
	}
	return "", false
}

func (e *missingIndexError) Error() string { return e.err.Error() }
func (e *missingIndexError) Unwrap() error { return e.err }

// missingIndexesError is the streams without an index that spec.index
// covers, where every other stream's index was read.
type missingIndexesError struct {
	streams []*missingIndexError
}

func (e *missingIndexesError) Error() string {
	msgs := make([]string, len(e.streams))
	for i, m := range e.streams {
		msgs[i] = m.Error()
	}
	return strings.Join(msgs, "; ")
}

// indexedInCluster says whether spec.index covers stream i: the operator
// then indexes it with Jobs rather than waiting for someone to.
func indexedInCluster(ds *datav1alpha1.TrainingDataset, i int) bool {
	x := ds.Spec.Index
	if x == nil || i < 0 || i >= len(ds.Spec.Streams) {
		return false
	}
	s := ds.Spec.Streams[i]
	if s.Format == datav1alpha1.FormatMDS || s.Format == "" {
		return false // MDS keeps its own index
	}
	return len(x.Streams) == 0 || slices.Contains(x.Streams, s.Name)
}

// indexMissing starts or moves on the Jobs indexing each stream whose
// index err says is missing (every one spec.index covers), and says where
// they stand in status.indexing, status.indexed and the conditions;
// handled is false for any other error.
func (r *TrainingDatasetReconciler) indexMissing(ctx context.Context, ds *datav1alpha1.TrainingDataset, err error) (res reconcile.Result, handled bool, _ error) {
	var missing *missingIndexesError
	if !errors.As(err, &missing) {
		return reconcile.Result{}, false, nil
	}
	before := map[string]datav1alpha1.StreamIndexing{}
	for _, x := range ds.Status.Indexing {
		before[x.Name] = x
	}
	var (
		states         []datav1alpha1.StreamIndexing
		failed, going  []string
		bytes, bytesIn int64
	)
	for _, m := range missing.streams {
		name := ds.Spec.Streams[m.stream].Name
		advance := r.advanceIndexing
		if m.beside {
			advance = func(ctx context.Context, ds *datav1alpha1.TrainingDataset, i int, before datav1alpha1.StreamIndexing) (indexingState, error) {
				return r.advanceMeasuring(ctx, ds, i, before, m.err)
			}
		}
		state, err := advance(ctx, ds, m.stream, before[name])
		if err != nil {
			return reconcile.Result{}, true, err
		}
		states = append(states, state.StreamIndexing)
		bytes, bytesIn = bytes+state.Bytes, bytesIn+state.BytesRead
		if state.failed != "" {
			failed = append(failed, fmt.Sprintf("stream %q: %s", name, state.failed))
		} else {
			what := "has no index"
			if m.beside {
				what = "has its index, and not yet what is measured beside it"
			}
			going = append(going, fmt.Sprintf("stream %q %s: %s", name, what, state.doing))
		}
	}
	r.indexed(ds, states)
	ds.Status.Indexed = fmt.Sprintf("%d/%d", len(ds.Spec.Streams)-len(states), len(ds.Spec.Streams))
	if bytes > 0 {
		ds.Status.Indexed += fmt.Sprintf(", %d%%", bytesIn*100/bytes)
	}
	waiting := cause{datav1alpha1.ReasonWaitingForIndex, "the plan needs every stream's index"}
	if len(failed) > 0 {
		msg := strings.Join(append(failed, going...), "; ")
		r.setCondition(ds, datav1alpha1.ConditionIndexResolved, metav1.ConditionFalse, datav1alpha1.ReasonIndexingFailed, msg)
		r.setReady(ds, waiting, cause{datav1alpha1.ReasonIndexingFailed, msg})
		if len(going) == 0 {
			return reconcile.Result{}, true, nil // the Job's deletion or a spec change brings the next try
		}
		return reconcile.Result{RequeueAfter: r.retry()}, true, nil
	}
	msg := strings.Join(going, "; ")
	r.setCondition(ds, datav1alpha1.ConditionIndexResolved, metav1.ConditionFalse, datav1alpha1.ReasonIndexing, msg)
	r.setReady(ds, waiting, cause{datav1alpha1.ReasonIndexing, msg})
	// The Jobs' changes bring the next reconcile; this one is a floor,
	// and the parts' progress is read again then.
	return reconcile.Result{RequeueAfter: min(r.retry(), indexProgressEvery)}, true, nil
}

// indexProgressEvery is how often a dataset being indexed is reconciled
// at least, its parts' progress read.
const indexProgressEvery = 15 * time.Second

// indexed sets status.indexing to the streams still indexing, reporting
// each stream the status showed that has its index now with an event;
// with none still indexing, status.indexed says every stream is.
func (r *TrainingDatasetReconciler) indexed(ds *datav1alpha1.TrainingDataset, still []datav1alpha1.StreamIndexing) {
	for _, x := range ds.Status.Indexing {
		if r.Recorder == nil || x.Phase == datav1alpha1.IndexingFailed || x.Phase == datav1alpha1.IndexingChecking || x.Phase == datav1alpha1.IndexingHeld || slices.ContainsFunc(still, func(s datav1alpha1.StreamIndexing) bool { return s.Name == x.Name }) {
			continue
		}
		took := ""
		if x.StartTime != nil {
			took = " in " + time.Since(x.StartTime.Time).Round(time.Second).String()
		}
		if x.Phase == datav1alpha1.IndexingMeasuring || x.Phase == datav1alpha1.IndexingJoining {
			indexed := ""
			if x.Objects > 0 {
				indexed = fmt.Sprintf(" indexed: %d objects (%s);", x.Objects, bytesize.Human(x.Bytes))
			}
			r.Recorder.Eventf(ds, streamJob(ds, x.Name, x.Job), corev1.EventTypeNormal, datav1alpha1.ReasonIndexRead, "Index", "stream %q%s measured by the operator in %d parts (what its filter, packing, bucketing or tokenize needs beside its index)%s",
				x.Name, indexed, x.Parts, took)
			continue
		}
		r.Recorder.Eventf(ds, streamJob(ds, x.Name, x.Job), corev1.EventTypeNormal, datav1alpha1.ReasonIndexRead, "Index", "stream %q indexed by the operator: %d objects (%s) in %d parts%s",
			x.Name, x.Objects, bytesize.Human(x.Bytes), x.Parts, took)
	}
	ds.Status.Indexing = still
	if len(still) == 0 {
		ds.Status.Indexed = fmt.Sprintf("%d/%d", len(ds.Spec.Streams), len(ds.Spec.Streams))
	}
}

// streamJob is a stream's indexing Job (job, or its listing's where the
// status names none) as an event's related object: events.k8s.io merges
// the events of one object, reason and action into a series whatever
// their notes, so each stream's events name its own Job to stay apart.
func streamJob(ds *datav1alpha1.TrainingDataset, stream, job string) *batchv1.Job {
	if job == "" {
		job = indexjob.JobName(ds.Name, stream, indexjob.List)
	}
	return &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}, ObjectMeta: metav1.ObjectMeta{Namespace: ds.Namespace, Name: job}}
}

// indexingState is where a stream's indexing stands: as the status shows
// it, what it is doing, and, where it stopped, why.
type indexingState struct {
	datav1alpha1.StreamIndexing
	doing, failed string
}

// advanceIndexing moves stream i's indexing on by one step and says where
// it stands (before is what the status said). Level-based: it goes by the
// Jobs there are, the last phase's first, since a later phase needs none
// of the Jobs before it (they may be gone by ttlSecondsAfterFinished): a
// Job failed stops the indexing, saying why; one complete has the next
// phase's created (or, with spec.index.suspend, not yet); one running is
// suspended or resumed with spec.index.suspend.
func (r *TrainingDatasetReconciler) advanceIndexing(ctx context.Context, ds *datav1alpha1.TrainingDataset, i int, before datav1alpha1.StreamIndexing) (indexingState, error) {
	stream := ds.Spec.Streams[i].Name
	state := indexingState{StreamIndexing: datav1alpha1.StreamIndexing{Name: stream, StartTime: before.StartTime,
		Parts: before.Parts, Objects: before.Objects, Bytes: before.Bytes}}
	phases := indexPhases
	if !indexjob.InParts(ds, i) {
		phases = []indexjob.Phase{indexjob.Whole}
	}
	jobs, err := r.indexJobs(ctx, ds, stream)
	if err != nil {
		return indexingState{}, err
	}
	for _, phase := range phases {
		job := jobs[phase]
		switch {
		case job == nil:
			continue
		case !metav1.IsControlledBy(job, ds):
			return state.stop(phase, job.Name, fmt.Sprintf("the Job %s is not this dataset's: delete or rename it", job.Name)), nil
		case job.DeletionTimestamp != nil:
			// Deleted to start over: the next one waits for it to go.
			state.show(phase, job.Name, false)
			state.doing = fmt.Sprintf("the operator waits for the Job %s to go, to start over", job.Name)
			return state, nil
		}
		if phase == phases[0] && state.StartTime == nil {
			state.StartTime = ptr.To(job.CreationTimestamp)
		}
	}
	last := -1
	for k, phase := range phases {
		if jobs[phase] != nil {
			last = k
		}
	}
	if last < 0 {
		// A measuring of an earlier index is of no use to this one.
		if err := r.deleteIndexJobsOf(ctx, ds, stream, indexjob.Measure, indexjob.Join); err != nil {
			return indexingState{}, err
		}
		return r.startPhase(ctx, ds, i, state, indexjob.Input{Stream: i, Phase: phases[0]})
	}
	phase, job := phases[last], jobs[phases[last]]
	if why, failed := jobFailed(job); failed {
		return r.failedJob(ctx, ds, i, state, phase, job, why, "the parts written stay"), nil
	}
	if !jobComplete(job) {
		if err := r.suspendIndexJob(ctx, ds, job); err != nil {
			return indexingState{}, err
		}
		state.show(phase, job.Name, ds.Spec.Index.Suspend)
		if phase == indexjob.Merge { // the parts are done
			state.PartsDone, state.ObjectsRead, state.BytesRead = state.Parts, state.Objects, state.Bytes
		}
		if phase == indexjob.Parts {
			if err := r.readIndexProgress(ctx, ds, i, job, &state); err != nil {
				log.FromContext(ctx).Info("The indexing's progress could not be read", "stream", stream, "err", err.Error())
			}
		}
		return state, nil
	}
	switch phase {
	case indexjob.List:
		listed, err := r.readListed(ctx, ds, i)
		if err != nil {
			return state.stop(phase, job.Name, fmt.Sprintf("the Job %s completed, and its listing cannot be read (%v): delete the Job to list again", job.Name, err)), nil
		}
		if listed.Unchanged { // a check's, of an index gone since: list again
			return r.deleteIndexJobs(ctx, ds, stream, state)
		}
		parts := int32(listed.Parts) //nolint:gosec // at most indexjob.MaxParts (readListed)
		state.Parts, state.Objects, state.Bytes = parts, listed.Objects, listed.Bytes
		return r.startPhase(ctx, ds, i, state, indexjob.Input{Stream: i, Phase: indexjob.Parts, Parts: parts, Run: listed.Run})
	case indexjob.Parts:
		state.PartsDone, state.ObjectsRead, state.BytesRead = state.Parts, state.Objects, state.Bytes
		return r.startPhase(ctx, ds, i, state, indexjob.Input{Stream: i, Phase: indexjob.Merge, Parts: ptr.Deref(job.Spec.Completions, 1), Run: indexjob.RunOf(job)})
	}
	// Every phase complete and still no index: the merge wrote it
	// elsewhere, or it was removed since. The Jobs go, and the next
	// reconcile starts over from the parts there are.
	return r.deleteIndexJobs(ctx, ds, stream, state)
}

// failedJob is the state of stream i stopped at its Job of phase, failed
// for why: what its pod recorded, and how to go on (kept: what a retry
// keeps).
func (r *TrainingDatasetReconciler) failedJob(ctx context.Context, ds *datav1alpha1.TrainingDataset, i int, state indexingState, phase indexjob.Phase,
	job *batchv1.Job, why, kept string) indexingState {
	said := ""
	if f, ok := r.readFailure(ctx, ds, i, phase, job); ok {
		said = " " + f
	}
	return state.stop(phase, job.Name, fmt.Sprintf("the Job %s failed (%s):%s; fix the cause, then delete the Job to try again (%s); kubectl logs -n %s job/%s says more",
		job.Name, why, said, kept, ds.Namespace, job.Name))
}

// indexPhases are the phases of a stream's indexing, in order; the
// Measure and Join phases follow (advanceMeasuring).
var indexPhases = []indexjob.Phase{indexjob.List, indexjob.Parts, indexjob.Merge}

// advanceMeasuring moves on the Jobs measuring, in parts, what stream i
// needs beside its index (missing says what): its filter's selection, its
// lengths and token counts, its buckets' selections and packs. Level-based
// as advanceIndexing; a Job of an earlier measuring (another filter,
// packing, bucketing or tokenize) is deleted first.
func (r *TrainingDatasetReconciler) advanceMeasuring(ctx context.Context, ds *datav1alpha1.TrainingDataset, i int, before datav1alpha1.StreamIndexing, missing error) (indexingState, error) {
	stream := ds.Spec.Streams[i].Name
	// The index is done: what its listing found is read.
	state := indexingState{StreamIndexing: datav1alpha1.StreamIndexing{Name: stream, StartTime: before.StartTime,
		Objects: before.Objects, Bytes: before.Bytes, ObjectsRead: before.Objects, BytesRead: before.Bytes}}
	jobs, err := r.indexJobs(ctx, ds, stream)
	if err != nil {
		return indexingState{}, err
	}
	key := measuringKey(ds, i)
	var stale []indexjob.Phase
	for _, phase := range []indexjob.Phase{indexjob.Measure, indexjob.Join} {
		job := jobs[phase]
		switch {
		case job == nil:
		case !metav1.IsControlledBy(job, ds):
			return state.stop(phase, job.Name, fmt.Sprintf("the Job %s is not this dataset's: delete or rename it", job.Name)), nil
		case job.DeletionTimestamp != nil:
			state.show(phase, job.Name, false)
			state.doing = fmt.Sprintf("the operator waits for the Job %s to go, to start over", job.Name)
			return state, nil
		case indexjob.MeasuringOf(job) != key:
			stale = append(stale, phase)
		}
	}
	if len(stale) > 0 {
		if err := r.deleteIndexJobsOf(ctx, ds, stream, stale...); err != nil {
			return indexingState{}, err
		}
		state.show(indexjob.Measure, "", false)
		state.doing = "the operator removes the Jobs of an earlier measuring (of another filter, packing, bucketing or tokenize)"
		return state, nil
	}
	measure, join := jobs[indexjob.Measure], jobs[indexjob.Join]
	switch {
	case join != nil && measure != nil && join.CreationTimestamp.Before(&measure.CreationTimestamp):
		// A Join of the measuring before this one: its parts are joined.
		if err := r.deleteIndexJobsOf(ctx, ds, stream, indexjob.Join); err != nil {
			return indexingState{}, err
		}
		state.show(indexjob.Measure, measure.Name, false)
		state.doing = fmt.Sprintf("the operator removes the Job %s of an earlier join", join.Name)
		return state, nil
	case join != nil && measure == nil && jobComplete(join):
		// Joined, its Measure Job gone (deleted to measure again, or by
		// its ttlSecondsAfterFinished), and the files missing: measured
		// again, from the start.
		if err := r.deleteIndexJobsOf(ctx, ds, stream, indexjob.Join); err != nil {
			return indexingState{}, err
		}
		state.show(indexjob.Measure, "", false)
		state.doing = fmt.Sprintf("the operator removes the Job %s, to measure again", join.Name)
		return state, nil
	}
	phase, job := indexjob.Join, join
	if job == nil {
		phase, job = indexjob.Measure, measure
	}
	if job == nil {
		parts := ptr.Deref(ds.Spec.Index.Parallelism, datav1alpha1.DefaultIndexParallelism)
		state.Parts = parts
		return r.startPhase(ctx, ds, i, state, indexjob.Input{Stream: i, Phase: indexjob.Measure, Parts: parts, Measuring: key})
	}
	// The measuring's parts, and those done (each part a completion of
	// the Measure Job; the Join's come after them all).
	state.Parts = ptr.Deref(job.Spec.Completions, 1)
	state.PartsDone = job.Status.Succeeded
	if phase == indexjob.Join {
		state.Parts = ptr.Deref(indexjob.PartsOf(job), 1)
		state.PartsDone = state.Parts
	}
	if why, failed := jobFailed(job); failed {
		return r.failedJob(ctx, ds, i, state, phase, job, why, "the parts measured stay"), nil
	}
	if !jobComplete(job) {
		if err := r.suspendIndexJob(ctx, ds, job); err != nil {
			return indexingState{}, err
		}
		state.show(phase, job.Name, ds.Spec.Index.Suspend)
		return state, nil
	}
	if phase == indexjob.Measure {
		state.PartsDone = state.Parts
		return r.startPhase(ctx, ds, i, state, indexjob.Input{Stream: i, Phase: indexjob.Join, Parts: ptr.Deref(job.Spec.Completions, 1), Measuring: key})
	}
	// Joined, and still missing: not started over by itself (it would
	// measure again and again); a person looks.
	return state.stop(phase, job.Name, fmt.Sprintf("the Job %s completed, and the stream still lacks what is measured beside its index (%v): delete the Job %s to measure again", job.Name, missing, measure.Name)), nil
}

// measuringKey names what stream i's Measure and Join Jobs measure: its
// filter, the dataset's packing and bucketing, its tokenize.
func measuringKey(ds *datav1alpha1.TrainingDataset, i int) string {
	s := planspec.Resolved(&ds.Spec, i)
	data, _ := json.Marshal(struct {
		Filter    string
		Packing   *datav1alpha1.Packing
		Bucketing *datav1alpha1.Bucketing
		Tokenize  *datav1alpha1.Tokenize
	}{s.Filter, ds.Spec.Packing, ds.Spec.Bucketing, s.Tokenize})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// indexJobs gets the Jobs there are of a stream's indexing and measuring,
// by phase (whoever's they are: the callers look).
func (r *TrainingDatasetReconciler) indexJobs(ctx context.Context, ds *datav1alpha1.TrainingDataset, stream string) (map[indexjob.Phase]*batchv1.Job, error) {
	jobs := map[indexjob.Phase]*batchv1.Job{}
	for _, phase := range indexjob.Phases {
		job := &batchv1.Job{}
		switch err := r.Get(ctx, client.ObjectKey{Namespace: ds.Namespace, Name: indexjob.JobName(ds.Name, stream, phase)}, job); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, err
		default:
			jobs[phase] = job
		}
	}
	return jobs, nil
}

// deleteIndexJobs deletes a stream's indexing Jobs, for the next
// reconcile to start over (from the parts there are).
func (r *TrainingDatasetReconciler) deleteIndexJobs(ctx context.Context, ds *datav1alpha1.TrainingDataset, stream string, state indexingState) (indexingState, error) {
	if err := r.deleteIndexJobsOf(ctx, ds, stream, indexjob.Phases...); err != nil {
		return indexingState{}, err
	}
	state.show(indexjob.List, "", false)
	return state, nil
}

// deleteIndexJobsOf deletes a stream's Jobs of phases, where there are.
func (r *TrainingDatasetReconciler) deleteIndexJobsOf(ctx context.Context, ds *datav1alpha1.TrainingDataset, stream string, phases ...indexjob.Phase) error {
	for _, phase := range phases {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ds.Namespace, Name: indexjob.JobName(ds.Name, stream, phase)}}
		if err := r.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// show sets the state of a Job of phase running (or suspended).
func (s *indexingState) show(phase indexjob.Phase, job string, suspended bool) {
	s.Phase = map[indexjob.Phase]string{indexjob.Whole: datav1alpha1.IndexingParts, indexjob.List: datav1alpha1.IndexingListing, indexjob.Parts: datav1alpha1.IndexingParts,
		indexjob.Merge: datav1alpha1.IndexingMerging, indexjob.Measure: datav1alpha1.IndexingMeasuring, indexjob.Join: datav1alpha1.IndexingJoining}[phase]
	s.Job = job
	step := map[indexjob.Phase]string{indexjob.Whole: "indexing it in one pod (its format is not indexed in parts)", indexjob.List: "listing its objects", indexjob.Parts: "indexing its parts", indexjob.Merge: "merging its parts",
		indexjob.Measure: "measuring its selection, lengths and tokens in parts", indexjob.Join: "joining what its parts measured"}[phase]
	s.doing = fmt.Sprintf("the operator is %s (Job %s)", step, job)
	if suspended {
		s.Phase = datav1alpha1.IndexingSuspended
		s.doing = fmt.Sprintf("its indexing is suspended (spec.index.suspend) before %s", step)
	}
}

// stop sets the state of an indexing stopped at a Job of phase, for why.
func (s indexingState) stop(phase indexjob.Phase, job, why string) indexingState {
	s.show(phase, job, false)
	s.Phase, s.failed = datav1alpha1.IndexingFailed, why
	return s
}

// startPhase creates stream i's Job of in's phase (unless
// spec.index.suspend holds it back).
func (r *TrainingDatasetReconciler) startPhase(ctx context.Context, ds *datav1alpha1.TrainingDataset, i int, state indexingState, in indexjob.Input) (indexingState, error) {
	phase := in.Phase
	name := indexjob.JobName(ds.Name, ds.Spec.Streams[i].Name, phase)
	if ds.Spec.Index.Suspend {
		state.show(phase, "", true)
		return state, nil
	}
	refused, err := r.createIndexJob(ctx, ds, in)
	if err != nil || refused != "" {
		return state.stop(phase, name, refused), err
	}
	if state.StartTime == nil {
		state.StartTime = ptr.To(metav1.Now())
	}
	state.show(phase, name, false)
	return state, nil
}

// suspendIndexJob suspends or resumes a Job not complete as
// spec.index.suspend says (a queued Job is Kueue's to resume).
func (r *TrainingDatasetReconciler) suspendIndexJob(ctx context.Context, ds *datav1alpha1.TrainingDataset, job *batchv1.Job) error {
	suspend := ds.Spec.Index.Suspend
	if ptr.Deref(job.Spec.Suspend, false) == suspend || !suspend && ds.Spec.Index.QueueName != "" {
		return nil
	}
	patch := client.MergeFrom(job.DeepCopy())
	job.Spec.Suspend = ptr.To(suspend)
	return r.Patch(ctx, job, patch)
}

// createIndexJob creates stream i's Job of phase (of parts pods for the
// parts), with the manifest its pods read; refused says why a Job cannot
// be made of the dataset as it is (waiting for a change, not retried).
func (r *TrainingDatasetReconciler) createIndexJob(ctx context.Context, ds *datav1alpha1.TrainingDataset, in indexjob.Input) (refused string, _ error) {
	in.Dataset, in.Image, in.PullSecrets, in.Audiences = ds, r.IndexImage, r.IndexPullSecrets, r.Policy.AllowedAudiences
	in.AllowedEndpoints, in.AllowCloudEndpoints = r.Policy.AllowedEndpoints, r.Policy.AllowCloudEndpoints
	i, phase := in.Stream, in.Phase
	job, err := indexjob.Build(in)
	if err != nil {
		return fmt.Sprintf("its %s Job cannot be made: %v", phase, err), nil
	}
	if err := r.applyIndexManifest(ctx, ds); err != nil {
		return "", err
	}
	if err := r.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating the indexing Job %s: %w", job.Name, err)
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(ds, job, corev1.EventTypeNormal, datav1alpha1.ReasonIndexing, "Index", "stream %q: %s: Job %s", ds.Spec.Streams[i].Name, phase, job.Name)
	}
	return "", nil
}

// applyIndexManifest writes the ConfigMap holding the dataset's manifest
// as the indexing pods read it (shardfeed index -f): its name, namespace
// and spec, each workload identity as its ServiceAccount's annotations
// resolve it (what a sidecar's plan carries), nothing of its status or
// metadata beyond.
func (r *TrainingDatasetReconciler) applyIndexManifest(ctx context.Context, ds *datav1alpha1.TrainingDataset) error {
	spec := ds.Spec.DeepCopy()
	for i := range spec.Streams {
		var err error
		if spec.Streams[i].Source, err = r.resolveIdentity(ctx, ds.Namespace, &spec.Streams[i]); err != nil {
			return err
		}
	}
	manifest, err := json.Marshal(struct {
		APIVersion string                           `json:"apiVersion"`
		Kind       string                           `json:"kind"`
		Metadata   map[string]string                `json:"metadata"`
		Spec       datav1alpha1.TrainingDatasetSpec `json:"spec"`
	}{datav1alpha1.GroupVersion.String(), "TrainingDataset", map[string]string{"name": ds.Name, "namespace": ds.Namespace}, *spec})
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: indexjob.ManifestConfigMap(ds.Name), Namespace: ds.Namespace,
			Labels:          map[string]string{configmaps.LabelManagedBy: configmaps.ManagedBy, configmaps.LabelDataset: ds.Name},
			OwnerReferences: []metav1.OwnerReference{datasetOwner(ds)}},
		Data: map[string]string{indexjob.ManifestKey: string(manifest)},
	}
	var have corev1.ConfigMap
	switch err := r.Get(ctx, client.ObjectKeyFromObject(cm), &have); {
	case apierrors.IsNotFound(err):
		return r.Create(ctx, cm)
	case err != nil:
		return err
	case !metav1.IsControlledBy(&have, ds):
		return fmt.Errorf("the ConfigMap %s is not this dataset's: shardfeed writes its indexing manifest there; delete or rename it", cm.Name)
	case have.Data[indexjob.ManifestKey] == cm.Data[indexjob.ManifestKey]:
		return nil
	}
	have.Data = cm.Data
	return r.Update(ctx, &have)
}

// jobFailed says whether a Job failed, and its condition's reason.
func jobFailed(job *batchv1.Job) (string, bool) {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return c.Reason, true
		}
	}
	return "", false
}

// jobComplete says whether a Job completed.
func jobComplete(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/shardfeed/shardfeed/internal/indexjob"
)

// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;update;patch;delete

// missingIndexError is a stream with no index where its dataset's
// indexes were read.
type missingIndexError struct {
	stream int
	err    error
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
		state, err := r.advanceIndexing(ctx, ds, m.stream, before[name])
		if err != nil {
			return reconcile.Result{}, true, err
		}
		states = append(states, state.StreamIndexing)
		bytes, bytesIn = bytes+state.Bytes, bytesIn+state.BytesRead
		if state.failed != "" {
			failed = append(failed, fmt.Sprintf("stream %q: %s", name, state.failed))
		} else {
			going = append(going, fmt.Sprintf("stream %q has no index: %s", name, state.doing))
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
		r.Recorder.Eventf(ds, nil, corev1.EventTypeNormal, datav1alpha1.ReasonIndexRead, "Index", "stream %q indexed by the operator: %d objects (%s) in %d parts%s",
			x.Name, x.Objects, bytesize.Human(x.Bytes), x.Parts, took)
	}
	ds.Status.Indexing = still
	if len(still) == 0 {
		ds.Status.Indexed = fmt.Sprintf("%d/%d", len(ds.Spec.Streams), len(ds.Spec.Streams))
	}
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
		if phase == indexjob.List && state.StartTime == nil {
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
		return r.startPhase(ctx, ds, i, state, indexjob.List, 0, "")
	}
	phase, job := phases[last], jobs[phases[last]]
	if why, failed := jobFailed(job); failed {
		said := ""
		if f, ok := r.readFailure(ctx, ds, i, phase, job); ok {
			said = " " + f
		}
		return state.stop(phase, job.Name, fmt.Sprintf("the Job %s failed (%s):%s; fix the cause, then delete the Job to try again (the parts written stay); kubectl logs -n %s job/%s says more",
			job.Name, why, said, ds.Namespace, job.Name)), nil
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
		return r.startPhase(ctx, ds, i, state, indexjob.Parts, parts, listed.Run)
	case indexjob.Parts:
		state.PartsDone, state.ObjectsRead, state.BytesRead = state.Parts, state.Objects, state.Bytes
		return r.startPhase(ctx, ds, i, state, indexjob.Merge, ptr.Deref(job.Spec.Completions, 1), indexjob.RunOf(job))
	}
	// Every phase complete and still no index: the merge wrote it
	// elsewhere, or it was removed since. The Jobs go, and the next
	// reconcile starts over from the parts there are.
	return r.deleteIndexJobs(ctx, ds, stream, state)
}

// indexPhases are the phases of a stream's indexing, in order.
var indexPhases = []indexjob.Phase{indexjob.List, indexjob.Parts, indexjob.Merge}

// indexJobs gets the Jobs there are of a stream's indexing, by phase
// (whoever's they are: the callers look).
func (r *TrainingDatasetReconciler) indexJobs(ctx context.Context, ds *datav1alpha1.TrainingDataset, stream string) (map[indexjob.Phase]*batchv1.Job, error) {
	jobs := map[indexjob.Phase]*batchv1.Job{}
	for _, phase := range indexPhases {
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
	for _, phase := range indexPhases {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ds.Namespace, Name: indexjob.JobName(ds.Name, stream, phase)}}
		if err := r.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return indexingState{}, err
		}
	}
	state.show(indexjob.List, "", false)
	return state, nil
}

// show sets the state of a Job of phase running (or suspended).
func (s *indexingState) show(phase indexjob.Phase, job string, suspended bool) {
	s.Phase = map[indexjob.Phase]string{indexjob.List: datav1alpha1.IndexingListing, indexjob.Parts: datav1alpha1.IndexingParts,
		indexjob.Merge: datav1alpha1.IndexingMerging}[phase]
	s.Job = job
	step := map[indexjob.Phase]string{indexjob.List: "listing its objects", indexjob.Parts: "indexing its parts", indexjob.Merge: "merging its parts"}[phase]
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

// startPhase creates stream i's Job of phase (unless spec.index.suspend
// holds it back), of parts pods over run where it takes them.
func (r *TrainingDatasetReconciler) startPhase(ctx context.Context, ds *datav1alpha1.TrainingDataset, i int, state indexingState, phase indexjob.Phase, parts int32, run string) (indexingState, error) {
	name := indexjob.JobName(ds.Name, ds.Spec.Streams[i].Name, phase)
	if ds.Spec.Index.Suspend {
		state.show(phase, "", true)
		return state, nil
	}
	refused, err := r.createIndexJob(ctx, ds, indexjob.Input{Stream: i, Phase: phase, Parts: parts, Run: run})
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
		r.Recorder.Eventf(ds, nil, corev1.EventTypeNormal, datav1alpha1.ReasonIndexing, "Index", "stream %q: %s: Job %s", ds.Spec.Streams[i].Name, phase, job.Name)
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

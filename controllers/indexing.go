package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/index"
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

// asMissing wraps err as stream i's missing index when it is one.
func asMissing(i int, err error) error {
	if missing := (*index.MissingError)(nil); errors.As(err, &missing) {
		return &missingIndexError{stream: i, err: err}
	}
	return err
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

// indexMissing starts or moves on the Jobs indexing a stream whose index
// err says is missing, where spec.index covers it, and says so in the
// conditions; handled is false for any other error.
func (r *TrainingDatasetReconciler) indexMissing(ctx context.Context, ds *datav1alpha1.TrainingDataset, err error) (res reconcile.Result, handled bool, _ error) {
	var missing *missingIndexError
	if !errors.As(err, &missing) || !indexedInCluster(ds, missing.stream) {
		return reconcile.Result{}, false, nil
	}
	name := ds.Spec.Streams[missing.stream].Name
	state, err := r.advanceIndexing(ctx, ds, missing.stream)
	if err != nil {
		return reconcile.Result{}, true, err
	}
	waiting := cause{datav1alpha1.ReasonWaitingForIndex, "the plan needs every stream's index"}
	if state.failed != "" {
		msg := fmt.Sprintf("stream %q: %s", name, state.failed)
		r.setCondition(ds, datav1alpha1.ConditionIndexResolved, metav1.ConditionFalse, datav1alpha1.ReasonIndexingFailed, msg)
		r.setReady(ds, waiting, cause{datav1alpha1.ReasonIndexingFailed, msg})
		return reconcile.Result{}, true, nil // the Job's deletion or a spec change brings the next try
	}
	step := map[indexjob.Phase]string{indexjob.List: "listing its objects", indexjob.Parts: "indexing its parts", indexjob.Merge: "merging its parts"}[state.phase]
	msg := fmt.Sprintf("stream %q has no index: the operator is %s (Job %s)", name, step, indexjob.JobName(ds.Name, name, state.phase))
	if ds.Spec.Index.Suspend {
		msg = fmt.Sprintf("stream %q has no index, and its indexing is suspended (spec.index.suspend) before %s", name, step)
	}
	r.setCondition(ds, datav1alpha1.ConditionIndexResolved, metav1.ConditionFalse, datav1alpha1.ReasonIndexing, msg)
	r.setReady(ds, waiting, cause{datav1alpha1.ReasonIndexing, msg})
	// The Jobs' changes bring the next reconcile; this one is a floor.
	return reconcile.Result{RequeueAfter: r.retry()}, true, nil
}

// indexingState is where a stream's indexing stands.
type indexingState struct {
	// phase is the step running or next; failed, the reason it stopped.
	phase  indexjob.Phase
	failed string
}

// advanceIndexing moves stream i's indexing on by one step: the Job of
// the first phase not complete is created where it is missing (or
// suspended with spec.index.suspend); a failed one stops the indexing,
// saying why. Level-based: what the Jobs say is all it goes by.
func (r *TrainingDatasetReconciler) advanceIndexing(ctx context.Context, ds *datav1alpha1.TrainingDataset, i int) (indexingState, error) {
	stream := ds.Spec.Streams[i].Name
	// The parts are those the listing cut, whatever spec.index.parallelism
	// says since.
	parts := ptr.Deref(ds.Spec.Index.Parallelism, datav1alpha1.DefaultIndexParallelism)
	for _, phase := range []indexjob.Phase{indexjob.List, indexjob.Parts, indexjob.Merge} {
		var job batchv1.Job
		err := r.Get(ctx, client.ObjectKey{Namespace: ds.Namespace, Name: indexjob.JobName(ds.Name, stream, phase)}, &job)
		switch {
		case apierrors.IsNotFound(err):
			if ds.Spec.Index.Suspend {
				return indexingState{phase: phase}, nil
			}
			refused, err := r.createIndexJob(ctx, ds, i, phase, parts)
			return indexingState{phase: phase, failed: refused}, err
		case err != nil:
			return indexingState{}, err
		case !metav1.IsControlledBy(&job, ds):
			return indexingState{phase: phase, failed: fmt.Sprintf("the Job %s is not this dataset's: delete or rename it", job.Name)}, nil
		}
		if phase == indexjob.List {
			if parts = indexjob.ListedParts(&job); parts < 1 {
				return indexingState{phase: phase, failed: fmt.Sprintf("the Job %s does not say how many parts it lists: delete it", job.Name)}, nil
			}
		}
		if why, failed := jobFailed(&job); failed {
			return indexingState{phase: phase, failed: fmt.Sprintf("the Job %s failed (%s): kubectl logs -n %s job/%s says why; delete the Job to try again (the parts written stay)",
				job.Name, why, ds.Namespace, job.Name)}, nil
		}
		if !jobComplete(&job) {
			if suspend := ds.Spec.Index.Suspend; ptr.Deref(job.Spec.Suspend, false) != suspend && (suspend || ds.Spec.Index.QueueName == "") {
				// Suspended or resumed by spec.index.suspend (a queued
				// Job is Kueue's to resume).
				patch := client.MergeFrom(job.DeepCopy())
				job.Spec.Suspend = ptr.To(suspend)
				if err := r.Patch(ctx, &job, patch); err != nil {
					return indexingState{}, err
				}
			}
			return indexingState{phase: phase}, nil
		}
	}
	// Every phase complete and still no index: the merge wrote it
	// elsewhere, or it was removed since. The Jobs go, and the next
	// reconcile starts over from the parts there are.
	for _, phase := range []indexjob.Phase{indexjob.List, indexjob.Parts, indexjob.Merge} {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ds.Namespace, Name: indexjob.JobName(ds.Name, stream, phase)}}
		if err := r.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return indexingState{}, err
		}
	}
	return indexingState{phase: indexjob.List}, nil
}

// createIndexJob creates stream i's Job of phase (of parts pods for the
// parts), with the manifest its pods read; refused says why a Job cannot
// be made of the dataset as it is (waiting for a change, not retried).
func (r *TrainingDatasetReconciler) createIndexJob(ctx context.Context, ds *datav1alpha1.TrainingDataset, i int, phase indexjob.Phase, parts int32) (refused string, _ error) {
	job, err := indexjob.Build(indexjob.Input{Dataset: ds, Stream: i, Phase: phase, Parts: parts,
		Image: r.IndexImage, PullSecrets: r.IndexPullSecrets, Audiences: r.Policy.AllowedAudiences})
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
// and spec, nothing of its status or metadata beyond.
func (r *TrainingDatasetReconciler) applyIndexManifest(ctx context.Context, ds *datav1alpha1.TrainingDataset) error {
	manifest, err := json.Marshal(struct {
		APIVersion string                           `json:"apiVersion"`
		Kind       string                           `json:"kind"`
		Metadata   map[string]string                `json:"metadata"`
		Spec       datav1alpha1.TrainingDatasetSpec `json:"spec"`
	}{datav1alpha1.GroupVersion.String(), "TrainingDataset", map[string]string{"name": ds.Name, "namespace": ds.Namespace}, ds.Spec})
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: indexjob.ManifestConfigMap(ds.Name), Namespace: ds.Namespace,
			Labels: map[string]string{configmaps.LabelManagedBy: configmaps.ManagedBy, configmaps.LabelDataset: ds.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: datav1alpha1.GroupVersion.String(), Kind: "TrainingDataset",
				Name: ds.Name, UID: ds.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
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

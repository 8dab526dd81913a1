package controllers

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/indexjob"
)

// recheckEvery is spec.index.recheckEvery (0: indexed streams are not
// checked again).
func recheckEvery(ds *datav1alpha1.TrainingDataset) time.Duration {
	if x := ds.Spec.Index; x != nil && x.RecheckEvery != nil && x.RecheckEvery.Duration > 0 {
		return x.RecheckEvery.Duration
	}
	return 0
}

// recheckIn is how long until an indexed stream's check is due: 0 when
// one runs or is due (the reconcile then reads the indexes, rather than
// only gather the jobs' progress), and false without recheckEvery.
func recheckIn(ds *datav1alpha1.TrainingDataset, now time.Time) (time.Duration, bool) {
	every := recheckEvery(ds)
	if every == 0 {
		return 0, false
	}
	waiting := map[string]bool{}
	for _, x := range ds.Status.Indexing {
		switch x.Phase {
		case datav1alpha1.IndexingHeld, datav1alpha1.IndexingFailed, datav1alpha1.IndexingSuspended:
			// Waiting for the jobs, a fix or spec.index.suspend, not for
			// a Job: each commit of a job training meanwhile must not
			// cost a read of the indexes (the full reconcile every
			// indexRecheck looks again).
			waiting[x.Name] = true
		default:
			return 0, true
		}
	}
	next := every
	for i, s := range ds.Spec.Streams {
		if indexedInCluster(ds, i) && indexjob.InParts(ds, i) && !waiting[s.Name] {
			next = min(next, max(checkedAt(ds, s.Name, now).Add(every).Sub(now), 0))
		}
	}
	return next, true
}

// checkedAt is when stream was last found as its index says (status
// streams' indexChecked), or, never checked, now.
func checkedAt(ds *datav1alpha1.TrainingDataset, stream string, now time.Time) time.Time {
	for _, t := range ds.Status.Streams {
		if t.Name == stream && t.IndexChecked != nil {
			return t.IndexChecked.Time
		}
	}
	return now
}

// recheckIndexes checks again, every spec.index.recheckEvery, each
// indexed stream spec.index covers: a listing Job compares its source
// with its index (--if-changed); one unchanged is recorded as checked; one
// changed is indexed again by the parts and merge Jobs, the dataset
// planned on the index it has until the new one is written, unless a job
// holds committed progress on the plan (status.jobs): a job keeps the plan
// it started with, so the stream is Held, said with a Warning event, until
// no job does. checked are the streams' last checks as the status had
// them; it returns the streams being checked or indexed again, and when
// the next check is due.
func (r *TrainingDatasetReconciler) recheckIndexes(ctx context.Context, ds *datav1alpha1.TrainingDataset, checked map[string]*metav1.Time) ([]datav1alpha1.StreamIndexing, time.Duration, error) {
	every := recheckEvery(ds)
	if every == 0 {
		return nil, 0, nil
	}
	now := time.Now()
	before := map[string]datav1alpha1.StreamIndexing{}
	for _, x := range ds.Status.Indexing {
		before[x.Name] = x
	}
	var (
		states []datav1alpha1.StreamIndexing
		next   = every
	)
	for i, s := range ds.Spec.Streams {
		if !indexedInCluster(ds, i) || !indexjob.InParts(ds, i) {
			// A stream indexed in one pod is not checked again: its
			// check would be a listing in parts.
			continue
		}
		last := now
		if t := checked[s.Name]; t != nil {
			last = t.Time
		}
		state, done, err := r.recheckStream(ctx, ds, i, before[s.Name])
		if err != nil {
			return nil, 0, err
		}
		if !done.IsZero() && done.After(last) || checked[s.Name] == nil && !done.IsZero() {
			last = done
		}
		setChecked(ds, s.Name, last)
		if state != nil {
			states = append(states, state.StreamIndexing)
			next = min(next, indexProgressEvery)
			continue
		}
		due := last.Add(every).Sub(now)
		if due > 0 {
			next = min(next, due)
			continue
		}
		// Due: the Jobs of the last check go, then a new check starts.
		started, err := r.startCheck(ctx, ds, i)
		if err != nil {
			return nil, 0, err
		}
		states = append(states, started.StreamIndexing)
		next = min(next, time.Second)
	}
	return states, next, nil
}

// setChecked records when stream was last found as its index says.
func setChecked(ds *datav1alpha1.TrainingDataset, stream string, at time.Time) {
	for k := range ds.Status.Streams {
		if ds.Status.Streams[k].Name == stream {
			ds.Status.Streams[k].IndexChecked = &metav1.Time{Time: at.Truncate(time.Second)}
		}
	}
}

// recheckStream says where stream i's last check or indexing stands, by
// its Jobs: nil where none runs, with done the time it ended (zero: no
// Job says). A check found changed is indexed again (advanceIndexing),
// or held while jobs hold committed progress.
func (r *TrainingDatasetReconciler) recheckStream(ctx context.Context, ds *datav1alpha1.TrainingDataset, i int, before datav1alpha1.StreamIndexing) (*indexingState, time.Time, error) {
	stream := ds.Spec.Streams[i].Name
	jobs, err := r.indexJobs(ctx, ds, stream)
	if err != nil {
		return nil, time.Time{}, err
	}
	for phase, job := range jobs {
		if !metav1.IsControlledBy(job, ds) {
			delete(jobs, phase) // the dataset is planned on its index; the check waits for the name
		}
	}
	if m := jobs[indexjob.Merge]; m != nil && jobComplete(m) {
		return nil, completedAt(m), nil // indexed again: the index read is the new one
	}
	list := jobs[indexjob.List]
	if list == nil && jobs[indexjob.Parts] == nil && jobs[indexjob.Merge] == nil {
		return nil, time.Time{}, nil
	}
	if list != nil && jobComplete(list) && jobs[indexjob.Parts] == nil {
		if !indexjob.IsCheck(list) {
			return nil, completedAt(list), nil // an indexing's, whose index is read
		}
		listed, err := r.readListed(ctx, ds, i)
		if err != nil {
			state := indexingState{StreamIndexing: datav1alpha1.StreamIndexing{Name: stream}}
			state = state.stop(indexjob.List, list.Name, fmt.Sprintf("the check %s completed, and its listing cannot be read (%v): delete the Job to check again", list.Name, err))
			return &state, time.Time{}, nil
		}
		if listed.Unchanged {
			return nil, completedAt(list), nil
		}
		if len(ds.Status.Jobs) > 0 {
			return r.hold(ds, stream, list, listed.Objects, len(ds.Status.Jobs), before), time.Time{}, nil
		}
	}
	state, err := r.advanceIndexing(ctx, ds, i, before)
	if err != nil {
		return nil, time.Time{}, err
	}
	if list != nil && indexjob.IsCheck(list) && state.Phase == datav1alpha1.IndexingListing {
		state.Phase, state.doing = datav1alpha1.IndexingChecking, fmt.Sprintf("the operator lists it again to compare with its index (Job %s)", list.Name)
	}
	return &state, time.Time{}, nil
}

// hold is a changed stream's state while jobs hold committed progress on
// the plan of its index, said once with a Warning event.
func (r *TrainingDatasetReconciler) hold(ds *datav1alpha1.TrainingDataset, stream string, list *batchv1.Job, objects int64, jobs int, before datav1alpha1.StreamIndexing) *indexingState {
	msg := fmt.Sprintf("stream %q: its source changed since it was indexed (the check %s listed %d objects); %d job(s) hold committed progress on the plan of its index, and a job keeps the plan it started with: it is indexed again once no job does (delete the jobs' state ConfigMaps, shardfeed.io/job, once they are done), or index it into a new dataset",
		stream, list.Name, objects, jobs)
	if r.Recorder != nil && before.Phase != datav1alpha1.IndexingHeld {
		r.Recorder.Eventf(ds, list, corev1.EventTypeWarning, datav1alpha1.ReasonSourceChanged, "Index", "%s", msg)
	}
	state := &indexingState{StreamIndexing: datav1alpha1.StreamIndexing{Name: stream, Phase: datav1alpha1.IndexingHeld, Job: list.Name,
		Objects: objects, StartTime: before.StartTime}, doing: msg}
	return state
}

// startCheck deletes stream i's Jobs of its last indexing or check, and
// creates the check's listing Job once they are gone.
func (r *TrainingDatasetReconciler) startCheck(ctx context.Context, ds *datav1alpha1.TrainingDataset, i int) (indexingState, error) {
	stream := ds.Spec.Streams[i].Name
	state := indexingState{StreamIndexing: datav1alpha1.StreamIndexing{Name: stream}}
	jobs, err := r.indexJobs(ctx, ds, stream)
	if err != nil {
		return state, err
	}
	gone := true
	for _, phase := range indexjob.Phases {
		job := jobs[phase]
		switch {
		case job == nil:
			continue
		case !metav1.IsControlledBy(job, ds):
			return state.stop(phase, job.Name, fmt.Sprintf("the Job %s is not this dataset's: delete or rename it to check the stream again", job.Name)), nil
		}
		gone = false
		if job.DeletionTimestamp == nil {
			if err := r.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return state, err
			}
		}
	}
	name := indexjob.JobName(ds.Name, stream, indexjob.List)
	state.show(indexjob.List, name, ds.Spec.Index.Suspend)
	if ds.Spec.Index.Suspend {
		return state, nil
	}
	state.Phase = datav1alpha1.IndexingChecking
	if !gone {
		return state, nil
	}
	refused, err := r.createIndexJob(ctx, ds, indexjob.Input{Stream: i, Phase: indexjob.List, IfChanged: true})
	if err != nil || refused != "" {
		return state.stop(indexjob.List, name, refused), err
	}
	state.StartTime = &metav1.Time{Time: time.Now()}
	return state, nil
}

// completedAt is when a Job completed (its creation, if it does not say).
func completedAt(job *batchv1.Job) time.Time {
	if job.Status.CompletionTime != nil {
		return job.Status.CompletionTime.Time
	}
	return job.CreationTimestamp.Time
}

package controllers

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/bytesize"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/index/indexparts"
	"github.com/shardfeed/shardfeed/internal/index/indexparts/jobrecords"
	"github.com/shardfeed/shardfeed/internal/indexjob"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/streams"
)

// progressReads bounds the parts' progress read at once.
const progressReads = 16

// withIndexStore runs read with stream i's index store, opened as the
// operator reads indexes (the stream's credentials, the platform's
// endpoints, the reconcile's bounds), counting what it reads in the
// dataset's index read metrics.
func (r *TrainingDatasetReconciler) withIndexStore(ctx context.Context, ds *datav1alpha1.TrainingDataset, i int, read func(ctx context.Context, ist store.Store) error) error {
	ctx, cancel := context.WithTimeout(ctx, r.Policy.readTimeout())
	defer cancel()
	counts := &store.Counts{}
	defer func() {
		DatasetIndexReadBytes.WithLabelValues(ds.Namespace, ds.Name).Add(float64(counts.ReadBytes.Load()))
		DatasetIndexReadRequests.WithLabelValues(ds.Namespace, ds.Name).Add(float64(counts.Requests()))
	}()
	s := ds.Spec.Streams[i].DeepCopy()
	src, err := r.storeSource(ctx, ds.Namespace, s, counts)
	if err != nil {
		return err
	}
	isrc, err := streams.IndexSource(*s, src)
	if err != nil {
		return err
	}
	ist, err := stores.Open(ctx, isrc)
	if err != nil {
		return err
	}
	return read(ctx, ist)
}

// readListed reads the run stream i's listing Job recorded: its totals
// and parts, bounded (the store is one the dataset's author writes).
func (r *TrainingDatasetReconciler) readListed(ctx context.Context, ds *datav1alpha1.TrainingDataset, i int) (jobrecords.Listed, error) {
	var listed jobrecords.Listed
	err := r.withIndexStore(ctx, ds, i, func(ctx context.Context, ist store.Store) error {
		key := jobrecords.ListedKey(indexjob.RunName(ds, ds.Spec.Streams[i].Name))
		data, err := indexfile.ReadObject(ctx, ist, key, indexparts.MaxRecordBytes)
		if err != nil {
			return err
		}
		if listed, err = jobrecords.ParseListed(data); err != nil {
			return fmt.Errorf("%s: %w", indexfile.ObjectURI(ist, key), err)
		}
		if listed.Parts > indexjob.MaxParts {
			return fmt.Errorf("%s: %d parts, more than the %d an indexing Job runs", indexfile.ObjectURI(ist, key), listed.Parts, indexjob.MaxParts)
		}
		return nil
	})
	return listed, err
}

// readIndexProgress reads how far the parts Job's pods are (each writes
// its part's progress every few seconds) into state: the objects and
// bytes indexed, the parts done, the rate since the Job started and the
// time left at that rate. A part whose progress cannot be read counts as
// none done.
func (r *TrainingDatasetReconciler) readIndexProgress(ctx context.Context, ds *datav1alpha1.TrainingDataset, i int, job *batchv1.Job, state *indexingState) error {
	run := indexjob.RunOf(job)
	parts := min(max(int(ptr.Deref(job.Spec.Completions, 0)), 0), indexjob.MaxParts)
	state.PartsDone = job.Status.Succeeded
	progress := make([]jobrecords.Progress, parts)
	err := r.withIndexStore(ctx, ds, i, func(ctx context.Context, ist store.Store) error {
		if state.Objects == 0 {
			// The status lost the listing's totals: read them again.
			if l, err := r.readListed(ctx, ds, i); err == nil && l.Run == run {
				state.Parts, state.Objects, state.Bytes = int32(l.Parts), l.Objects, l.Bytes //nolint:gosec // at most indexjob.MaxParts
			}
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(progressReads)
		for k := range parts {
			g.Go(func() error {
				data, err := indexfile.ReadObject(gctx, ist, jobrecords.ProgressKey(run, k), indexparts.MaxRecordBytes)
				if err != nil {
					return nil // not started, or not yet reported
				}
				if p, err := jobrecords.ParseProgress(data, run, k); err == nil {
					progress[k] = p
				}
				return nil
			})
		}
		return g.Wait()
	})
	var objects, bytes int64
	for _, p := range progress {
		objects, bytes = objects+p.ObjectsDone, bytes+p.BytesDone
	}
	// What the pods wrote cannot take the totals past the listing's.
	state.ObjectsRead, state.BytesRead = min(objects, state.Objects), min(bytes, state.Bytes)
	started := job.CreationTimestamp.Time
	if job.Status.StartTime != nil {
		started = job.Status.StartTime.Time
	}
	state.Rate, state.ETA = rateAndETA(state.ObjectsRead, state.BytesRead, state.Bytes, time.Since(started))
	return err
}

// rateAndETA says the rate of objects and bytes read over elapsed and the
// time left to read total bytes at that rate ("" before any is read).
func rateAndETA(objects, bytes, total int64, elapsed time.Duration) (rate, eta string) {
	secs := elapsed.Seconds()
	if objects <= 0 || bytes <= 0 || secs < 1 {
		return "", ""
	}
	perSec := float64(bytes) / secs
	rate = fmt.Sprintf("%s objects/s, %s/s", compactCount(float64(objects)/secs), bytesize.Human(int64(perSec)))
	left := time.Duration(float64(total-bytes) / perSec * float64(time.Second))
	return rate, left.Round(time.Second).String()
}

// compactCount writes n with a k or M suffix from a thousand up.
func compactCount(n float64) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fk", n/1e3)
	case n >= 10:
		return fmt.Sprintf("%.0f", n)
	}
	return fmt.Sprintf("%.1f", n)
}

// readFailure reads why a step of stream i's indexing failed, as its pod
// recorded it: said only of a record of job's phase written since the Job
// was created.
func (r *TrainingDatasetReconciler) readFailure(ctx context.Context, ds *datav1alpha1.TrainingDataset, i int, phase indexjob.Phase, job *batchv1.Job) (string, bool) {
	var f jobrecords.Failure
	err := r.withIndexStore(ctx, ds, i, func(ctx context.Context, ist store.Store) error {
		data, err := indexfile.ReadObject(ctx, ist, jobrecords.FailureKey(indexjob.RunName(ds, ds.Spec.Streams[i].Name)), indexparts.MaxRecordBytes)
		if err != nil {
			return err
		}
		f, err = jobrecords.ParseFailure(data)
		return err
	})
	step := map[indexjob.Phase]string{indexjob.Whole: "index", indexjob.List: "list", indexjob.Parts: "part", indexjob.Merge: "merge", indexjob.Measure: "measure", indexjob.Join: "join"}[phase]
	// A second of slack: the record's time is the pod's clock.
	if err != nil || f.Step != step || f.Time.Before(job.CreationTimestamp.Add(-time.Second)) {
		return "", false
	}
	if f.Step == "part" || f.Step == "measure" {
		return fmt.Sprintf("part %d: %s", f.Part, f.Error), true
	}
	return f.Error, true
}

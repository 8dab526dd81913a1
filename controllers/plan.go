package controllers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/planspec"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/streams"
	"github.com/shardfeed/shardfeed/planner"
)

// credentialsError is a Secret that is missing or lacks its keys.
type credentialsError struct{ err error }

func (e *credentialsError) Error() string { return e.err.Error() }
func (e *credentialsError) Unwrap() error { return e.err }

// notOwnedError is a ConfigMap in the way that shardfeed did not create.
type notOwnedError struct{ err error }

func (e *notOwnedError) Error() string { return e.err.Error() }
func (e *notOwnedError) Unwrap() error { return e.err }

// notAllowedError is a source the store policy refuses.
type notAllowedError struct{ err error }

func (e *notAllowedError) Error() string { return e.err.Error() }
func (e *notAllowedError) Unwrap() error { return e.err }

// readIndexes reads every stream's index from object storage, with the
// credentials of its Secret (read through the API, never cached or logged)
// or, where the policy allows it, the manager's default chain. The reads
// are bounded in bytes (Policy.MaxIndexBytes a read, MaxDatasetIndexBytes
// the dataset's together, InFlight all reconciles' at once) and time (per
// request and for all of them), since the author picks the endpoint.
//
// What the reads took is counted in DatasetIndexReadBytes and
// DatasetIndexReadRequests.
//
// It returns the indexes and the spec the plan carries: ds's, with each
// workload identity as its ServiceAccount's annotations resolve it
// (workloadidentity.Resolve), which is what the sidecars read with; and
// the release of the dataset's share of the bytes in flight, which the
// caller holds while it plans (planning a dataset at its budget holds as
// much again as its parsed indexes).
func (r *TrainingDatasetReconciler) readIndexes(ctx context.Context, ds *datav1alpha1.TrainingDataset) ([]planner.StreamIndex, *datav1alpha1.TrainingDatasetSpec, func(), error) {
	if err := r.Policy.CheckAll(ds.Namespace, &ds.Spec); err != nil {
		return nil, nil, nil, &notAllowedError{err}
	}
	bound := r.Policy.readTimeout()
	ctx, cancel := context.WithTimeoutCause(ctx, bound, fmt.Errorf("the indexes were not read within %s, the operator's bound on index reads (--index-read-timeout): the endpoint is too slow or does not answer", bound))
	defer cancel()
	release, err := r.reserveIndexBytes(ctx, ds)
	if err != nil {
		return nil, nil, nil, err
	}
	ok := false
	defer func() {
		if !ok {
			release()
		}
	}()
	budget, read := r.Policy.datasetBudget(), &store.Counts{}
	defer func() {
		DatasetIndexReadBytes.WithLabelValues(ds.Namespace, ds.Name).Add(float64(read.ReadBytes.Load()))
		DatasetIndexReadRequests.WithLabelValues(ds.Namespace, ds.Name).Add(float64(read.Requests()))
	}()
	out := make([]planner.StreamIndex, len(ds.Spec.Streams))
	missing := &missingIndexesError{}
	planned := ds.Spec.DeepCopy()
	for i := range planned.Streams {
		s := &planned.Streams[i]
		left := budget - read.ReadBytes.Load()
		if left <= 0 {
			return nil, nil, nil, overBudget(s.Name, budget, nil)
		}
		src, err := r.storeSource(ctx, ds.Namespace, s, read)
		if err != nil {
			return nil, nil, nil, err
		}
		capBytes := min(r.Policy.maxIndexBytes(), left)
		open := streams.Open
		if planspec.InParts(&ds.Spec) {
			// A compact index by its header alone: the operator plans
			// with its counts and content hash, and sidecars read the rest.
			open = streams.OpenSummary
		}
		st, err := open(ctx, i, planspec.Resolved(&ds.Spec, i), ds.Spec.Packing, src, capBytes)
		var tooLarge *indexfile.TooLargeError
		switch {
		case errors.As(err, &tooLarge) && capBytes < r.Policy.maxIndexBytes():
			return nil, nil, nil, overBudget(s.Name, budget, tooLarge)
		case err != nil:
			if c := context.Cause(ctx); c != nil && ctx.Err() != nil {
				return nil, nil, nil, fmt.Errorf("stream %q: %w", s.Name, c)
			}
			if m := (*index.MissingError)(nil); errors.As(err, &m) && indexedInCluster(ds, i) {
				missing.streams = append(missing.streams, &missingIndexError{stream: i, err: err})
				continue // the others' indexes are read too: every stream without one is indexed at once
			}
			if missingBeside(err) && indexedInCluster(ds, i) {
				missing.streams = append(missing.streams, &missingIndexError{stream: i, err: err, beside: true})
				continue
			}
			return nil, nil, nil, err
		case read.ReadBytes.Load() > budget: // its filter's selection after its index
			return nil, nil, nil, overBudget(s.Name, budget, nil)
		}
		if b := ds.Spec.Bucketing; b != nil {
			left := budget - read.ReadBytes.Load()
			err := st.OpenBuckets(ctx, b, min(r.Policy.maxIndexBytes(), left))
			switch {
			case missingBeside(err) && indexedInCluster(ds, i):
				missing.streams = append(missing.streams, &missingIndexError{stream: i, err: err, beside: true})
				continue
			case errors.As(err, &tooLarge) && left < r.Policy.maxIndexBytes():
				return nil, nil, nil, overBudget(s.Name, budget, tooLarge)
			case err != nil:
				return nil, nil, nil, err
			case read.ReadBytes.Load() > budget:
				return nil, nil, nil, overBudget(s.Name, budget, nil)
			}
		}
		if indexedInCluster(ds, i) {
			err := tokensCounted(ctx, st)
			if missingBeside(err) {
				missing.streams = append(missing.streams, &missingIndexError{stream: i, err: err, beside: true})
				continue
			}
			if err != nil {
				return nil, nil, nil, err
			}
		}
		out[i] = st.Index
	}
	if len(missing.streams) > 0 {
		return nil, nil, nil, missing
	}
	ok = true
	return out, planned, release, nil
}

// storeSource is where stream s (of a dataset in namespace ns) is read
// from as the operator reads it: s.Source with its workload identity
// resolved (set in s), its credentials, the platform's endpoints and the
// reconcile's bounds, counting what it reads in counts.
func (r *TrainingDatasetReconciler) storeSource(ctx context.Context, ns string, s *datav1alpha1.Stream, counts *store.Counts) (store.Source, error) {
	var err error
	if s.Source, err = r.resolveIdentity(ctx, ns, s); err != nil {
		return store.Source{}, err
	}
	src := streams.Source(*s)
	// A reconcile does not wait minutes for a store: it comes back.
	src.Retry = store.Retry{MaxElapsed: r.Policy.requestTimeout(), RequestTimeout: r.Policy.requestTimeout()}
	src.Endpoints = r.Policy.Endpoints()
	src.Counts = counts
	if src.Credentials, src.Identity, err = r.streamCredentials(ctx, ns, *s); err != nil {
		return store.Source{}, err
	}
	return src, nil
}

// overBudget is a dataset whose indexes together pass its budget, at
// stream name; a *indexfile.TooLargeError for the condition's reason.
func overBudget(name string, budget int64, read *indexfile.TooLargeError) error {
	if read == nil {
		read = &indexfile.TooLargeError{URI: "stream " + name, Limit: budget}
	}
	return fmt.Errorf("the indexes of the dataset's streams and filters together pass its budget of %d bytes at stream %q (the manager's --max-dataset-index-bytes, chart value datasets.maxDatasetIndexBytes): split the dataset into several, or raise the budget: %w",
		budget, name, read)
}

// reserveIndexBytes reserves, of the bytes all reconciles may read at
// once, what this dataset may read: its budget, or less for a few streams.
func (r *TrainingDatasetReconciler) reserveIndexBytes(ctx context.Context, ds *datav1alpha1.TrainingDataset) (func(), error) {
	if r.Policy.InFlight == nil {
		return func() {}, nil
	}
	var most int64
	for _, s := range ds.Spec.Streams {
		most += r.Policy.maxIndexBytes()
		if s.Filter != "" {
			most += r.Policy.maxIndexBytes()
		}
		if b := ds.Spec.Bucketing; b != nil { // each bucket's selection
			most += int64(len(b.Boundaries)+len(b.AspectRatios)+1) * r.Policy.maxIndexBytes()
		}
	}
	n := min(most, r.Policy.datasetBudget(), r.Policy.InFlightBytes)
	if err := r.Policy.InFlight.Acquire(ctx, n); err != nil {
		return nil, fmt.Errorf("the operator is reading other datasets' indexes (at most %d bytes at once, the manager's --index-bytes-in-flight): this one waits its turn (%w)",
			r.Policy.InFlightBytes, context.Cause(ctx))
	}
	return func() { r.Policy.InFlight.Release(n) }, nil
}

func (r *TrainingDatasetReconciler) setTotals(ds *datav1alpha1.TrainingDataset, indexes []planner.StreamIndex) {
	ds.Status.Streams = ds.Status.Streams[:0]
	for i, x := range indexes {
		ds.Status.Streams = append(ds.Status.Streams, datav1alpha1.StreamTotals{
			Name: ds.Spec.Streams[i].Name, Samples: x.Samples(), Bytes: x.Bytes(), Shards: x.Len(),
		})
	}
}

// The pod counts whose minimum cache the plan ConfigMap records, so that
// the webhook checks spec.sidecar.cacheLimit for a job of that size: every
// divisor of numSplits up to smallJobPods, and the larger ones while they
// are at most minCachePodCounts in all. Each costs a pass over the plan, as
// the plan's own build does. A job's numSplits is its ranks times a few,
// whose divisors are a dozen or two: each gets its check. Only a numSplits
// of more divisors leaves its largest pod counts unchecked; the webhook
// then says nothing rather than guess.
const (
	smallJobPods      = 256
	minCachePodCounts = 32
)

// minCachePods are those pod counts, in increasing order.
func minCachePods(splits int) []int {
	var divisors []int
	for d := 1; d*d <= splits; d++ {
		if splits%d == 0 {
			divisors = append(divisors, d, splits/d)
		}
	}
	slices.Sort(divisors)
	divisors = slices.Compact(divisors)
	small, _ := slices.BinarySearch(divisors, smallJobPods+1)
	return divisors[:max(small, min(len(divisors), minCachePodCounts))]
}

// applyPlan server-side-applies <name>-plan, owned by the dataset: the
// parameters, the fingerprint and per-stream digests (never the indexes:
// sidecars read those themselves), and the minimum cache per pod count.
// It returns the digest of the ConfigMap's data as applied.
func (r *TrainingDatasetReconciler) applyPlan(ctx context.Context, ds *datav1alpha1.TrainingDataset, planned *datav1alpha1.TrainingDatasetSpec, pl *planner.Plan, indexes []planner.StreamIndex, operatorCA string) (dataDigest, error) {
	p := &configmaps.Plan{Spec: *planned, Fingerprint: pl.Fingerprint(), MinCacheBytes: map[int]int64{}}
	for i, x := range indexes {
		p.Streams = append(p.Streams, configmaps.StreamDigest{Name: ds.Spec.Streams[i].Name, ContentHash: x.ContentHash(),
			Shards: int(x.Len()), Samples: x.Samples(), Bytes: x.Bytes(), MaxShardBytes: x.MaxShardBytes()})
	}
	var err error
	prefetch := planspec.Prefetch(&ds.Spec)
	for _, pods := range minCachePods(pl.NumSplits()) {
		if pl.Summarized() {
			break // no shard to size a cache by: the webhook does not check spec.sidecar.cacheLimit
		}
		if p.MinCacheBytes[pods], err = pl.MinCacheBytes(pods, prefetch); err != nil {
			return dataDigest{}, err
		}
	}
	p.OperatorCA = operatorCA
	data, err := p.Data()
	if err != nil {
		return dataDigest{}, err
	}
	// Never take over a ConfigMap of that name shardfeed did not write for
	// this dataset (read directly: the cache holds shardfeed's only).
	var existing corev1.ConfigMap
	switch err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ds.Namespace, Name: configmaps.PlanName(ds.Name)}, &existing); {
	case err == nil:
		if err := ownedBy(&existing, ds); err != nil {
			return dataDigest{}, &notOwnedError{err}
		}
	case !apierrors.IsNotFound(err):
		return dataDigest{}, fmt.Errorf("reading ConfigMap %s: %w", configmaps.PlanName(ds.Name), err)
	}
	cm := corev1ac.ConfigMap(configmaps.PlanName(ds.Name), ds.Namespace).
		WithLabels(map[string]string{configmaps.LabelDataset: configmaps.LabelValue(ds.Name), configmaps.LabelManagedBy: configmaps.ManagedBy}).
		WithOwnerReferences(datasetOwnerApply(ds)).
		WithData(data)
	if err := r.Apply(ctx, cm, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return dataDigest{}, fmt.Errorf("applying ConfigMap %s: %w", configmaps.PlanName(ds.Name), err)
	}
	return dataSum(data), nil
}

// aggregateJobs reads the jobs' state ConfigMaps into status.jobs.
func (r *TrainingDatasetReconciler) aggregateJobs(ctx context.Context, ds *datav1alpha1.TrainingDataset) error {
	var list corev1.ConfigMapList
	if err := r.List(ctx, &list, client.InNamespace(ds.Namespace), client.MatchingLabels{configmaps.LabelDataset: configmaps.LabelValue(ds.Name)}); err != nil {
		return err
	}
	var jobs []datav1alpha1.JobProgress
	for i := range list.Items {
		cm := &list.Items[i]
		st, err := configmaps.StateFromData(cm.Data)
		if err != nil || st.Job == "" || st.Dataset != ds.Name || cm.Name != configmaps.StateName(ds.Name, st.Job) || ownedBy(cm, ds) != nil {
			continue // not this dataset's, or not readable by this operator
		}
		job := st.Job
		jp := datav1alpha1.JobProgress{Job: job, Epoch: st.Epoch, Step: st.Step,
			Pods: int32(min(st.Pods, math.MaxInt32)), WorldSize: int32(min(st.WorldSize, math.MaxInt32)), //nolint:gosec // bounded above
			DataParallelSize: int32(min(st.DataParallelSize, math.MaxInt32)),                                 //nolint:gosec // bounded above
			SkippedShards:    int32(min(st.SkippedShards, math.MaxInt32)), SkippedSamples: st.SkippedSamples} //nolint:gosec // bounded above
		if st.Committed != nil {
			t := metav1.NewTime(*st.Committed)
			jp.LastCommitTime = &t
		}
		if rd := st.Reads; rd != nil {
			jp.Reads = &datav1alpha1.JobReads{StoreBytes: rd.StoreBytes, NodeCacheHits: rd.NodeCacheHits, NodeCacheBytes: rd.NodeCacheBytes,
				NodeCacheMisses: rd.NodeCacheMisses}
			if all := rd.StoreBytes + rd.NodeCacheBytes; all > 0 {
				jp.Reads.NodeCacheShare = strconv.FormatFloat(100*float64(rd.NodeCacheBytes)/float64(all), 'f', 1, 64) + "%"
			}
		}
		r.reportSkips(ds, jp, st)
		jobs = append(jobs, jp)
	}
	slices.SortFunc(jobs, func(a, b datav1alpha1.JobProgress) int {
		switch {
		case a.Job < b.Job:
			return -1
		case a.Job > b.Job:
			return 1
		}
		return 0
	})
	ds.Status.Jobs = jobs
	return nil
}

// reportSkips records a Warning event when a job's sidecars skipped shards
// the status did not count yet, naming the newest of them.
func (r *TrainingDatasetReconciler) reportSkips(ds *datav1alpha1.TrainingDataset, jp datav1alpha1.JobProgress, st *configmaps.State) {
	var seen int32
	for _, old := range ds.Status.Jobs {
		if old.Job == jp.Job {
			seen = old.SkippedShards
		}
	}
	if jp.SkippedShards <= seen || r.Recorder == nil {
		return
	}
	n := min(int(jp.SkippedShards-seen), len(st.Skipped))
	names := make([]string, 0, n)
	for _, sk := range st.Skipped[len(st.Skipped)-n:] {
		names = append(names, fmt.Sprintf("%s/%s (%d samples: %s)", sk.Stream, sk.Shard, sk.Samples, sk.Reason))
	}
	r.Recorder.Eventf(ds, nil, corev1.EventTypeWarning, datav1alpha1.ReasonShardSkipped, "SkipShard",
		"job %s: %d corrupt shard(s) delivered as pad rows (onCorruptShard: skip), %d in all, %d samples: %s",
		jp.Job, jp.SkippedShards-seen, jp.SkippedShards, jp.SkippedSamples, strings.Join(names, "; "))
}

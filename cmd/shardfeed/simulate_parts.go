package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/bytesize"
	"github.com/shardfeed/shardfeed/internal/index/compact"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/planspec"
	localstore "github.com/shardfeed/shardfeed/internal/store/local"
	"github.com/shardfeed/shardfeed/internal/streams"
	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/pipeline"
)

// partsStart is what a pod's sidecar spends at start where the dataset's
// indexes are compact and read in parts, measured here as the sidecar does
// it: each index's header and counts read, the plan and the pod's epoch
// built, and the entries of the shards it fetches first resolved (those of
// its start step and the prefetcher's window, pipeline.SizedAhead).
type partsStart struct {
	Pod    int   `json:"pod"`
	Pods   int   `json:"pods"`
	AtStep int64 `json:"atStep"`
	// IndexBytes are the bytes of the indexes read, Entries the shards'
	// entries resolved, of Shards.
	IndexBytes int64         `json:"indexBytes"`
	Entries    int64         `json:"entries"`
	Shards     int64         `json:"shards"`
	Indexes    time.Duration `json:"indexesNanos"`
	Plan       time.Duration `json:"planNanos"`
	Resolve    time.Duration `json:"resolveNanos"`
	HeapBytes  int64         `json:"heapBytes"`
}

// Total is the start's time.
func (p *partsStart) Total() time.Duration { return p.Indexes + p.Plan + p.Resolve }

// leanIndexes opens every stream's index in parts; nil where one is not
// compact (a sidecar reads it whole).
func (o *simulateOptions) leanIndexes(ctx context.Context, ds *datav1alpha1.TrainingDataset) ([]*compact.Counts, func(), error) {
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	out := make([]*compact.Counts, len(ds.Spec.Streams))
	for i, s := range ds.Spec.Streams {
		path, local, _ := o.compactFile(s)
		if !local {
			st, err := streams.OpenLean(ctx, i, planspec.Resolved(&ds.Spec, i), nil, streams.SharedCredentials(s, o.credentials), 0)
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			if st.Layout.Lean == nil {
				closeAll()
				return nil, nil, nil
			}
			out[i] = st.Layout.Lean
			continue
		}
		r, f, err := compact.OpenFile(path, 0)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		files = append(files, f)
		if _, _, out[i], err = r.LeanFile(); err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return out, closeAll, nil
}

// compactFile is where the stream's index is on this machine, in
// --index-dir or in a local stream's directory (local: whether it is), and
// whether it is compact; not local: it is read from the stream's store.
func (o *simulateOptions) compactFile(s datav1alpha1.Stream) (path string, local, isCompact bool) {
	var candidates []string
	for _, dir := range o.indexDirs {
		candidates = append(candidates, indexFiles(dir, s.Name)...)
	}
	if dir, err := localstore.Dir(s.Source.URI); err == nil {
		for _, key := range []string{indexfile.Key, compact.Key, indexfile.FileName} {
			candidates = append(candidates, filepath.Join(dir, filepath.FromSlash(key)))
		}
	} else if len(o.indexDirs) == 0 {
		return "", false, true
	}
	for _, p := range candidates {
		if _, err := os.Stat(p); err == nil {
			return p, true, filepath.Ext(p) == ".sfi"
		}
	}
	return "", true, false
}

// startInParts measures the start of pod of pods at step of the epoch,
// where the dataset plans in parts and every index is compact; nil
// otherwise.
func (o *simulateOptions) startInParts(ctx context.Context, ds *datav1alpha1.TrainingDataset, pod, pods int, step int64, prefetch int) (*partsStart, error) {
	if !planspec.InParts(&ds.Spec) || o.mesh != "" || ds.Spec.Packing != nil {
		return nil, nil
	}
	for _, s := range ds.Spec.Streams {
		if _, _, isCompact := o.compactFile(s); s.Filter != "" || !isCompact {
			return nil, nil
		}
	}
	ps := &partsStart{Pod: pod, Pods: pods, AtStep: step}
	heap0 := heapInUse()
	began := time.Now()
	counts, closeAll, err := o.leanIndexes(ctx, ds)
	if err != nil || counts == nil {
		return nil, err
	}
	defer closeAll()
	ps.Indexes = time.Since(began)
	began = time.Now()
	for _, c := range counts {
		ps.Shards += c.Shards()
	}
	pl, err := planOfCounts(ds, counts)
	if err != nil {
		return nil, err
	}
	first, n, err := pl.PodSplits(pod, pods)
	if err != nil {
		return nil, err
	}
	ep, err := pl.EpochOf(o.epoch, first, n)
	if err != nil {
		return nil, err
	}
	ps.Plan = time.Since(began)
	began = time.Now()
	// What the pod's prefetcher resolves before its first shards: the
	// needs its start step reads and its window past them (those no step
	// from it on reads are passed over).
	needs := ep.ShardsAhead(first, n)
	hi := 0
	for hi < len(needs) && needs[hi].FirstStep <= step {
		hi++
	}
	hi = min(len(needs), hi+pipeline.SizedAhead(prefetch))
	by := map[int][]int64{}
	z := pl.NeedSizer()
	var window []planner.ShardNeed
	for _, nd := range needs[:hi] {
		if nd.LastStep >= step {
			by[nd.Stream] = append(by[nd.Stream], int64(nd.Shard))
			window = append(window, nd)
		}
	}
	for s, shards := range by {
		if err := counts[s].Resolve(shards); err != nil {
			return nil, fmt.Errorf("stream %q: %w", ds.Spec.Streams[s].Name, err)
		}
	}
	z.Size(window)
	ps.Resolve = time.Since(began)
	ps.HeapBytes = max(heapInUse()-heap0, 0)
	for _, c := range counts {
		ps.IndexBytes += c.BytesRead()
		ps.Entries += int64(c.Resolved())
	}
	return ps, nil
}

// rescaleStartInParts measures the start of the first new pod of a
// rescale to o.rescaleTo pods, at its step (default: the middle of the
// epoch), which needs the plan's steps: planned from the headers.
func (o *simulateOptions) rescaleStartInParts(ctx context.Context, ds *datav1alpha1.TrainingDataset) (*partsStart, error) {
	at := o.rescaleAt
	if at < 0 {
		counts, closeAll, err := o.leanIndexes(ctx, ds)
		if err != nil || counts == nil {
			return nil, err
		}
		defer closeAll()
		pl, err := planOfCounts(ds, counts)
		if err != nil {
			return nil, err
		}
		at = pl.Steps() / 2
	}
	return o.startInParts(ctx, ds, 0, o.rescaleTo, at, o.prefetch)
}

func (p *partsStart) String() string {
	return fmt.Sprintf("pod %d of %d at step %d, its indexes read in parts: %s read (%d entries of %d shards) in %s, plan and its epoch in %s, first shards' entries in %s: %s, %s held",
		p.Pod, p.Pods, p.AtStep, bytesize.Human(p.IndexBytes), p.Entries, p.Shards, p.Indexes.Round(time.Millisecond), p.Plan.Round(time.Millisecond),
		p.Resolve.Round(time.Millisecond), p.Total().Round(time.Millisecond), bytesize.Human(p.HeapBytes))
}

// planOfCounts is the dataset's plan over its indexes read in parts.
func planOfCounts(ds *datav1alpha1.TrainingDataset, counts []*compact.Counts) (*planner.Plan, error) {
	xs := make([]planner.StreamIndex, len(counts))
	for i, c := range counts {
		xs[i] = c.StreamIndex()
	}
	params, err := planspec.Params(&ds.Spec, xs)
	if err != nil {
		return nil, err
	}
	return planner.New(params)
}

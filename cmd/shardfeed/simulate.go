package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/bytesize"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/index/sidefile"
	"github.com/shardfeed/shardfeed/internal/planspec"
	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/cache"
)

type simulateOptions struct {
	file, credentials string
	configMaps        string
	indexDirs         []string
	pods, procsPerPod int
	podsGiven         bool
	mesh              string
	bandwidth         string
	stepTime          time.Duration
	prefetch          int
	epoch             int64
	rescaleTo         int
	rescaleAt         int64
	output            string
	// The node cache (#58): predicted beside the store when set.
	nodeCache      bool
	nodeBandwidth  string
	nodeCacheLimit string
	trials         int
}

func newSimulateCommand() *cobra.Command {
	o := &simulateOptions{}
	cmd := &cobra.Command{
		Use:   "simulate -f DATASET.yaml --pods P [--procs-per-pod L] [--bandwidth 1GB/s] [--step-time 200ms]",
		Short: "Size a job before launching it: bytes, cache, first batch and stalls per pod, and the shuffle's quality",
		Long: `simulate plans the TrainingDataset as the operator will and predicts, for
each pod of a job of --pods pods:

  bytes to fetch per epoch   each shard its splits read, once (from the indexes: exact)
  minimum cache              the cache that never evicts a shard still needed (exact bound,
                             the one the webhook enforces on spec.sidecar.cacheLimit)
  first batch                step 0's shards downloaded at --bandwidth
  stall                      time the ranks wait for data over the epoch: shards are fetched
                             back to back in the order they are needed, a step waits for
                             its shards; 0 means the store keeps up with --step-time

and the plan's shuffle quality: the mean distance, in the streams' original
order, between consecutive samples a split gives (a uniform shuffle of the
epoch gives about samples/3), and the fraction of a global batch's samples
from distinct shards (1: no two from one shard). Use it to choose
shuffle.blockSize (quality vs. cache), numSplits and cacheLimit.`,
		Example: `  shardfeed simulate -f dataset.yaml --pods 8 --procs-per-pod 4 --bandwidth 1GB/s --step-time 200ms`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			o.podsGiven = cmd.Flags().Changed("pods")
			return o.run(ctx, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.file, "filename", "f", "", "TrainingDataset manifest (- for stdin)")
	f.StringArrayVar(&o.indexDirs, "index-dir", nil, "directory with stream indexes as <stream>/index.json or <stream>.json (repeatable)")
	f.StringVar(&o.credentials, "credentials-dir", "", "for s3:// streams: directory with the files AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; empty: the default chain")
	f.StringVar(&o.configMaps, "configmaps-dir", "", "directory of the ConfigMaps the dataset names, as DIR/<name>/<key> (a tokenizer's configMapRef)")
	f.IntVar(&o.pods, "pods", 1, "pods of the job")
	f.IntVar(&o.procsPerPod, "procs-per-pod", 1, "training processes (ranks) per pod")
	f.StringVar(&o.mesh, "mesh", "", "the job's rank layout as torch's DeviceMesh has it (e.g. pp=2,dp=4,tp=8): a pod fetches for its ranks' data-parallel coordinates; --pods defaults to its size / --procs-per-pod")
	f.StringVar(&o.bandwidth, "bandwidth", "1GB/s", "download rate of one pod from the store, e.g. 500MB/s, 10Gbit/s, 1GiB/s")
	f.DurationVar(&o.stepTime, "step-time", 200*time.Millisecond, "training time of one step")
	f.IntVar(&o.prefetch, "prefetch", -1, "shards each pod prefetches (default: spec.sidecar.prefetch, else 2)")
	f.Int64Var(&o.epoch, "epoch", 0, "epoch")
	f.IntVar(&o.rescaleTo, "rescale-to", 0, "also predict a rescale to this many pods (new pods, empty caches), as a Job made again with another size: the bytes refetched")
	f.Int64Var(&o.rescaleAt, "rescale-at-step", -1, "the step of the rescale (default: the middle of the epoch)")
	f.BoolVar(&o.nodeCache, "node-cache", false, "also predict with the chart's node cache, one pod to a node: a rescale's new pods read from their nodes, a sweep's later trials too")
	f.StringVar(&o.nodeBandwidth, "node-bandwidth", "2GB/s", "with --node-cache: the rate a pod reads its node's cache")
	f.StringVar(&o.nodeCacheLimit, "node-cache-limit", "", "with --node-cache: a node's cache budget (nodeCache.limit), e.g. 500Gi; default: no limit")
	f.IntVar(&o.trials, "trials", 0, "with --node-cache: a sweep of this many jobs of the plan one after another on the same nodes: the egress and first batch with and without the node cache")
	f.StringVarP(&o.output, "output", "o", "text", "text or json")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

// nodeOptions sets the node cache's part of so from the flags.
func (o *simulateOptions) nodeOptions(so *planner.SimOptions) error {
	if !o.nodeCache {
		if o.trials > 1 {
			return fmt.Errorf("--trials %d compares a sweep with and without the node cache: add --node-cache", o.trials)
		}
		return nil
	}
	bw, err := parseBandwidth(o.nodeBandwidth)
	if err != nil {
		return fmt.Errorf("--node-bandwidth: %w", err)
	}
	so.NodeBandwidth, so.Trials = bw, o.trials
	if o.nodeCacheLimit != "" {
		q, err := resource.ParseQuantity(o.nodeCacheLimit)
		if err != nil || q.Sign() <= 0 {
			return fmt.Errorf("--node-cache-limit %q: write bytes such as 500Gi", o.nodeCacheLimit)
		}
		so.NodeCacheBytes = q.Value()
	}
	return nil
}

// parseBandwidth reads "1GB/s", "500MB/s", "10Gbit/s", "1GiB/s" or a plain
// number of bytes per second.
func parseBandwidth(s string) (float64, error) {
	v := strings.TrimSuffix(strings.TrimSpace(s), "/s")
	bits := false
	switch {
	case strings.HasSuffix(v, "bit"):
		v, bits = strings.TrimSuffix(v, "bit"), true
	case strings.HasSuffix(v, "bps"):
		v, bits = strings.TrimSuffix(v, "bps"), true
	case strings.HasSuffix(v, "B"):
		v = strings.TrimSuffix(v, "B")
	}
	q, err := resource.ParseQuantity(v)
	if err != nil || q.Sign() <= 0 {
		return 0, fmt.Errorf("--bandwidth %q: write a rate above 0 such as 1GB/s, 500MB/s, 10Gbit/s or 1GiB/s", s)
	}
	b := q.AsApproximateFloat64()
	if bits {
		b /= 8
	}
	return b, nil
}

func (o *simulateOptions) run(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	bw, err := parseBandwidth(o.bandwidth)
	if err != nil {
		return err
	}
	if o.output != "text" && o.output != "json" {
		return fmt.Errorf("--output %q is not supported: use text or json", o.output)
	}
	ds, err := readDataset(o.file, stdin)
	if err != nil {
		return err
	}
	if o.prefetch < 0 {
		o.prefetch = int(ptr.Deref(ds.Spec.Sidecar.Prefetch, datav1alpha1.DefaultPrefetch))
	}
	// Where the indexes are read in parts, a pod's sidecar reads what its
	// pod needs first: measured first, apart from the whole plan below.
	parts, err := o.startInParts(ctx, ds, 0, o.pods, 0, o.prefetch)
	if err != nil {
		return fmt.Errorf("a sidecar's start with the indexes read in parts: %w", err)
	}
	var rescaleParts *partsStart
	if parts != nil && o.rescaleTo > 0 {
		if rescaleParts, err = o.rescaleStartInParts(ctx, ds); err != nil {
			return fmt.Errorf("a new pod's start with the indexes read in parts: %w", err)
		}
	}
	// What each sidecar does at start, timed: the indexes read and parsed,
	// the plan and the epoch built; and the heap they hold.
	var start startCost
	heap0 := heapInUse()
	began := time.Now()
	ds, params, served, err := datasetPlanOf(ctx, ds, o.indexDirs, o.credentials, o.configMaps)
	if err != nil {
		return err
	}
	start.Indexes = time.Since(began)
	packing := packingOf(ds, served)
	began = time.Now()
	pl, err := planner.New(params)
	if err != nil {
		return fmt.Errorf("TrainingDataset %q: %w", ds.Name, err)
	}
	ep, err := pl.Epoch(o.epoch)
	if err != nil {
		return err
	}
	start.Plan = time.Since(began)
	warnings := indexWarnings(ds, o.indexDirs)
	start.HeapBytes = max(heapInUse()-heap0, 0)
	for _, x := range params.Streams {
		start.Shards += len(x.Index.Shards)
	}
	so := planner.SimOptions{Pods: o.pods, ProcsPerPod: o.procsPerPod, Bandwidth: bw, StepTime: o.stepTime, Prefetch: o.prefetch,
		PartBytes: cache.DefaultPartBytes, RescaleTo: o.rescaleTo, RescaleAt: o.rescaleAt}
	if err := o.nodeOptions(&so); err != nil {
		return err
	}
	if o.rescaleTo > 0 && o.rescaleAt < 0 {
		so.RescaleAt = pl.Steps() / 2
	}
	if o.mesh != "" {
		m, err := planner.ParseMesh(o.mesh)
		if err != nil {
			return fmt.Errorf("--mesh: %w", err)
		}
		if !o.podsGiven {
			so.Pods = m.Size() / max(o.procsPerPod, 1)
		}
		so.Mesh = &m
		o.pods = so.Pods
	}
	sim, err := ep.Simulate(so)
	if err != nil {
		return fmt.Errorf("TrainingDataset %q: %w", ds.Name, err)
	}
	runtime.KeepAlive(ep)
	if o.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			*planner.Simulation
			Start        startCost               `json:"start"`
			InParts      *partsStart             `json:"startInParts,omitempty"`
			RescaleParts *partsStart             `json:"rescaleStartInParts,omitempty"`
			Packing      *packingSummary         `json:"packing,omitempty"`
			Buckets      []planner.BucketSummary `json:"buckets,omitempty"`
			Warnings     []string                `json:"warnings,omitempty"`
		}{sim, start, parts, rescaleParts, packing, pl.Buckets(), warnings})
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }
	layout := ""
	if o.mesh != "" {
		layout = " in mesh " + so.Mesh.String()
	}
	p("dataset %s, epoch %d: %d steps of %d samples; %d pods × %d ranks%s; %s/s per pod; %s per step\n\n",
		ds.Name, o.epoch, sim.Steps, pl.GlobalBatchSize(), o.pods, o.procsPerPod, layout, bytesize.Human(int64(bw)), o.stepTime)
	if packing != nil {
		p("%s\n", packing)
	}
	for k, b := range pl.Buckets() {
		p("bucket %d (%s): %d samples, %d steps an epoch\n", k, b.Label, b.Samples, b.Steps)
	}
	p("each sidecar at start: %d shards' indexes read in %s, plan built in %s, %s held\n",
		start.Shards, start.Indexes.Round(time.Millisecond), start.Plan.Round(time.Millisecond), bytesize.Human(start.HeapBytes))
	for _, ps := range []*partsStart{parts, rescaleParts} {
		if ps != nil {
			p("%s\n", ps)
		}
	}
	for _, w := range warnings {
		p("warning: %s\n", w)
	}
	p("\n")
	row := func(name string, ps planner.PodSim) {
		p("%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\n", name, ps.Shards, bytesize.Human(ps.Bytes), ps.Requests, bytesize.Human(ps.MinCacheBytes),
			ps.FirstBatch.Round(time.Millisecond), ps.Stall.Round(time.Millisecond), ps.Epoch.Round(time.Millisecond))
	}
	p("POD\tSHARDS\tBYTES/EPOCH\tGETS\tMIN CACHE\tFIRST BATCH\tSTALL\tEPOCH\n")
	if len(sim.Pods) <= maxPodRows {
		for _, ps := range sim.Pods {
			row(fmt.Sprint(ps.Pod), ps)
		}
	} else {
		for _, q := range []struct {
			name string
			at   float64
		}{{"min", 0}, {"median", 0.5}, {"max", 1}} {
			row(q.name, podQuantile(sim.Pods, q.at))
		}
		p("(each column's quantile over the %d pods; -o json for every pod)\n", len(sim.Pods))
	}
	if r := sim.Rescale; r != nil {
		p("\nrescale\t%d → %d pods at step %d: the new pods fetch %s for the rest of the epoch (%s had the job kept its size),\n",
			r.FromPods, r.ToPods, r.AtStep, bytesize.Human(r.After), bytesize.Human(r.Unchanged))
		p("\tof which %s refetched (the shards in use at the step, %.1f%% of the epoch's %s); first batch %s; min cache %s\n",
			bytesize.Human(r.Refetched), 100*float64(r.Refetched)/float64(max(r.Before+r.Unchanged, 1)), bytesize.Human(r.Before+r.Unchanged),
			r.FirstBatch.Round(time.Millisecond), bytesize.Human(r.MinCacheBytes))
	}
	if r := sim.Rescale; r != nil && r.NodeCache != nil {
		n := r.NodeCache
		p("\twith the node cache (new pod i on old pod i's node): %s from the nodes, %s from the store, of which %s refetched; first batch %s\n",
			bytesize.Human(n.FromNodes), bytesize.Human(n.FromStore), bytesize.Human(n.Refetched), n.FirstBatch.Round(time.Millisecond))
	}
	if sw := sim.Sweep; sw != nil {
		p("\nsweep\t%d trials of this job one after another on the same nodes: %s from the store without the node cache, %s with it;\n",
			sw.Trials, bytesize.Human(sw.Egress), bytesize.Human(sw.EgressWithNode))
		p("\tfirst batch %s from the store, %s from the node (a later trial)\n", sw.FirstBatch.Round(time.Millisecond), sw.FirstBatchFromNode.Round(time.Millisecond))
	}
	q := sim.Quality
	p("\nshuffle\tmean gap between consecutive samples of a split: %.0f (a uniform shuffle: %.0f, %.0f%%)\n",
		q.MeanGap, q.MeanGapIdeal, 100*q.MeanGap/max(q.MeanGapIdeal, 1))
	p("\tdistinct shards per global batch: %.0f%% of its samples (over %d steps)\n", 100*q.DistinctShardsPerBatch, q.StepsMeasured)
	p("\n(min cache includes %d prefetched shards; stall counts the first batch)\n", o.prefetch)
	return w.Flush()
}

// maxPodRows is the most pods the text output lists one by one.
const maxPodRows = 32

// startCost is what a sidecar spends at start, measured here: the
// indexes read and parsed, the plan built, the heap they take.
type startCost struct {
	Shards    int           `json:"shards"`
	Indexes   time.Duration `json:"indexesNanos"`
	Plan      time.Duration `json:"planNanos"`
	HeapBytes int64         `json:"heapBytes"`
}

// heapInUse is the live heap, as a collection just made marked it.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC() // what a finalizer freed
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	return int64(sample[0].Value.Uint64()) //nolint:gosec // a heap's size
}

// podQuantile is, column by column, the quantile q of the pods' figures.
func podQuantile(pods []planner.PodSim, q float64) planner.PodSim {
	pick := func(f func(planner.PodSim) int64) int64 {
		v := make([]int64, len(pods))
		for i, ps := range pods {
			v[i] = f(ps)
		}
		slices.Sort(v)
		return v[int(q*float64(len(v)-1))]
	}
	return planner.PodSim{
		Shards:        int(pick(func(ps planner.PodSim) int64 { return int64(ps.Shards) })),
		Bytes:         pick(func(ps planner.PodSim) int64 { return ps.Bytes }),
		Requests:      pick(func(ps planner.PodSim) int64 { return ps.Requests }),
		MinCacheBytes: pick(func(ps planner.PodSim) int64 { return ps.MinCacheBytes }),
		FirstBatch:    time.Duration(pick(func(ps planner.PodSim) int64 { return int64(ps.FirstBatch) })),
		Stall:         time.Duration(pick(func(ps planner.PodSim) int64 { return int64(ps.Stall) })),
		Epoch:         time.Duration(pick(func(ps planner.PodSim) int64 { return int64(ps.Epoch) })),
	}
}

// indexWarnings names the streams whose index, as given with --index-dir,
// is larger than a sidecar reads: their pods would not start.
func indexWarnings(ds *datav1alpha1.TrainingDataset, indexDirs []string) []string {
	var out []string
	for _, s := range ds.Spec.Streams {
		for _, dir := range indexDirs {
			var (
				fi  os.FileInfo
				err = os.ErrNotExist
			)
			for _, p := range indexFiles(dir, s.Name) {
				if fi, err = os.Stat(p); err == nil {
					break
				}
			}
			if err == nil && fi.Size() > indexfile.DefaultMaxBytes {
				out = append(out, fmt.Sprintf("stream %q: its index is %s, more than the %s a sidecar reads of one stream's index (the manager reads --max-index-bytes, 16Mi by default): write it compact (shardfeed index --index-form compact: about a tenth of the JSON's size), or split the stream's shards into several streams of fewer shards each",
					s.Name, bytesize.Human(fi.Size()), bytesize.Human(indexfile.DefaultMaxBytes)))
				break
			}
		}
	}
	return out
}

// packingSummary is a packed dataset's packing over all its streams, as
// simulate shows it.
type packingSummary struct {
	Packing string              `json:"packing"`
	Totals  sidefile.PacksShard `json:"totals"`
}

// packingOf sums a packed dataset's packs (nil unpacked).
func packingOf(ds *datav1alpha1.TrainingDataset, served *servedStreams) *packingSummary {
	if ds.Spec.Packing == nil || len(served.packs) == 0 {
		return nil
	}
	s := &packingSummary{Packing: ds.Spec.Packing.Column + ": " + planspec.Packing(ds.Spec.Packing).String()}
	for _, x := range served.packs {
		s.Totals.Add(x.Totals())
	}
	return s
}

// String is the line simulate prints: what a sample is, and what packing cost.
func (s *packingSummary) String() string {
	t := s.Totals
	return fmt.Sprintf("packed (%s): a sample is a pack; %d documents in %d packs (%.2f a pack), %.2f%% padding, %d documents cut, %d dropped",
		s.Packing, t.Docs, t.Packs, t.DocsPerPack(), t.PaddingPercent(), t.CutDocs, t.DroppedDocs)
}

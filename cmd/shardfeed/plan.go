package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/utils/ptr"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/bytesize"
	"github.com/shardfeed/shardfeed/internal/index/sidefile"
	"github.com/shardfeed/shardfeed/internal/planspec"
	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
	"github.com/shardfeed/shardfeed/sidecar/source"
)

type planOptions struct {
	file        string
	indexDirs   []string
	summary     bool
	ids         bool
	output      string
	epoch       int64
	steps       string
	worldSize   int
	procsPerPod int
	mesh        string
	workers     int
	pods        []int
	prefetch    int
	credentials string
	configMaps  string
}

func newPlanCommand() *cobra.Command {
	o := &planOptions{}
	cmd := &cobra.Command{
		Use:   "plan -f DATASET.yaml [--summary | --ids --world-size W ...]",
		Short: "Show the plan of a TrainingDataset: its sizes and costs, or the sample ids of every batch",
		Long: `plan computes the plan of the TrainingDataset in a manifest, exactly as the
operator and the sidecars do, from the streams' indexes: file:// sources are
read in place, s3:// ones from their prefix (index.json, written by
shardfeed index for Parquet streams); --index-dir gives indexes from files.

--summary (the default) prints the samples per stream, what is dropped or
padded, the steps per epoch, and for each pod count the shards and bytes a pod
fetches, the egress ratio and the minimum cache per pod.

--ids prints one JSON line per (step, rank) with the global sample ids of that
rank's batch, in delivery order, and the positions of pad rows; worker is the
DataLoader worker that receives the step when the stream starts at the first
step of --steps. With --mesh, each line also has the rank's data-parallel rank
(dpRank): ranks of one replication group get the same ids.`,
		Example: `  shardfeed plan -f dataset.yaml
  shardfeed plan -f dataset.yaml --ids --world-size 8 --workers 2 --epoch 1 --steps 0:10
  shardfeed plan -f dataset.yaml --ids --mesh pp=2,dp=4,tp=2 --procs-per-pod 8 --steps 0:10`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return o.run(ctx, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr(), cmd.Flags().Changed("pods"))
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.file, "filename", "f", "", "TrainingDataset manifest (- for stdin)")
	f.StringArrayVar(&o.indexDirs, "index-dir", nil, "directory with stream indexes as <stream>/index.json or <stream>.json (repeatable)")
	f.BoolVar(&o.summary, "summary", false, "print sizes, drops, steps, egress and cache per pod count (the default)")
	f.BoolVar(&o.ids, "ids", false, "print the sample ids of every batch as JSON lines")
	f.StringVarP(&o.output, "output", "o", "text", "summary format: text or json")
	f.Int64Var(&o.epoch, "epoch", 0, "epoch")
	f.StringVar(&o.steps, "steps", "", "steps A:B (B excluded; either may be omitted); default: the whole epoch")
	f.IntVar(&o.worldSize, "world-size", 0, "ranks of the job (must divide numSplits); needed by --ids")
	f.IntVar(&o.procsPerPod, "procs-per-pod", 1, "ranks per pod")
	f.StringVar(&o.mesh, "mesh", "", "the job's rank layout as torch's DeviceMesh has it, outermost first (e.g. pp=2,dp=4,tp=8): ranks of one data-parallel coordinate (dp, dp_* dimensions) get the same batch; --world-size defaults to its size")
	f.IntVar(&o.workers, "workers", 1, "DataLoader workers per rank")
	f.IntSliceVar(&o.pods, "pods", nil, "pod counts for the summary (default: 1 and the powers of two up to 16 that divide numSplits)")
	f.StringVar(&o.credentials, "credentials-dir", "", "for s3:// streams: directory with the files AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; empty: the default chain")
	f.StringVar(&o.configMaps, "configmaps-dir", "", "directory of the ConfigMaps the dataset names, as DIR/<name>/<key> (a tokenizer's configMapRef)")
	f.IntVar(&o.prefetch, "prefetch", -1, "shards each pod prefetches, for the minimum cache (default: spec.sidecar.prefetch, else 2)")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func (o *planOptions) run(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, podsGiven bool) error {
	if o.summary && o.ids {
		return fmt.Errorf("--summary and --ids exclude each other: pick one")
	}
	ds, params, served, err := datasetPlan(ctx, o.file, stdin, o.indexDirs, o.credentials, o.configMaps)
	if err != nil {
		return err
	}
	// A plan is of the indexes: a source that changed since is said,
	// since nothing else would say it (the new objects are simply not
	// read).
	warnChanged(stderr, o.file, ds, source.Changes(ctx, formats.Default(), served.opened))

	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	pl, err := planner.New(params)
	if err != nil {
		return fmt.Errorf("TrainingDataset %q: %w", ds.Name, err)
	}
	ep, err := pl.Epoch(o.epoch)
	if err != nil {
		return err
	}
	build := time.Since(start)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)

	if o.ids {
		var docs *packDocs
		if ds.Spec.Packing != nil && served.opened != nil {
			docs = newPackDocs(ctx, served.opened)
		}
		return o.printIDs(stdout, ep, docs)
	}
	if o.prefetch < 0 {
		o.prefetch = int(ptr.Deref(ds.Spec.Sidecar.Prefetch, datav1alpha1.DefaultPrefetch))
	}
	if !podsGiven {
		o.pods = nil
		for p := 1; p <= 16; p *= 2 {
			if pl.NumSplits()%p == 0 {
				o.pods = append(o.pods, p)
			}
		}
	}
	s, err := summarize(ds, ep, o.pods, o.prefetch, served.packs)
	if err != nil {
		return err
	}
	s.Columns = columnsOf(served.schema)
	for i := range s.Streams {
		// Unpacked, unbucketed: the plan's streams are the spec's.
		if ds.Spec.Packing != nil || ds.Spec.Bucketing != nil || i >= len(ds.Spec.Streams) || planspec.TokenizeOf(&ds.Spec, i) == nil {
			continue
		}
		ts := &tokensSummary{}
		if i < len(served.tokens) && served.tokens[i] != nil {
			ts.Documents, ts.Tokens, ts.Max = served.tokens[i].Totals()
			ts.Counted = true
		}
		s.Streams[i].Tokens = ts
	}
	s.BuildSeconds = build.Seconds()
	s.BuildAllocBytes = after.TotalAlloc - before.TotalAlloc
	switch o.output {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	case "text":
		return s.write(stdout)
	}
	return fmt.Errorf("--output %q is not supported: use text or json", o.output)
}

// datasetPlan reads a manifest and its streams' indexes into planner
// parameters, as the operator and the sidecars compute them, with what
// plan and simulate show of the streams beyond their indexes (the schema
// they are served in, nil offline with --index-dir; a packed dataset's
// packs).
func datasetPlan(ctx context.Context, file string, stdin io.Reader, indexDirs []string, credentials, configMaps string) (*datav1alpha1.TrainingDataset, planner.Params, *servedStreams, error) {
	ds, err := readDataset(file, stdin)
	if err != nil {
		return nil, planner.Params{}, nil, err
	}
	return datasetPlanOf(ctx, ds, indexDirs, credentials, configMaps)
}

// datasetPlanOf is datasetPlan of a dataset read.
func datasetPlanOf(ctx context.Context, ds *datav1alpha1.TrainingDataset, indexDirs []string, credentials, configMaps string) (*datav1alpha1.TrainingDataset, planner.Params, *servedStreams, error) {
	var err error
	// With the stores at hand, refuse what serve would refuse; with
	// --index-dir the data may be out of reach: the plan is offline.
	var indexes []planner.StreamIndex
	served := &servedStreams{}
	if len(indexDirs) == 0 {
		indexes, served, err = openServable(ctx, ds, credentials, configMaps)
	} else {
		indexes, err = readIndexes(ctx, ds, indexDirs, credentials)
	}
	if err != nil {
		return nil, planner.Params{}, nil, err
	}
	params, err := planspec.Params(&ds.Spec, indexes)
	if err != nil {
		return nil, planner.Params{}, nil, fmt.Errorf("TrainingDataset %q: %w", ds.Name, err)
	}
	return ds, params, served, nil
}

// parseSteps parses "A:B" into [a, b) within [0, steps).
func parseSteps(s string, steps int64) (a, b int64, err error) {
	a, b = 0, steps
	if s == "" {
		return a, b, nil
	}
	lo, hi, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, fmt.Errorf("--steps %q: write A:B, e.g. 0:10", s)
	}
	if lo != "" {
		if a, err = strconv.ParseInt(lo, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("--steps %q: %q is not a step number", s, lo)
		}
	}
	if hi != "" {
		if b, err = strconv.ParseInt(hi, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("--steps %q: %q is not a step number", s, hi)
		}
	}
	if a < 0 || a > b || b > steps {
		return 0, 0, fmt.Errorf("--steps %q is outside the epoch's steps 0:%d", s, steps)
	}
	return a, b, nil
}

func (o *planOptions) printIDs(stdout io.Writer, ep *planner.EpochPlan, docs *packDocs) error {
	pl := ep.Plan()
	var mesh *planner.Mesh
	if o.mesh != "" {
		m, err := planner.ParseMesh(o.mesh)
		if err != nil {
			return fmt.Errorf("--mesh: %w", err)
		}
		if o.worldSize == 0 {
			o.worldSize = m.Size()
		}
		if o.worldSize != m.Size() {
			return fmt.Errorf("--world-size %d is not the size of --mesh %s (%d ranks)", o.worldSize, m, m.Size())
		}
		if err := pl.CheckReplication(o.worldSize, m.DataParallelSize()); err != nil {
			return err
		}
		mesh = &m
	}
	if o.worldSize == 0 {
		return fmt.Errorf("--ids needs --world-size: the number of ranks of the job (or --mesh)")
	}
	if mesh == nil {
		if err := pl.CheckWorld(o.worldSize); err != nil {
			return err
		}
	}
	if o.procsPerPod < 1 || o.worldSize%o.procsPerPod != 0 {
		return fmt.Errorf("--procs-per-pod %d does not divide --world-size %d", o.procsPerPod, o.worldSize)
	}
	if o.workers < 1 {
		return fmt.Errorf("--workers must be at least 1, got %d", o.workers)
	}
	a, b, err := parseSteps(o.steps, pl.Steps())
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(stdout, 1<<16)
	var line []byte
	// coords returns rank r's data-parallel coordinates and the "dpRank"
	// its line shows (-1: none without a mesh).
	coords := func(r int) (dp, dpSize, shown int) {
		if mesh == nil {
			return r, o.worldSize, -1
		}
		dp = mesh.DataParallelRank(r)
		return dp, mesh.DataParallelSize(), dp
	}
	docsOf := docs.ofBatch
	skips := pl.Skips()
	for k := a; k < b; k++ {
		worker := (k - a) % int64(o.workers)
		// The data a schedule skips here: lines marked skipped, never
		// delivered.
		for _, sk := range skips {
			if sk.At != pl.GlobalStep(ep.Epoch(), k) {
				continue
			}
			for m := range sk.Steps {
				global := pl.SkippedBatch(nil, sk, m)
				for r := range o.worldSize {
					dp, dpSize, shown := coords(r)
					first, n, _ := pl.RankSplits(dp, dpSize)
					var batch []planner.Sample
					for i, smp := range global {
						if j := i % pl.NumSplits(); j >= first && j < first+n {
							batch = append(batch, smp)
						}
					}
					docs, err := docsOf(batch)
					if err != nil {
						return err
					}
					line = appendIDsLine(line[:0], ep.Epoch(), k, r, o.procsPerPod, worker, batch, idsExtra{dp: shown, phase: sk.Phase, scheduled: true, skipped: true, skipStep: m, docs: docs})
					if _, err := w.Write(line); err != nil {
						return err
					}
				}
			}
		}
		x := stepExtra(ep, k)
		batches := map[int][]planner.Sample{} // a replication group's, once
		for r := range o.worldSize {
			dp, dpSize, shown := coords(r)
			batch, ok := batches[dp]
			if !ok {
				if batch, err = ep.LocalBatch(nil, k, dp, dpSize); err != nil {
					return err
				}
				batches[dp] = batch
			}
			x.dp = shown
			if x.docs, err = docsOf(batch); err != nil {
				return err
			}
			line = appendIDsLine(line[:0], ep.Epoch(), k, r, o.procsPerPod, worker, batch, x)
			if _, err := w.Write(line); err != nil {
				return err
			}
		}
	}
	return w.Flush()
}

// stepExtra is what the ids lines of step k say beyond every plan's: its
// phase with a schedule, its bucket with bucketing.
func stepExtra(ep *planner.EpochPlan, k int64) idsExtra {
	x := idsExtra{}
	if bk := ep.Plan().Params().Bucketing; bk != nil {
		x.buckets = bk.Buckets
	}
	if ep.Plan().Scheduled() {
		x.scheduled = true
		x.phase, x.repeated = ep.Phase(k)
	}
	return x
}

// idsExtra are the fields of an ids line beyond every plan's.
type idsExtra struct {
	// dp is the rank's data-parallel rank with a mesh, else -1.
	dp int
	// With a schedule: the phase (-1 before the first), and whether the
	// line repeats an earlier step or is skipped data (step skipStep of
	// the skip).
	scheduled, repeated, skipped bool
	phase                        int
	skipStep                     int64
	// docs are the documents of each sample's pack, in a packed dataset.
	docs [][]int64
	// buckets, in a bucketed dataset, is its number of buckets: the line
	// says the bucket of its step (every sample's).
	buckets int
}

// appendIDsLine writes {"epoch":E,"step":k,"rank":r,"worker":w,"ids":[…],"pad":[…]}
// (with "pod" and "local" when pods run several ranks, and x's fields)
// without reflection: a plan can have billions of ids.
func appendIDsLine(b []byte, epoch, step int64, rank, procsPerPod int, worker int64, batch []planner.Sample, x idsExtra) []byte {
	b = append(b, `{"epoch":`...)
	b = strconv.AppendInt(b, epoch, 10)
	b = append(b, `,"step":`...)
	b = strconv.AppendInt(b, step, 10)
	b = append(b, `,"rank":`...)
	b = strconv.AppendInt(b, int64(rank), 10)
	if procsPerPod > 1 {
		b = append(b, `,"pod":`...)
		b = strconv.AppendInt(b, int64(rank/procsPerPod), 10)
		b = append(b, `,"local":`...)
		b = strconv.AppendInt(b, int64(rank%procsPerPod), 10)
	}
	if x.dp >= 0 {
		b = append(b, `,"dpRank":`...)
		b = strconv.AppendInt(b, int64(x.dp), 10)
	}
	if x.scheduled {
		b = append(b, `,"phase":`...)
		b = strconv.AppendInt(b, int64(x.phase), 10)
	}
	if x.repeated {
		b = append(b, `,"repeated":true`...)
	}
	if x.buckets > 0 && len(batch) > 0 {
		b = append(b, `,"bucket":`...)
		b = strconv.AppendInt(b, int64(batch[0].Stream%x.buckets), 10)
	}
	if x.skipped {
		b = append(b, `,"skipped":true,"skipStep":`...)
		b = strconv.AppendInt(b, x.skipStep, 10)
	}
	b = append(b, `,"worker":`...)
	b = strconv.AppendInt(b, worker, 10)
	b = append(b, `,"ids":[`...)
	for i, s := range batch {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, s.ID, 10)
	}
	b = append(b, `],"pad":[`...)
	first := true
	for i, s := range batch {
		if s.Pad {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = strconv.AppendInt(b, int64(i), 10)
		}
	}
	b = append(b, ']')
	if x.docs != nil {
		b = append(b, `,"docs":[`...)
		for i, ds := range x.docs {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			for j, d := range ds {
				if j > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendInt(b, d, 10)
			}
			b = append(b, ']')
		}
		b = append(b, ']')
	}
	return append(b, "}\n"...)
}

// summary is what `plan --summary` reports.
type summary struct {
	Dataset         string          `json:"dataset"`
	Fingerprint     string          `json:"fingerprint"`
	PlanVersion     int             `json:"planVersion"`
	Batching        string          `json:"batching"`
	Epoch           int64           `json:"epoch"`
	Samples         int64           `json:"samples"`
	NumSplits       int             `json:"numSplits"`
	SplitLen        int64           `json:"splitLength"`
	GlobalBatchSize int64           `json:"globalBatchSize"`
	Steps           int64           `json:"steps"`
	Dropped         int64           `json:"dropped"`
	Padded          int64           `json:"padded"`
	Streams         []streamSummary `json:"streams"`
	// Columns are the served columns and what each arrives as (none
	// offline, with --index-dir: the data is out of reach).
	Columns  []columnSummary `json:"columns,omitempty"`
	Pods     []podSummary    `json:"pods"`
	Prefetch int             `json:"prefetchShards"`
	// Phases are the schedule's, when the dataset has one.
	Phases []phaseSummary `json:"phases,omitempty"`
	// Packing is the dataset's packing (spec.packing), when it has one:
	// its samples are packs of its column's documents.
	Packing string `json:"packing,omitempty"`
	// Buckets are the dataset's buckets (spec.bucketing), when it has
	// them: every global batch is drawn from one.
	Buckets         []planner.BucketSummary `json:"buckets,omitempty"`
	BuildSeconds    float64                 `json:"buildSeconds"`
	BuildAllocBytes uint64                  `json:"buildAllocBytes"`
}

type streamSummary struct {
	Name    string `json:"name"`
	Shards  int    `json:"shards"`
	Samples int64  `json:"samples"`
	Bytes   int64  `json:"bytes"`
	// MaxShardBytes is the stream's largest shard.
	MaxShardBytes int64  `json:"maxShardBytes"`
	Weight        string `json:"weight"`
	PerEpoch      int64  `json:"perEpoch"`
	// Filter is the stream's row filter: Samples are the rows it matches,
	// in MatchingShards of the Shards (the others are never fetched).
	Filter         string `json:"filter,omitempty"`
	MatchingShards int    `json:"matchingShards,omitempty"`
	// Packing is what packing the stream's documents made (spec.packing):
	// its Samples are packs.
	Packing *sidefile.PacksShard `json:"packing,omitempty"`
	// Tokens are a tokenized, unpacked stream's tokens, as shardfeed
	// index -f counted them with its tokenizer (Counted false: not yet).
	Tokens *tokensSummary `json:"tokens,omitempty"`
}

// tokensSummary is what a tokenized stream's documents hold in tokens.
type tokensSummary struct {
	Counted   bool  `json:"counted"`
	Documents int64 `json:"documents"`
	Tokens    int64 `json:"tokens"`
	Max       int64 `json:"max"`
}

// phaseSummary is one phase of a schedule: what it changes and its hash.
type phaseSummary struct {
	StartStep int64  `json:"startStep"`
	Changes   string `json:"changes"`
	Hash      string `json:"hash"`
}

type podSummary struct {
	Pods             int     `json:"pods"`
	MaxShardsPerPod  int     `json:"maxShardsPerPod"`
	MaxBytesPerPod   int64   `json:"maxBytesPerPod"`
	FetchedBytes     int64   `json:"fetchedBytes"`
	DistinctBytes    int64   `json:"distinctBytes"`
	EgressRatio      float64 `json:"egressRatio"`
	MinCacheBytesPod int64   `json:"minCacheBytesPerPod"`
}

func summarize(ds *datav1alpha1.TrainingDataset, ep *planner.EpochPlan, pods []int, prefetch int, packs []*sidefile.PacksIndex) (*summary, error) {
	pl := ep.Plan()
	p := pl.Params()
	s := &summary{
		Dataset: ds.Name, Fingerprint: pl.Fingerprint().Sum, PlanVersion: pl.Version(), Batching: string(cmp.Or(p.Batching, planner.BatchingRandom)), Epoch: ep.Epoch(),
		Samples: pl.Total(), NumSplits: pl.NumSplits(), SplitLen: pl.SplitLen(), GlobalBatchSize: pl.GlobalBatchSize(),
		Steps: pl.Steps(), Dropped: pl.DroppedPerEpoch(), Padded: pl.PaddedPerEpoch(), Prefetch: prefetch,
	}
	if pk := ds.Spec.Packing; pk != nil {
		s.Packing = pk.Column + ": " + planspec.Packing(pk).String()
	}
	if p.Schedule != nil {
		s.Batching = "scheduled (stratified)"
		for i, line := range pl.DescribePhases() {
			ph := p.Schedule.Phases[i]
			s.Phases = append(s.Phases, phaseSummary{StartStep: ph.StartStep, Changes: line, Hash: ph.Hash()})
		}
	}
	if b := ds.Spec.Bucketing; b != nil {
		s.Buckets = pl.Buckets()
	}
	counts := pl.SamplesPerStream()
	for i, st := range p.Streams {
		spec := i // the spec's stream of the plan's
		if b := p.Bucketing; b != nil {
			spec = i / b.Buckets
		}
		weight := "-"
		switch {
		case st.Proportion != "" && p.ProportionsOfTokens:
			weight = "proportion " + st.Proportion + " of tokens"
		case st.Proportion != "":
			weight = "proportion " + st.Proportion
		case st.Repeat != "":
			weight = "repeat " + st.Repeat
		case st.Choose != 0:
			weight = fmt.Sprint("choose ", st.Choose)
		}
		ss := streamSummary{
			Name: st.Name, Shards: len(st.Index.Shards), Samples: st.Index.Samples(), Bytes: st.Index.Bytes(), MaxShardBytes: st.Index.MaxShardBytes(),
			Weight: weight, PerEpoch: counts[i],
		}
		if i < len(packs) {
			t := packs[i].Totals()
			ss.Packing = &t
		}
		if st.Index.Filter != "" {
			ss.Filter = ds.Spec.Streams[spec].Filter
			for _, sh := range st.Index.Shards {
				if sh.Samples > 0 {
					ss.MatchingShards++
				}
			}
		}
		s.Streams = append(s.Streams, ss)
	}
	for _, n := range pods {
		e, err := ep.Egress(n)
		if err != nil {
			return nil, fmt.Errorf("--pods %d: %w", n, err)
		}
		cache, err := pl.MinCacheBytes(n, prefetch)
		if err != nil {
			return nil, err
		}
		ps := podSummary{Pods: n, FetchedBytes: e.FetchedBytes, DistinctBytes: e.DistinctBytes, EgressRatio: e.Ratio(), MinCacheBytesPod: cache}
		for i := range n {
			ps.MaxShardsPerPod = max(ps.MaxShardsPerPod, e.PodShards[i])
			ps.MaxBytesPerPod = max(ps.MaxBytesPerPod, e.PodBytes[i])
		}
		s.Pods = append(s.Pods, ps)
	}
	return s, nil
}

func (s *summary) write(out io.Writer) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }
	p("dataset %s, epoch %d, plan %s (version %d, %s batching)\n\n", s.Dataset, s.Epoch, s.Fingerprint, s.PlanVersion, s.Batching)
	p("STREAM\tSHARDS\tSAMPLES\tBYTES\tWEIGHT\tPER EPOCH\n")
	for _, st := range s.Streams {
		p("%s\t%d\t%d\t%s\t%s\t%d\n", st.Name, st.Shards, st.Samples, bytesize.Human(st.Bytes), st.Weight, st.PerEpoch)
	}
	for _, st := range s.Streams {
		if st.Filter != "" {
			p("\nfilter\t%s: %s\n\t%d matching samples in %d of %d shards (the others are never fetched)\n", st.Name, st.Filter, st.Samples, st.MatchingShards, st.Shards)
		}
	}
	if s.Packing != "" {
		p("\npacking\t%s (a sample is a pack)\n", s.Packing)
		for _, st := range s.Streams {
			if t := st.Packing; t != nil {
				p("\t%s: %d documents in %d packs (%.2f a pack), %d tokens, %.2f%% padding; %d documents cut, %d dropped (%d tokens), %d empty\n",
					st.Name, t.Docs, t.Packs, t.DocsPerPack(), t.Tokens, t.PaddingPercent(), t.CutDocs, t.DroppedDocs, t.DroppedTokens, t.EmptyDocs)
			}
		}
	}
	for k, st := range s.Streams {
		t := st.Tokens
		if t == nil {
			continue
		}
		label := ""
		if k == 0 || s.Streams[k-1].Tokens == nil {
			label = "tokens"
		}
		if t.Counted {
			p("\n%s\t%s: %d tokens in %d documents (%.1f a document, %d at most), as the sidecar tokenizes them\n",
				label, st.Name, t.Tokens, t.Documents, float64(t.Tokens)/float64(max(t.Documents, 1)), t.Max)
		} else {
			p("\n%s\t%s: not counted yet: shardfeed index -f DATASET.yaml --stream %s counts them\n", label, st.Name, st.Name)
		}
	}
	if s.Buckets != nil {
		p("\nBUCKET\tHOLDS\tPER EPOCH\tSTEPS\n")
		for k, b := range s.Buckets {
			p("%d\t%s\t%d\t%d\n", k, b.Label, b.Samples, b.Steps)
		}
		p("(every global batch is drawn from one bucket; stream[k] is the stream's rows in bucket k)\n")
	}
	if s.Columns != nil {
		p("\nCOLUMN\tTYPE\tIN EVERY BATCH (the Python client)\n")
		for _, c := range s.Columns {
			p("%s\t%s\t%s\n", c.Name, c.Type, c.Delivered)
		}
	}
	p("\nepoch\t%d samples in %d splits of %d; %d steps of %d samples (%d per split)\n",
		s.Samples, s.NumSplits, s.SplitLen, s.Steps, s.GlobalBatchSize, s.GlobalBatchSize/int64(s.NumSplits))

	if s.Phases != nil {
		p("\nschedule\tglobal step = epoch × %d + step; each stream drawn pass after pass\n", s.Steps)
		for _, ph := range s.Phases {
			p("\t%s\t(%s)\n", ph.Changes, ph.Hash)
		}
		p("\n")
	} else {
		p("dropped\t%d samples per epoch (%.2f%%)\n", s.Dropped, 100*float64(s.Dropped)/float64(s.Samples))
		p("padded\t%d rows per epoch\n\n", s.Padded)
	}
	p("PODS\tSHARDS/POD\tBYTES/POD\tFETCHED\tDISTINCT\tEGRESS\tMIN CACHE/POD\n")
	for _, ps := range s.Pods {
		p("%d\t%d\t%s\t%s\t%s\t%.3f\t%s\n", ps.Pods, ps.MaxShardsPerPod, bytesize.Human(ps.MaxBytesPerPod),
			bytesize.Human(ps.FetchedBytes), bytesize.Human(ps.DistinctBytes), ps.EgressRatio, bytesize.Human(ps.MinCacheBytesPod))
	}
	p("\n(per pod: the largest over pods; min cache includes %d prefetched shards)\n", s.Prefetch)
	p("plan built in %s, %s allocated\n", time.Duration(s.BuildSeconds*float64(time.Second)).Round(time.Microsecond), bytesize.Human(int64(s.BuildAllocBytes)))
	return w.Flush()
}

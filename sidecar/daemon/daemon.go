// Package daemon wires the sidecar's stages together: it reads the
// dataset's streams and indexes, computes the plan, opens the cache, the
// pipeline and the progress store, and serves the socket and the metrics
// until its context ends. `shardfeed serve` and `shardfeed sidecar` both
// run it, with different sources of configuration.
package daemon

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/certs"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/planspec"
	"github.com/shardfeed/shardfeed/internal/progress"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/streams"
	"github.com/shardfeed/shardfeed/internal/workloadidentity"
	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/cache"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
	"github.com/shardfeed/shardfeed/sidecar/handoff"
	"github.com/shardfeed/shardfeed/sidecar/images"
	"github.com/shardfeed/shardfeed/sidecar/nodecache/nodeclient"
	"github.com/shardfeed/shardfeed/sidecar/pipeline"
	"github.com/shardfeed/shardfeed/sidecar/server"
	"github.com/shardfeed/shardfeed/sidecar/source"
	"github.com/shardfeed/shardfeed/sidecar/video"
)

// Config is everything the sidecar needs.
type Config struct {
	Dataset string
	Spec    datav1alpha1.TrainingDatasetSpec
	// PlannedFingerprint, when set (from the plan ConfigMap), must equal
	// the fingerprint computed here from the indexes.
	PlannedFingerprint *planner.Fingerprint
	// CredentialsDir holds the store credentials: directly (serve) or, with
	// CredentialsPerSecret, one directory per Secret name (the pod).
	CredentialsDir string
	// ConfigMapsDir holds the ConfigMaps the dataset names, as
	// DIR/<name>/<key> (a tokenizer.json's).
	ConfigMapsDir        string
	CredentialsPerSecret bool
	// IdentityDir, in a pod, holds the projected workload identity token
	// of each stream that reads with one (workloadidentity.TokenDir).
	// Outside a pod such streams read with CredentialsDir or the
	// platform's chain, as the author's CLI does.
	IdentityDir string

	// Endpoints, when set, is the platform's endpoint policy: every
	// request of the streams' stores and every address it connects to
	// are checked against it (the webhook passes the manager's).
	Endpoints *store.Endpoints
	// NodeAgent, when set, is asked for each shard before the store (the
	// node's cache, #58).
	NodeAgent *nodeclient.Client

	Socket      string
	MetricsAddr string
	// MetricsTLS serves the metrics over TLS with a certificate made in
	// memory at start (in pods: the port is reachable on the pod network).
	MetricsTLS bool
	// Pprof adds /debug/pprof/ to the metrics server.
	Pprof    bool
	CacheDir string
	// CacheLimitBytes overrides spec.sidecar.cacheLimit when > 0.
	CacheLimitBytes int64
	// CopyLocalShards copies the shards of file:// streams into the cache
	// as a remote store's; by default they are read in place, from their
	// own files (tests of the cache's downloads set it).
	CopyLocalShards   bool
	DecodedLimitBytes int64
	// HandoffBytes bounds the shared memory batches are handed over in (0:
	// through the socket), HandoffSlots segments per stream.
	HandoffBytes int64
	HandoffSlots int
	// Prefetch overrides spec.sidecar.prefetch when >= 0.
	Prefetch int
	// ReadsEvery is how often the sidecar reports what it read to the
	// job's state (default a minute).
	ReadsEvery time.Duration

	// Placement is the ranks the sidecar serves.
	sidecarconfig.Placement
	Job, Attempt string
	// Generation of the attempt (from the operator; 0: the next one).
	Generation   int64
	SidecarImage string
	// Progress records the job's registration and commits.
	Progress progress.Ledger

	// Formats the streams are read with; nil: formats.Default().
	Formats format.Registry

	// CheckSource compares each stream's source with its index at start
	// and logs what changed since it was indexed (serve -f: the job keeps
	// the plan it started with and says what that plan ignores). Not in
	// a pod, where every sidecar would list the bucket.
	CheckSource bool
	// ReindexCommand, with CheckSource, is the command that indexes a
	// stream again, by its name.
	ReindexCommand func(stream string) string
	// Resuming, with CheckSource, says the job committed progress: an
	// object its plan reads that was removed, resized or rewritten since
	// it was indexed is refused at start, not when its shard is read.
	Resuming bool

	// Phases, if set, reads the phase hashes of the schedule as they are
	// now (the mounted plan ConfigMap's), every PhasesPoll: when they are
	// no longer the plan's, the sidecar drains and exits, and restarts
	// (a native sidecar) under the new phases.
	Phases     func() ([]string, error)
	PhasesPoll time.Duration

	Log *slog.Logger
	// Started, if set, receives the server once it listens (tests).
	Started func(*server.Server)
}

// sayChanges logs what changed in each stream's source since it was
// indexed: what the plan pl, of the indexes, does not read.
// A resuming job whose plan reads an object changed since is refused.
func (cfg *Config) sayChanges(ctx context.Context, opened []*streams.Stream, pl *planner.Plan) error {
	for _, c := range source.Changes(ctx, cfg.formats(), opened) {
		if cfg.Resuming && c.Change != nil && c.Change.OfIndexed() {
			return fmt.Errorf("stream %q: objects of the plan job %q committed on changed since they were indexed: %s; the job cannot go on from its commit: "+
				"start a new job (--fresh, or another --job), which reads the stream as it is, or restore the objects", c.Stream, cfg.Job, c.Change)
		}
		command := "shardfeed index"
		if cfg.ReindexCommand != nil {
			command = cfg.ReindexCommand(c.Stream)
		}
		cmp.Or(cfg.Log, slog.Default()).Warn(c.Message(command), "stream", c.Stream, "plan", pl.Fingerprint().Sum)
	}
	return nil
}

// openSources opens the streams' shard decoders, refusing any whose
// served columns this binary cannot decode (a lerobot stream's cameras
// without FFmpeg) before a shard is read.
func (cfg *Config) openSources(ctx context.Context, opened []*streams.Stream, read source.ReadFunc) ([]*source.Stream, error) {
	sources, err := source.OpenAll(ctx, streams.PlanStreams(opened), cfg.formats(), read, cfg.Spec.MissingColumns)
	if err != nil {
		return nil, err
	}
	if err := source.CheckDecoders(sources); err != nil {
		return nil, fmt.Errorf("TrainingDataset %q: %w", cfg.Dataset, err)
	}
	return sources, nil
}

// sayDropped warns when a plan without dropLast still leaves samples of
// each epoch out: the T mod S samples of the splits' unequal lengths,
// which padding does not bring back. A user who asked for every sample
// (drop_last=False) is told, with how to get them.
func (cfg *Config) sayDropped(pl *planner.Plan) {
	if pl.Params().DropLast || pl.DroppedPerEpoch() == 0 {
		return
	}
	cmp.Or(cfg.Log, slog.Default()).Warn(fmt.Sprintf("%d of the epoch's %d samples are in no split and served by no batch (dropLast is false, but spec.numSplits %d splits them into equal lengths of %d): "+
		"choose a numSplits that divides %d (and globalBatchSize) to serve every sample", pl.DroppedPerEpoch(), pl.Total(), pl.NumSplits(), pl.SplitLen(), pl.Total()),
		"dataset", cfg.Dataset, "plan", pl.Fingerprint().Sum)
}

func (cfg *Config) formats() format.Registry {
	if cfg.Formats != nil {
		return cfg.Formats
	}
	return formats.Default()
}

// minCache is the cache this sidecar's pod needs (planner.MinCacheBytes):
// with replication groups, that of the up to min(procs per pod, D)
// data-parallel ranks it may serve, which it learns only from its clients.
func (cfg *Config) minCache(pl *planner.Plan, prefetch int) (int64, string, error) {
	pods := max(cfg.Pods, 1)
	if cfg.DataParallel == 0 {
		need, err := pl.MinCacheBytes(pods, prefetch)
		return need, fmt.Sprintf("a pod of %d", pods), err
	}
	perRank, err := pl.MinCacheBytes(cfg.DataParallel, 0)
	if err != nil {
		return 0, "", err
	}
	ranks := min(max(cfg.ProcsPerPod, 1), cfg.DataParallel)
	return int64(ranks)*perRank + int64(prefetch)*pl.MaxShardBytes(), fmt.Sprintf("a pod serving %d of %d data-parallel ranks", ranks, cfg.DataParallel), nil
}

// cacheLimit is the cache's byte budget (the flag's, else the spec's; 0:
// none), refused when below what a pod needs to never stall.
func (cfg *Config) cacheLimit(spec *datav1alpha1.TrainingDatasetSpec, pl *planner.Plan, opened []*streams.Stream, byStream map[string]store.Store,
	prefetch int) (int64, error) {
	limit := cfg.CacheLimitBytes
	if limit <= 0 && spec.Sidecar.CacheLimit != nil {
		limit = spec.Sidecar.CacheLimit.Value()
	}
	lean := slices.ContainsFunc(opened, func(st *streams.Stream) bool { return st.Index.Counts != nil })
	switch {
	case limit <= 0:
	case lean:
		// The minimum would read the entry of every shard the pod reads in
		// the epoch, which an index read in parts reads as it goes.
		cmp.Or(cfg.Log, slog.Default()).Info("The cache limit is taken as given: a stream's index is read in parts, and the cache a pod needs is not computed from it", "cacheLimit", limit)
	case !cfg.CopyLocalShards && allLocal(byStream):
		// Every shard is read in place: the cache holds none of them.
	default:
		need, what, err := cfg.minCache(pl, prefetch)
		if err != nil {
			return 0, err
		}
		if need > limit {
			return 0, fmt.Errorf("the cache limit of %d bytes is below the %d bytes %s needs to never stall (with %d shards prefetched): raise spec.sidecar.cacheLimit, or lower the prefetch or blockSize", limit, need, what, prefetch)
		}
	}
	return limit, nil
}

// allLocal says every stream is on this machine's disk (read in place).
func allLocal(stores map[string]store.Store) bool {
	for _, st := range stores {
		if _, ok := store.LocalPath(st, "shard"); !ok {
			return false
		}
	}
	return len(stores) > 0
}

// watchPhases stops the sidecar once the schedule's phases are no longer
// those of its plan: it restarts under the new ones (their Register
// refuses a schedule that changed a phase the job used).
func watchPhases(ctx context.Context, cfg Config, have []string, stop context.CancelFunc, log *slog.Logger) {
	every := cmp.Or(cfg.PhasesPoll, 10*time.Second)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		now, err := cfg.Phases()
		if err != nil {
			log.Warn("Cannot read the schedule's phases", "err", err)
			continue
		}
		if !slices.Equal(now, have) {
			log.Info("The schedule changed: restarting to serve its new phases", "phases", len(now), "had", len(have))
			stop()
			return
		}
	}
}

// NewAttempt returns a fresh attempt id, for a process that is its own
// attempt (`shardfeed serve`).
func NewAttempt() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("local-%d-%s", time.Now().Unix(), hex.EncodeToString(b[:]))
}

// Feed is the data plane of a sidecar, ready to serve.
type Feed struct {
	Plan     *planner.Plan
	Cache    *cache.Cache
	Pipeline *pipeline.Pipeline
	Prefetch int
	// StoreCounts are the requests the streams' stores made, the indexes'
	// reads at Open included.
	StoreCounts *store.Counts
	// Opened are the streams as opened, their indexes' readers with them.
	Opened []*streams.Stream
}

// IndexBytes is the bytes of the streams' indexes read in parts so far
// (header, counts, and the entries resolved), and their shards' count; 0,
// 0 where every index was read whole.
func (f *Feed) IndexBytes() (read, entries int64) {
	for _, st := range f.Opened {
		if c := st.Layout.Lean; c != nil {
			read += c.BytesRead()
			entries += int64(c.Resolved())
		}
	}
	return read, entries
}

// Open reads the streams' indexes, computes the plan and opens the cache
// and the pipeline.
func Open(ctx context.Context, cfg Config) (*Feed, error) {
	spec := &cfg.Spec

	byStream := map[string]store.Store{}
	storeSources := map[string]store.Source{}
	opened := make([]*streams.Stream, len(spec.Streams))
	counts := &store.Counts{}
	for i, s := range spec.Streams {
		src := streams.SharedCredentials(s, cfg.CredentialsDir)
		src.Counts, src.ConfigMapsDir, src.Endpoints = counts, cfg.ConfigMapsDir, cfg.Endpoints
		if cfg.CredentialsPerSecret {
			src.CredentialsDir, src.CredentialsOptional = "", false
			if s.Source.CredentialsSecretRef != nil {
				src.CredentialsDir = filepath.Join(cfg.CredentialsDir, s.Source.CredentialsSecretRef.Name)
			}
			if cfg.IdentityDir != "" {
				src.Identity = workloadidentity.Identity(s.Source, store.TokenFile(workloadidentity.TokenPath(cfg.IdentityDir, s.Name)))
			}
		}
		open := streams.Open
		if planspec.InParts(spec) {
			open = streams.OpenLean // a compact index: the entries of the pod's shards alone
		}
		st, err := open(ctx, i, planspec.Resolved(spec, i), spec.Packing, src, 0)
		if err != nil {
			return nil, err
		}
		if _, err := st.Served(); err != nil {
			return nil, err
		}
		if spec.Bucketing != nil {
			if err := st.OpenBuckets(ctx, spec.Bucketing, 0); err != nil {
				return nil, err
			}
		}
		byStream[s.Name], opened[i], storeSources[s.Name] = st.Store, st, src
		if f := st.Filter; f != nil && f.StoreName != s.Name {
			byStream[f.StoreName] = st.IndexStore // the runs, where source.indexURI put them
		}
	}
	indexes := streams.Indexes(opened)
	params, err := planspec.Params(spec, indexes)
	if err != nil {
		return nil, fmt.Errorf("TrainingDataset %q: %w", cfg.Dataset, err)
	}
	pl, err := planner.New(params)
	if err != nil {
		return nil, fmt.Errorf("TrainingDataset %q: %w", cfg.Dataset, err)
	}
	cfg.sayDropped(pl)
	if cfg.CheckSource {
		if err := cfg.sayChanges(ctx, opened, pl); err != nil {
			return nil, err
		}
	}
	if f := cfg.PlannedFingerprint; f != nil && f.Sum != pl.Fingerprint().Sum {
		return nil, fmt.Errorf("the indexes changed since the operator planned TrainingDataset %q (%s, now %s): %v; a changed dataset is a new TrainingDataset",
			cfg.Dataset, f.Sum, pl.Fingerprint().Sum, f.Diff(pl.Fingerprint()))
	}

	prefetch := planspec.Prefetch(spec)
	if cfg.Prefetch >= 0 {
		prefetch = cfg.Prefetch
	}
	limit, err := cfg.cacheLimit(spec, pl, opened, byStream, prefetch)
	if err != nil {
		return nil, err
	}
	// Streams on this machine's disk (file://) are read in place, not
	// copied into the cache (cache.Options.InPlace).
	c, err := cache.New(cache.Options{Dir: cfg.CacheDir, LimitBytes: limit, Node: cfg.nodeFetch(storeSources), OnNodeMiss: cfg.nodeMiss,
		NodeWarm: cfg.nodeWarm(storeSources), InPlace: !cfg.CopyLocalShards}, byStream)
	if err != nil {
		return nil, err
	}
	read := func(ctx context.Context, part cache.Shard) ([]byte, error) {
		m, err := c.Map(ctx, part)
		if err != nil {
			return nil, err
		}
		defer m.Close()
		var out []byte
		err = pipeline.GuardFaults(func() error {
			out = bytes.Clone(m.Bytes())
			return nil
		})
		return out, err
	}
	sources, err := cfg.openSources(ctx, opened, read)
	if err != nil {
		return nil, err
	}
	opts := pipeline.Options{Plan: pl, Streams: sources, Cache: c, PrefetchShards: prefetch, DecodedLimitBytes: cfg.DecodedLimitBytes,
		SkipCorrupt: spec.OnCorruptShard == datav1alpha1.CorruptShardSkip, OnSkip: cfg.recordSkip, Images: imageSpecs(spec.Decode)}
	if cfg.PodScoped() {
		// A pod's sidecar serves its pod's splits: with an index read in
		// parts, it builds each epoch for them alone.
		if opts.FirstSplit, opts.Splits, err = pl.PodSplits(cfg.Pod, cfg.Pods); err != nil {
			return nil, err
		}
	}
	pipe, err := pipeline.New(opts)
	if err != nil {
		return nil, err
	}
	return &Feed{Plan: pl, Cache: c, Pipeline: pipe, Prefetch: prefetch, StoreCounts: counts, Opened: opened}, nil
}

// imageSpecs are spec.decode's image columns.
func imageSpecs(decode []datav1alpha1.ColumnDecode) map[string]images.Spec {
	out := map[string]images.Spec{}
	for _, d := range decode {
		out[d.Column] = images.SpecOf(d.Image)
	}
	return out
}

// recordSkip logs a skipped shard and records it in the job's state, where
// the operator reports it (status, events).
func (cfg *Config) recordSkip(s pipeline.Skip) {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	log.Warn("Corrupt shard skipped: its samples are delivered as pad rows (_shardfeed_pad) with their planned ids (onCorruptShard: skip)",
		"stream", s.Stream, "shard", s.Shard, "samples", s.Samples, "reason", s.Reason)
	if cfg.Progress == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cfg.Progress.Skip(ctx, configmaps.SkippedShard{Stream: s.Stream, Shard: s.Shard, Samples: s.Samples, Reason: s.Reason, Attempt: cfg.Attempt}); err != nil {
		log.Error("Recording the skipped shard in the job's state failed", "stream", s.Stream, "shard", s.Shard, "err", err)
	}
}

// register records the job's attempt in its progress and returns the job
// as recorded, with its committed state.
func register(ctx context.Context, cfg Config, pl *planner.Plan) (progress.Job, *configmaps.State, error) {
	job := progress.Job{Dataset: cfg.Dataset, Job: cfg.Job, Attempt: cfg.Attempt, Generation: cfg.Generation, Fingerprint: pl.Fingerprint(), Steps: pl.Steps(),
		SidecarImage: cfg.SidecarImage, Phases: pl.PhaseHashes(), PhaseStarts: pl.PhaseStarts()}
	if cfg.PodMode() {
		job.Pods, job.WorldSize, job.DataParallel = cfg.Pods, cfg.World(), cfg.DataParallel
	}
	state, err := cfg.Progress.Register(ctx, job)
	if err != nil {
		return job, nil, err
	}
	if job.Generation == 0 {
		job.Generation = state.GenerationOf(job.Attempt)
	}
	return job, state, nil
}

// serveMetrics serves reg's metrics (and pprof, if asked) on
// cfg.MetricsAddr, over TLS with a certificate made now if asked.
func serveMetrics(cfg Config, reg *prometheus.Registry) (*http.Server, error) {
	ml, err := net.Listen("tcp", cfg.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("metrics address %s: %w (choose another with --metrics-addr, or \"\" for none)", cfg.MetricsAddr, err)
	}
	if cfg.MetricsTLS {
		cert, err := certs.SelfSigned("shardfeed-sidecar", 10*365*24*time.Hour)
		if err != nil {
			_ = ml.Close()
			return nil, err
		}
		ml = tls.NewListener(ml, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ml) }()
	return srv, nil
}

// becomeReady sets the server ready: at once, or for a pod-scoped sidecar
// once the shards of the step its trainer resumes at (the committed one,
// or the next epoch's start when the committed one is done) are fetched.
func becomeReady(ctx context.Context, cfg Config, feed *Feed, state *configmaps.State, srv *server.Server, start time.Time) error {
	if !cfg.PodScoped() {
		srv.SetReady()
		return nil
	}
	pl, pipe := feed.Plan, feed.Pipeline
	first, n, err := pl.PodSplits(cfg.Pod, cfg.Pods)
	if err != nil {
		return err
	}
	epoch, step := state.ResumeAt(pl.Steps())
	if err := pipe.Prefetch(epoch, first, n, step); err != nil {
		return err
	}
	go func() {
		for !pipe.Ready(epoch, first, n, step) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		srv.SetReady()
		read, entries := feed.IndexBytes()
		cfg.Log.Info("Ready", "epoch", epoch, "step", step, "after", time.Since(start).Round(time.Millisecond), "indexBytes", read, "indexEntries", entries)
	}()
	return nil
}

// Run starts the sidecar and serves until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	log := cfg.Log
	start := time.Now()
	feed, err := Open(ctx, cfg)
	if err != nil {
		return err
	}
	pl, pipe := feed.Plan, feed.Pipeline
	defer pipe.Close()

	job, state, err := register(ctx, cfg, pl)
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv, err := server.New(server.Config{Pipeline: pipe, Progress: cfg.Progress, Job: job, Placement: cfg.Placement, Log: log, Registry: reg,
		Handoff: handoff.NewPool(cfg.HandoffBytes), HandoffSlots: cfg.HandoffSlots, StoreCounts: feed.StoreCounts})
	if err != nil {
		return err
	}
	l, err := server.Listen(cfg.Socket)
	if err != nil {
		return err
	}
	if cfg.MetricsAddr != "" {
		metricsSrv, err := serveMetrics(cfg, reg)
		if err != nil {
			_ = l.Close()
			return err
		}
		defer func() { _ = metricsSrv.Close() }()
	}
	log.Info("Serving", "dataset", cfg.Dataset, "socket", cfg.Socket, "metrics", cfg.MetricsAddr, "metricsTLS", cfg.MetricsTLS, "plan", pl.Fingerprint().Sum,
		"samples", pl.Total(), "steps", pl.Steps(), "numSplits", pl.NumSplits(), "globalBatchSize", pl.GlobalBatchSize(),
		"rankMode", cfg.RankMode, "job", cfg.Job, "attempt", cfg.Attempt, "committedEpoch", state.Epoch, "committedStep", state.Step,
		"startup", time.Since(start).Round(time.Millisecond))
	if read, entries := feed.IndexBytes(); read > 0 {
		log.Info("Indexes read in parts", "bytes", read, "entries", entries)
	}
	if len(cfg.Spec.Decode) > 0 {
		log.Info("Decoding images", "columns", len(cfg.Spec.Decode), "jpegDecoder", images.JPEGDecoder)
	}
	var videoStreams []string
	for _, s := range cfg.Spec.Streams {
		if s.Format == datav1alpha1.FormatLeRobot {
			videoStreams = append(videoStreams, s.Name)
		}
	}
	if len(videoStreams) > 0 { // a lerobot stream's cameras are decoded here
		log.Info("Decoding video", "streams", strings.Join(videoStreams, ","), "videoDecoder", video.Decoder)
	}

	if err := becomeReady(ctx, cfg, feed, state, srv, start); err != nil {
		return err
	}
	if cfg.Started != nil {
		cfg.Started(srv)
	}
	if cfg.Phases != nil && pl.Scheduled() {
		var stop context.CancelFunc
		ctx, stop = context.WithCancel(ctx)
		defer stop()
		go watchPhases(ctx, cfg, pl.PhaseHashes(), stop, log)
	}
	stopReports := reportReads(ctx, cfg.Progress, feed.Cache, cfg.ReadsEvery, log)
	err = srv.Serve(ctx, l)
	pipe.Close() // nothing more is fetched: the last report and the log count it all
	stopReports()
	cs := feed.Cache.Stats()
	log.Info("Stopped", "err", err, "storeBytes", cs.FetchedBytes, "downloads", cs.Downloads,
		"nodeCacheHits", cs.Node.Hits, "nodeCacheBytes", cs.Node.Bytes, "nodeCacheMisses", cs.Node.Misses)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// readsOf is what a cache's counters say the sidecar read.
func readsOf(s cache.Stats) configmaps.Reads {
	return configmaps.Reads{StoreBytes: s.FetchedBytes, NodeCacheHits: s.Node.Hits, NodeCacheBytes: s.Node.Bytes, NodeCacheMisses: s.Node.Misses}
}

// reportReads tells the job's state what the sidecar read since its last
// report, every interval (default a minute) and once more when stopped:
// status.jobs sums every sidecar's. A report that fails is counted in the
// next.
func reportReads(ctx context.Context, ledger progress.Ledger, c *cache.Cache, every time.Duration, log *slog.Logger) (stop func()) {
	if every <= 0 {
		every = time.Minute
	}
	var last configmaps.Reads
	report := func(ctx context.Context) {
		now := readsOf(c.Stats())
		d := now.Sub(last)
		if d.IsZero() {
			return
		}
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := ledger.Reads(ctx, d); err != nil {
			log.Debug("The job's state did not take this sidecar's reads; the next report counts them", "err", err)
			return
		}
		last = now
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				report(ctx)
			}
		}
	}()
	return func() {
		cancel()
		<-done
		fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer fcancel()
		report(fctx)
	}
}

// nodeFetch asks the node agent for the streams' shards; nil without
// an agent.
func (cfg Config) nodeFetch(sources map[string]store.Source) cache.NodeFetch {
	if cfg.NodeAgent == nil {
		return nil
	}
	return cfg.NodeAgent.Fetch(sources)
}

// nodeWarm names to the node agent the shards of the streams the pod
// reads next; nil without an agent.
func (cfg Config) nodeWarm(sources map[string]store.Source) cache.NodeWarm {
	if cfg.NodeAgent == nil {
		return nil
	}
	return cfg.NodeAgent.Warmer(sources)
}

// nodeMiss logs why the node agent did not give a shard, which the
// sidecar then reads from the store.
func (cfg Config) nodeMiss(s cache.Shard, err error) {
	cfg.NodeAgent.Fallback()
	cmp.Or(cfg.Log, slog.Default()).Debug("The node agent did not give a shard; reading the store", "stream", s.Stream, "key", s.Key, "reason", err.Error())
}

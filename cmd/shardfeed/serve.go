package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/index/sidefile"
	"github.com/shardfeed/shardfeed/internal/memlimit"
	"github.com/shardfeed/shardfeed/internal/planspec"
	"github.com/shardfeed/shardfeed/internal/progress"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/streams"
	"github.com/shardfeed/shardfeed/internal/workloadidentity"
	"github.com/shardfeed/shardfeed/sidecar/daemon"
	"github.com/shardfeed/shardfeed/sidecar/handoff"
	"github.com/shardfeed/shardfeed/sidecar/nodecache/nodeclient"
)

// feedOptions are the flags `serve` and `sidecar` share.
type feedOptions struct {
	file, planDir        string
	socket, metricsAddr  string
	cacheDir, cacheLimit string
	decodedLimit         string
	handoffMemory        string
	handoffSlots         int
	prefetch             int
	credentials          string
	configMaps           string
	state                string
	contract             sidecarconfig.Config
	// placement is the ranks served, from the flags.
	placement         sidecarconfig.Placement
	phasesPoll        time.Duration
	job, attempt      string
	fresh, mustResume bool
	namespace, image  string
	logFormat         string
	pprof             bool
	// nodeAgent is the node agent's URL, nodeAgentAddr the address
	// dialled (the sidecar's, #58, #85).
	nodeAgent, nodeAgentAddr, nodeAgentToken string
	// allowedEndpoints and allowCloudEndpoints are the platform's endpoint
	// policy (the sidecar's, from the webhook).
	allowedEndpoints    []string
	allowCloudEndpoints bool
	nodeAgentWait       time.Duration
	metricsTLS          bool
	generation          int64
	operator            progress.Remote
}

// DefaultSocket is the socket inside a pod (design §1).
const DefaultSocket = sidecarconfig.SocketPath

func (o *feedOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&o.socket, "socket", o.socket, "Unix socket to serve on")
	// Loopback by default: a laptop's serve is not a service of its
	// network (the injected sidecar is given its pod's address).
	f.StringVar(&o.metricsAddr, "metrics-addr", fmt.Sprintf("127.0.0.1:%d", sidecarconfig.MetricsPort), `TCP address of the Prometheus metrics ("" for none; ":9464" for every interface)`)
	f.StringVar(&o.cacheDir, "cache-dir", o.cacheDir, "directory of the shard cache")
	f.StringVar(&o.cacheLimit, "cache-limit", "", "bytes of the shard cache, e.g. 20Gi (default: spec.sidecar.cacheLimit, else unbounded)")
	f.StringVar(&o.decodedLimit, "memory-limit", "1Gi", "memory for decoded shards not in use (at most half the container's memory limit unless set)")
	f.StringVar(&o.handoffMemory, "handoff-memory", "", "shared memory the batches are handed over in, all streams together, e.g. 512Mi; 0: through the socket (default: spec.sidecar.handoffMemory, else 256Mi)")
	f.IntVar(&o.handoffSlots, "handoff-slots", handoff.DefaultSlots, "batches each stream may have in shared memory at once")
	f.IntVar(&o.prefetch, "prefetch", -1, "shards fetched ahead (default: spec.sidecar.prefetch, else 2)")
	f.Lookup("prefetch").DefValue = "0" // -1 means "not given": the usage says the default
	f.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	f.BoolVar(&o.pprof, "pprof", false, "serve Go's /debug/pprof/ on the metrics address")
	f.BoolVar(&o.metricsTLS, "metrics-tls", false, "serve the metrics over TLS, with a certificate made at start (pods get it from the webhook)")
	f.IntVar(&o.placement.DataParallel, "data-parallel-size", o.contract.DataParallel,
		"the job's data-parallel size when its ranks form replication groups (tensor, context, pipeline parallel): clients then give dp_rank and dp_size (0: none)")
}

func newServeCommand() *cobra.Command {
	o := &feedOptions{placement: sidecarconfig.Placement{RankMode: sidecarconfig.RankModeClient}, job: "local"}
	cmd := &cobra.Command{
		Use:   "serve -f DATASET.yaml [--socket PATH] [--cache-dir DIR] [--state FILE]",
		Short: "Serve a TrainingDataset's batches on a Unix socket on this machine, without Kubernetes",
		Long: `serve runs the sidecar's server on one machine: it reads the TrainingDataset
manifest and its streams' indexes (file://, s3://, gs:// or az://), computes the plan, and
serves any rank of any valid world size on the socket. Commits go to a local
state file, so a restarted serve resumes the job where it was committed.

The socket is .shardfeed/feed.sock in the working directory unless --socket
says otherwise: the Python client looks there (after the pod's
/var/run/shardfeed/feed.sock), so a training script started in the same
directory needs no setting; elsewhere, set SHARDFEED_SOCKET.`,
		Example: `  shardfeed serve -f dataset.yaml --socket /tmp/feed.sock
  SHARDFEED_SOCKET=/tmp/feed.sock torchrun --nproc-per-node 2 train.py`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd, false)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.file, "filename", "f", "", "TrainingDataset manifest")
	f.StringVar(&o.state, "state", "", "state file of the job's commits (default .shardfeed/<dataset>/<job>/state.json)")
	f.StringVar(&o.credentials, "credentials-dir", "", "for s3:// streams: directory with the files AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; empty: the default chain")
	f.StringVar(&o.configMaps, "configmaps-dir", "", "directory of the ConfigMaps the dataset names, as DIR/<name>/<key> (a tokenizer's configMapRef)")
	f.StringVar(&o.job, "job", o.job, "the job: its commits are its own state, so another --job starts from the beginning and leaves this one's alone")
	f.BoolVar(&o.fresh, "fresh", false, "start the job from the beginning: its earlier state, if any, is kept as the job named --job plus the time (local-20261123-195900), and the next run without --fresh resumes this one")
	f.BoolVar(&o.mustResume, "resume", false, "refuse to start unless the job has committed progress to resume (default: resume if it has, start from the beginning if not)")
	o.addFlags(f)
	f.Lookup("socket").DefValue = sidecarconfig.LocalSocket
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func newSidecarCommand() *cobra.Command {
	o := &feedOptions{}
	env := func(name, def string) string {
		if v, ok := os.LookupEnv(name); ok {
			return v
		}
		return def
	}
	// The webhook's side of the contract; a malformed value is an error
	// when the command runs (flags may still override it).
	contract, contractErr := sidecarconfig.FromEnv(os.LookupEnv)
	cmd := &cobra.Command{
		Use:   "sidecar",
		Short: "Run as the data-loading sidecar of a training pod (configured by the webhook)",
		Long: `sidecar is what the operator's webhook injects into a training pod. Its
configuration comes from flags or the environment the webhook sets:

  SHARDFEED_DATASET, SHARDFEED_PLAN_DIR (the mounted <dataset>-plan ConfigMap)
  SHARDFEED_RANK_MODE (pod or client), SHARDFEED_POD_RANK, SHARDFEED_PODS,
  SHARDFEED_PROCS_PER_POD, SHARDFEED_JOB, SHARDFEED_ATTEMPT, POD_NAMESPACE,
  SHARDFEED_SOCKET, SHARDFEED_CACHE_DIR, SHARDFEED_CREDENTIALS_DIR (one
  directory per credentials Secret), SHARDFEED_IMAGE.

Registrations and commits go to the operator's progress endpoint
(SHARDFEED_OPERATOR_URL, authenticated by the pod's projected token of
audience "shardfeed"; SHARDFEED_GENERATION fences replaced attempts), or to
--state FILE outside a cluster.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if contractErr != nil {
				return contractErr
			}
			return o.run(cmd, true)
		},
	}
	o.socket = env(sidecarconfig.EnvSocket, DefaultSocket)
	o.cacheDir = env(sidecarconfig.EnvCacheDir, sidecarconfig.CacheDir)
	o.contract = contract
	f := cmd.Flags()
	f.StringVarP(&o.file, "filename", "f", "", "TrainingDataset manifest (instead of --plan-dir)")
	f.StringVar(&o.planDir, "plan-dir", env(sidecarconfig.EnvPlanDir, ""), "the mounted <dataset>-plan ConfigMap")
	f.StringVar((*string)(&o.placement.RankMode), "rank-mode", string(contract.RankMode), "pod: serve this pod's ranks; client: any rank a client names")
	f.IntVar(&o.placement.Pod, "pod-rank", contract.Pod, "the pod's index in the job")
	f.IntVar(&o.placement.Pods, "pods", contract.Pods, "pods of the job")
	f.IntVar(&o.placement.ProcsPerPod, "procs-per-pod", contract.ProcsPerPod, "training processes (ranks) per pod")
	f.StringVar(&o.job, "job", contract.Job, "job identity")
	f.StringVar(&o.attempt, "attempt", contract.Attempt, "attempt id shared by the pods of one job attempt")
	f.Int64Var(&o.generation, "generation", contract.Generation, "the attempt's generation, from the operator (0: the next one, with --state)")
	f.StringVar(&o.namespace, "namespace", contract.Namespace, "the pod's namespace")
	f.StringVar(&o.image, "image", contract.Image, "the sidecar image, pinned in the job's state")
	f.StringVar(&o.credentials, "credentials-dir", env(sidecarconfig.EnvCredentialsDir, sidecarconfig.CredentialsDir), "directory with one sub-directory per credentials Secret")
	f.StringVar(&o.configMaps, "configmaps-dir", sidecarconfig.ConfigMapsDir, "directory with one sub-directory per ConfigMap the dataset names (a tokenizer's)")
	f.StringVar(&o.state, "state", "", "state file instead of the operator (no cluster)")
	f.StringVar(&o.operator.URL, "operator-url", contract.OperatorURL, "the operator's progress endpoint, https://SERVICE.NAMESPACE.svc:PORT")
	f.StringVar(&o.operator.Addr, "operator-addr", contract.OperatorAddr, "HOST:PORT dialled first (the Service's cluster IP), the URL's host if it does not answer")
	f.StringVar(&o.operator.CAFile, "operator-ca", "", "the operator's CA bundle (default: operator-ca.crt in --plan-dir)")
	f.StringVar(&o.operator.TokenFile, "token-file", sidecarconfig.TokenPath, "the projected ServiceAccount token (audience shardfeed)")
	f.StringVar(&o.nodeAgent, "node-agent", env(sidecarconfig.EnvNodeAgent, ""), "the node agent's URL, https://SERVICE.NAMESPACE.svc:PORT (the node cache; set by the webhook): its certificate must chain to the operator's CA (--operator-ca) and carry that name. \"\": none. Any failure of the agent reads the store")
	f.StringVar(&o.nodeAgentAddr, "node-agent-addr", env(sidecarconfig.EnvNodeAgentAddr, ""), "HOST:PORT dialled for the node agent (its node-local Service's cluster IP), the URL's host if empty")
	f.StringVar(&o.nodeAgentToken, "node-agent-token", sidecarconfig.NodeAgentTokenPath, "the projected ServiceAccount token (audience shardfeed-agent) shown to the node agent")
	f.DurationVar(&o.nodeAgentWait, "node-agent-wait", nodeclient.DefaultWait, "how long to wait for the node agent's answer to begin before reading the store")
	f.StringSliceVar(&o.allowedEndpoints, "allowed-endpoints", splitList(env(sidecarconfig.EnvAllowedEndpoints, "")), "the platform's store endpoints beside the clouds' own (the manager's --allowed-endpoints, set by the webhook): every request and every address the sidecar connects to is checked")
	f.BoolVar(&o.allowCloudEndpoints, "allow-cloud-endpoints", env(sidecarconfig.EnvAllowCloudEndpoints, "") == "true", "allow the clouds' own storage and token hosts (the manager's --allow-cloud-endpoints, set by the webhook)")
	f.DurationVar(&o.phasesPoll, "schedule-poll", 10*time.Second, "how often the sidecar rereads the plan's schedule (it restarts when phases are appended)")
	o.addFlags(f)
	f.Lookup("socket").DefValue = DefaultSocket
	return cmd
}

func (o *feedOptions) run(cmd *cobra.Command, inPod bool) error {
	var handler slog.Handler = slog.NewTextHandler(cmd.ErrOrStderr(), nil)
	switch o.logFormat {
	case "json":
		handler = slog.NewJSONHandler(cmd.ErrOrStderr(), nil)
	case "text":
	default:
		return fmt.Errorf("--log-format %q: use text or json", o.logFormat)
	}
	log := slog.New(handler)
	setRetryLog(log, store.DefaultRetry.MaxElapsed) // in the server's own log format
	soft, err := memlimit.Apply(memlimit.CgroupFile)
	if err != nil {
		log.Warn("Not setting a Go memory limit", "err", err)
	} else if soft > 0 {
		log.Info("Go memory limit set from the container's", "bytes", soft, "fraction", memlimit.Fraction)
	}
	cfg := daemon.Config{
		Socket: o.socket, MetricsAddr: o.metricsAddr, MetricsTLS: o.metricsTLS, Pprof: o.pprof, CacheDir: o.cacheDir, Prefetch: o.prefetch,
		Placement: o.placement, Job: o.job, Attempt: o.attempt,
		HandoffBytes: -1, HandoffSlots: o.handoffSlots, SidecarImage: o.image, CredentialsDir: o.credentials, CredentialsPerSecret: inPod, Log: log,
		ConfigMapsDir: o.configMaps,
	}
	if inPod {
		cfg.IdentityDir = workloadidentity.TokenDir
	}
	if len(o.allowedEndpoints) > 0 || o.allowCloudEndpoints {
		cfg.Endpoints = stores.Policy(o.allowedEndpoints, o.allowCloudEndpoints)
	}
	if o.nodeAgent != "" {
		caFile := o.operator.CAFile
		if caFile == "" {
			caFile = filepath.Join(o.planDir, configmaps.KeyOperatorCA)
		}
		// The node cache only saves reads: a value this sidecar cannot use
		// (an older webhook's socket path) leaves it out, said once.
		if agent, err := nodeclient.New(nodeclient.Options{URL: o.nodeAgent, Addr: o.nodeAgentAddr, CAFile: caFile, TokenFile: o.nodeAgentToken, Wait: o.nodeAgentWait}); err != nil {
			log.Warn("Not asking the node agent: every shard is read from the store", "reason", err.Error())
		} else {
			cfg.NodeAgent = agent
			log.Info("Shards are asked of the node agent first", "url", o.nodeAgent, "addr", o.nodeAgentAddr, "wait", o.nodeAgentWait.String())
		}
	}
	for _, q := range []struct {
		flag, value string
		into        *int64
	}{{"--cache-limit", o.cacheLimit, &cfg.CacheLimitBytes}, {"--memory-limit", o.decodedLimit, &cfg.DecodedLimitBytes}, {"--handoff-memory", o.handoffMemory, &cfg.HandoffBytes}} {
		if q.value == "" {
			continue
		}
		v, err := resource.ParseQuantity(q.value)
		if err != nil || v.Sign() < 0 {
			return fmt.Errorf("%s %q: write bytes like 512Mi or 20Gi", q.flag, q.value)
		}
		*q.into = v.Value()
	}
	if o.handoffSlots < 1 || o.handoffSlots > handoff.MaxSlots {
		return fmt.Errorf("--handoff-slots %d: use 1 to %d", o.handoffSlots, handoff.MaxSlots)
	}
	switch {
	case o.file != "" && o.planDir != "":
		return fmt.Errorf("-f and --plan-dir exclude each other: give one")
	case o.file != "":
		ds, err := readDataset(o.file, cmd.InOrStdin())
		if err != nil {
			return err
		}
		cfg.Dataset, cfg.Spec = ds.Name, ds.Spec
		cfg.CheckSource = true // a job keeps its plan, and says what it ignores
		cfg.ReindexCommand = func(stream string) string { return reindexCommand(o.file, ds, stream) }
	case o.planDir != "":
		p, err := configmaps.PlanFromDir(o.planDir)
		if err != nil {
			return err
		}
		cfg.Dataset, cfg.Spec, cfg.PlannedFingerprint = o.contract.Dataset, p.Spec, &p.Fingerprint
		cfg.PhasesPoll = o.phasesPoll
		cfg.Phases = func() ([]string, error) {
			p, err := configmaps.PlanFromDir(o.planDir)
			if err != nil {
				return nil, err
			}
			return planspec.PhaseHashes(&p.Spec), nil
		}
		if cfg.Dataset == "" {
			return fmt.Errorf("%s is not set: the sidecar needs its TrainingDataset's name", sidecarconfig.EnvDataset)
		}
	default:
		return fmt.Errorf("give the dataset with -f DATASET.yaml or --plan-dir DIR (the mounted <dataset>-plan ConfigMap)")
	}
	if cfg.HandoffBytes < 0 {
		cfg.HandoffBytes = planspec.HandoffBytes(&cfg.Spec)
	}
	// The hand-off memory is charged to the container as well (the webhook
	// adds it to the sidecar's limit): the Go heap gets the rest.
	if soft > 0 && cfg.HandoffBytes > 0 {
		soft = max(soft-cfg.HandoffBytes, soft/2)
		debug.SetMemoryLimit(soft)
	}
	// In a container with a memory limit (a Guaranteed pod's sidecar), the
	// decoded shards get at most half of it unless told otherwise.
	if soft > 0 && !cmd.Flags().Changed("memory-limit") && cfg.DecodedLimitBytes > soft/2 {
		cfg.DecodedLimitBytes = soft / 2
		log.Info("Decoded shards bounded by half the container's memory limit", "bytes", cfg.DecodedLimitBytes)
	}
	if !inPod {
		if o.socket == "" {
			o.socket = sidecarconfig.LocalSocket
			cfg.Socket = o.socket
		}
		if o.cacheDir == "" {
			cfg.CacheDir = filepath.Join(".shardfeed", cfg.Dataset, "cache")
		}
		if o.fresh && o.mustResume {
			return fmt.Errorf("--fresh and --resume exclude each other: a fresh job has nothing to resume")
		}
		if o.state == "" {
			o.state = filepath.Join(".shardfeed", cfg.Dataset, o.job, "state.json")
		}
		if o.fresh {
			if err := o.setAside(cmd.ErrOrStderr(), cfg.Dataset); err != nil {
				return err
			}
		}
	}
	if cfg.Attempt == "" {
		cfg.Attempt = daemon.NewAttempt()
	}
	if cfg.Job == "" {
		return fmt.Errorf("the job identity is not set: set SHARDFEED_JOB or --job")
	}
	cfg.Generation = o.generation
	cfg.Job = o.job
	switch {
	case o.state != "":
		st, err := progress.NewFileStore(o.state)
		if err != nil {
			return err
		}
		if !inPod {
			if err := o.sayWhatRuns(cmd.ErrOrStderr(), st, cfg.Dataset); err != nil {
				return err
			}
			if err := resumeOnKept(cmd.Context(), cmd.ErrOrStderr(), st, &cfg); err != nil {
				return err
			}
		}
		cfg.Progress = progress.Local{Store: st}
	case o.operator.URL != "":
		if o.operator.CAFile == "" {
			o.operator.CAFile = filepath.Join(o.planDir, configmaps.KeyOperatorCA)
		}
		if o.generation < 1 {
			return fmt.Errorf("%s is not set: the operator gives each attempt its generation when it admits the pod", sidecarconfig.EnvGeneration)
		}
		remote, err := progress.NewRemote(o.operator)
		if err != nil {
			return err
		}
		cfg.Progress = remote
	default:
		return fmt.Errorf("nowhere to record progress: set %s (the operator's progress endpoint, as the webhook does) or --state FILE", sidecarconfig.EnvOperatorURL)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return daemon.Run(ctx, cfg)
}

// sayWhatRuns says, first, which job's state serve uses and whether it
// resumes: a run that silently continued an earlier one's progress was a
// trap. --resume refuses a job with nothing to resume.
func (o *feedOptions) sayWhatRuns(w io.Writer, st *progress.FileStore, dataset string) error {
	s, err := st.Load(context.Background())
	if err != nil {
		return err
	}
	if s.Committed == nil {
		if o.mustResume {
			return fmt.Errorf("job %q of TrainingDataset %q has no committed progress in %s to resume (--resume): check --job, or drop --resume to start it", o.job, dataset, o.state)
		}
		_, err = fmt.Fprintf(w, "shardfeed serve: job %q of TrainingDataset %q starts from the beginning (state: %s)\n", o.job, dataset, o.state)
		return err
	}
	_, err = fmt.Fprintf(w, "shardfeed serve: job %q of TrainingDataset %q resumes at epoch %d, step %d, committed %s (state: %s); --fresh starts a new job instead\n",
		o.job, dataset, s.Epoch, s.Step, s.Committed.Format(time.RFC3339), o.state)
	return err
}

// resumeOnKept points each stream whose index the job registered under
// was replaced since (shardfeed index keeps it: sidefile.Keep) at the index
// kept for it: the job resumes on the plan it started with. A new job
// reads the new index. The index is told by the planner's view of it (a
// filtered stream's counts its matching rows), as the job's fingerprint
// records it.
func resumeOnKept(ctx context.Context, w io.Writer, st *progress.FileStore, cfg *daemon.Config) error {
	if ctx == nil {
		ctx = context.Background()
	}
	s, err := st.Load(ctx)
	if err != nil || s.Fingerprint.Sum == "" {
		return err
	}
	cfg.Resuming = s.Committed != nil
	for i := range cfg.Spec.Streams {
		stream := &cfg.Spec.Streams[i]
		want := s.Fingerprint.Inputs[fmt.Sprintf("spec.streams[%d].index", i)]
		if want == "" || stream.Format == datav1alpha1.FormatMDS || stream.Format == "" {
			continue // MDS keeps its own index, in the data
		}
		src := streams.SharedCredentials(*stream, cfg.CredentialsDir)
		src.Endpoints, src.ConfigMapsDir = cfg.Endpoints, cfg.ConfigMapsDir
		view := func(indexURI string) string { // the planner's view's hash of the index at indexURI, or ""
			one := planspec.Resolved(&cfg.Spec, i)
			one.Source.IndexURI = indexURI
			opened, err := streams.Open(ctx, i, one, cfg.Spec.Packing, src, 0)
			if err != nil {
				return ""
			}
			return opened.Index.ContentHash()
		}
		if view(stream.Source.IndexURI) == want {
			continue // the job's index is the stream's still
		}
		uri, err := keptIndexOf(ctx, src, cmp.Or(stream.Source.IndexURI, stream.Source.URI), func(uri string) bool { return view(uri) == want })
		if err != nil {
			return fmt.Errorf("stream %q: the indexes kept for the jobs that began on them: %w", stream.Name, err)
		}
		if uri == "" {
			continue // none: the job is refused, naming what changed
		}
		stream.Source.IndexURI = uri
		_, _ = fmt.Fprintf(w, "warning: stream %q was indexed again since job %q began: the job resumes on the index it began on, kept at %s; a new job (--fresh, or another --job) reads the new one\n",
			stream.Name, s.Job, uri)
	}
	return nil
}

// keptIndexOf is the index URI of the index kept under root's
// _shardfeed/kept/ that is: "" for none.
func keptIndexOf(ctx context.Context, src store.Source, root string, is func(uri string) bool) (string, error) {
	root = strings.TrimSuffix(root, "/") + "/"
	src.URI = root
	st, err := stores.Open(ctx, src)
	if err != nil {
		return "", err
	}
	l, err := st.ListDir(ctx, sidefile.KeptDir)
	if err != nil {
		return "", err
	}
	for _, dir := range l.Dirs {
		if is(root + dir) {
			return root + dir, nil
		}
	}
	return "", nil
}

// setAside starts the job afresh under its own name (--fresh): its
// earlier state, if any, is moved to the job named job-<time> beside it,
// which `shardfeed jobs` lists, so nothing is lost and the next run without
// --fresh resumes this one. (A fresh run once took the name job-<time>
// itself, and the next run without --fresh resumed the old job's progress,
// training its steps again.)
func (o *feedOptions) setAside(w io.Writer, dataset string) error {
	old, err := os.ReadFile(o.state)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	stamp := time.Now().UTC().Format("20060102-150405")
	dir, base := filepath.Split(o.state)
	moved := filepath.Join(filepath.Dir(filepath.Clean(dir)), o.job+"-"+stamp, base)
	if filepath.Base(filepath.Clean(dir)) != o.job { // a --state of the caller's: beside it
		ext := filepath.Ext(base)
		moved = filepath.Join(dir, strings.TrimSuffix(base, ext)+"-"+stamp+ext)
	}
	if err := os.MkdirAll(filepath.Dir(moved), 0o755); err != nil {
		return err
	}
	if err := os.Rename(o.state, moved); err != nil {
		return fmt.Errorf("--fresh: setting job %q's earlier state aside: %w", o.job, err)
	}
	where := "its earlier state"
	if s, err := configmaps.ParseState(old); err == nil && s.Committed != nil {
		where = fmt.Sprintf("its earlier progress (epoch %d, step %d)", s.Epoch, s.Step)
	}
	_, err = fmt.Fprintf(w, "shardfeed serve: --fresh: job %q of TrainingDataset %q starts again; %s is kept in %s (shardfeed jobs lists it)\n",
		o.job, dataset, where, moved)
	return err
}

// splitList reads a comma-separated list, empty entries dropped.
func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"

	"github.com/shardfeed/shardfeed/internal/budget"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/sidecar/nodecache"
	"github.com/shardfeed/shardfeed/sidecar/nodecache/nodewire"
)

func newAgentCommand() *cobra.Command {
	var (
		opts                         nodecache.Options
		listen, limit, kubeconfig    string
		cert                         nodecache.Certificate
		metricsAddr, logFormat       string
		allowCloud, metricsSecure    bool
		allowedEndpoints, sharedSrcs []string
	)
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node cache agent: verified shards shared by the training pods of a node",
		Long: `agent is the node cache (the chart's nodeCache.enabled, a DaemonSet). It keeps
shards in a directory of the node, within a byte budget, and serves them to
the sidecars of its node over TLS, through a Service whose traffic stays on
the node, with a certificate the operator's CA signs (the sidecars verify
it before they send anything). It fills the cache itself with
the credentials each request carries (never stored), checks every shard
against the index's hash, and serves an entry only to pods of the namespace
and credentials that filled it (or any pod, for --shared-source prefixes).
Pods are identified by their projected ServiceAccount token (audience
"shardfeed-agent"), reviewed with the API server. Documentation:
docs/operations.md#the-node-cache, docs/security.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			if logFormat == "json" {
				log = slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))
			} else if logFormat != "text" {
				return fmt.Errorf("--log-format %q: use text or json", logFormat)
			}
			if limit != "" {
				q, err := resource.ParseQuantity(limit)
				if err != nil || q.Sign() < 0 {
					return fmt.Errorf("--cache-limit %q: write bytes like 100Gi", limit)
				}
				opts.LimitBytes = q.Value()
			}
			opts.AllowedEndpoints, opts.AllowCloudEndpoints = allowedEndpoints, allowCloud
			if len(opts.AllowedEndpoints) == 0 && !allowCloud {
				return errors.New("no endpoint is allowed: give --allowed-endpoints (the manager's datasets.allowedEndpoints) or --allow-cloud-endpoints")
			}
			opts.SharedSources = sharedSrcs
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return fmt.Errorf("the API server (to review pods' tokens): %w", err)
			}
			reviewer, err := nodecache.NewTokenReviewer(cfg)
			if err != nil {
				return err
			}
			opts.Auth, opts.Log = reviewer, log
			agent, err := nodecache.NewAgent(opts)
			if err != nil {
				return err
			}
			if err := cert.Load(); err != nil {
				return fmt.Errorf("%w: mount the Secret the operator keeps it in (the chart's nodeCache)", err)
			}
			if err := notDumpable(); err != nil {
				log.Warn("The agent could not make itself not dumpable", "err", err.Error())
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			if metricsAddr != "" {
				m := agentMetrics{addr: metricsAddr, agent: agent, log: log}
				if metricsSecure {
					m.config, m.cert = cfg, &cert
				}
				if err := m.serve(ctx); err != nil {
					return err
				}
			}
			l, err := nodecache.Listen(listen)
			if err != nil {
				return err
			}
			st := agent.Stats()
			log.Info("Node agent serving", "listen", listen, "node", opts.Node, "cacheDir", opts.Dir, "limitBytes", opts.LimitBytes,
				"entriesOnDisk", st.Cache.UsedBytes)
			return agent.Serve(ctx, l, &cert)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Dir, "cache-dir", "/var/cache/shardfeed-agent", "the node's cache directory (a hostPath or local volume), kept across restarts")
	f.StringVar(&limit, "cache-limit", "", "the node's byte budget for shards, e.g. 200Gi (default: no limit)")
	f.StringVar(&listen, "listen", fmt.Sprintf(":%d", sidecarconfig.NodeAgentPort), "the TCP address the sidecars of the node reach (through the node-local Service)")
	f.StringVar(&cert.CertFile, "tls-cert-file", "/etc/shardfeed-agent/tls/tls.crt", "the agent's certificate (the operator's CA signs it for the Service's name), read again when it changes")
	f.StringVar(&cert.KeyFile, "tls-key-file", "/etc/shardfeed-agent/tls/tls.key", "the certificate's key")
	f.StringVar(&opts.Node, "node", "", "the agent's node (the downward API's spec.nodeName): a token of a pod on another node is refused")
	f.StringSliceVar(&allowedEndpoints, "allowed-endpoints", nil, `store endpoints the agent may reach beside the clouds' own: "host", "host:port", "*.example.com", an IP address or CIDR, "*" any name (public addresses only) (the manager's --allowed-endpoints)`)
	f.BoolVar(&allowCloud, "allow-cloud-endpoints", true, "allow the hosts the clouds operate for their stores and token exchanges, each for its own cloud's credentials, beside --allowed-endpoints")
	addAgentLimitFlags(f, &opts)
	f.StringSliceVar(&sharedSrcs, "shared-source", nil, "a URI prefix (s3://bucket/prefix/) whose shards every pod of the node may read from the cache, whatever its namespace: data the platform marks readable by all (shards hashed with SHA-2 or SHA-3 only)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig (default: in-cluster, else $KUBECONFIG)")
	f.StringVar(&metricsAddr, "metrics-addr", ":9465", `TCP address of the Prometheus metrics ("" for none)`)
	f.BoolVar(&metricsSecure, "metrics-secure", true, "serve the metrics over TLS (the agent's certificate) to clients whose token the API server authenticates and allows to get the non-resource URL /metrics; false: plain HTTP to anyone, which shows each namespace's activity to every pod")
	f.StringVar(&logFormat, "log-format", "text", "text or json")
	return cmd
}

// addAgentLimitFlags are the agent's bounds on each pod and on all.
func addAgentLimitFlags(f *pflag.FlagSet, opts *nodecache.Options) {
	f.IntVar(&opts.MaxInFlight, "max-in-flight", 64, "shard requests served at once; more are answered 503 and their sidecars read the store")
	f.IntVar(&opts.MaxInFlightPerPod, "max-in-flight-per-pod", nodewire.PodRequests, "shard requests one pod may have read and served at once; more are answered 429")
	f.DurationVar(&opts.WriteIdle, "write-idle", 15*time.Second, "an answer none of whose bytes the pod takes for this long is dropped, freeing its slot")
	f.IntVar(&opts.MaxWanted, "max-wanted", 65536, "entries warm requests may keep ahead of plain recency")
	f.IntVar(&opts.MaxWantedPerPod, "max-wanted-per-pod", 8192, "one pod's share of --max-wanted (its oldest are let go first)")
}

// budgetReviews answers 429 to a client beyond its budget before the
// filter reviews its token: each review is a request to the API server,
// and any pod can reach the port (a scraper asks every 30 s or so).
func budgetReviews(next http.Handler, reviews *budget.PerSource) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !reviews.Allow(r.RemoteAddr) {
			http.Error(w, "too many requests", http.StatusTooManyRequests)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// agentMetrics serves the agent's metrics: over TLS to clients the API
// server authenticates and authorizes (TokenReview, SubjectAccessReview:
// the manager's metrics' rule) when config is set, else plain HTTP.
type agentMetrics struct {
	addr   string
	agent  *nodecache.Agent
	log    *slog.Logger
	config *rest.Config
	cert   *nodecache.Certificate
}

func (m agentMetrics) serve(ctx context.Context) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.agent.Collector(), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	handler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	if m.config != nil {
		hc, err := rest.HTTPClientFor(m.config)
		if err != nil {
			return err
		}
		filter, err := filters.WithAuthenticationAndAuthorization(m.config, hc)
		if err != nil {
			return fmt.Errorf("the metrics' authorization: %w", err)
		}
		if handler, err = filter(logr.FromSlogHandler(m.log.Handler()), handler); err != nil {
			return fmt.Errorf("the metrics' authorization: %w", err)
		}
		handler = budgetReviews(handler, budget.New(1, 5, 4096).WithTotal(10, 20))
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", handler)
	l, err := net.Listen("tcp", m.addr)
	if err != nil {
		return fmt.Errorf("--metrics-addr: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}
	if m.cert != nil {
		l = tls.NewListener(l, m.cert.TLSConfig())
	}
	log := m.log
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("The metrics server stopped", "err", err)
		}
	}()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	return nil
}

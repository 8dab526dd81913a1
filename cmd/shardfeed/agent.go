package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/sidecar/nodecache"
)

func newAgentCommand() *cobra.Command {
	var (
		opts                         nodecache.Options
		socket, limit, kubeconfig    string
		metricsAddr, logFormat       string
		allowCloud                   bool
		allowedEndpoints, sharedSrcs []string
	)
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node cache agent: verified shards shared by the training pods of a node",
		Long: `agent is the node cache (the chart's nodeCache.enabled, a DaemonSet). It keeps
shards in a directory of the node, within a byte budget, and serves them to
the sidecars of its node over a Unix socket. It fills the cache itself with
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
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			if metricsAddr != "" {
				if err := serveAgentMetrics(ctx, metricsAddr, agent, log); err != nil {
					return err
				}
			}
			l, err := nodecache.Listen(socket)
			if err != nil {
				return err
			}
			st := agent.Stats()
			log.Info("Node agent serving", "socket", socket, "node", opts.Node, "cacheDir", opts.Dir, "limitBytes", opts.LimitBytes,
				"entriesOnDisk", st.Cache.UsedBytes)
			return agent.Serve(ctx, l)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Dir, "cache-dir", "/var/cache/shardfeed-agent", "the node's cache directory (a hostPath or local volume), kept across restarts")
	f.StringVar(&limit, "cache-limit", "", "the node's byte budget for shards, e.g. 200Gi (default: no limit)")
	f.StringVar(&socket, "socket", sidecarconfig.NodeAgentSocket, "the Unix socket the sidecars of the node reach")
	f.StringVar(&opts.Node, "node", "", "the agent's node (the downward API's spec.nodeName): a token of a pod on another node is refused")
	f.StringSliceVar(&allowedEndpoints, "allowed-endpoints", nil, `store endpoints the agent may reach beside the clouds' own: "host", "host:port", "*.example.com", an IP address or CIDR, "*" any name (public addresses only) (the manager's --allowed-endpoints)`)
	f.BoolVar(&allowCloud, "allow-cloud-endpoints", true, "allow the hosts the clouds operate for their stores and token exchanges, each for its own cloud's credentials, beside --allowed-endpoints")
	f.StringSliceVar(&sharedSrcs, "shared-source", nil, "a URI prefix (s3://bucket/prefix/) whose shards every pod of the node may read from the cache, whatever its namespace: data the platform marks readable by all")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig (default: in-cluster, else $KUBECONFIG)")
	f.StringVar(&metricsAddr, "metrics-addr", ":9465", `TCP address of the Prometheus metrics ("" for none)`)
	f.StringVar(&logFormat, "log-format", "text", "text or json")
	return cmd
}

func serveAgentMetrics(ctx context.Context, addr string, agent *nodecache.Agent, log *slog.Logger) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(agent.Collector(), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--metrics-addr: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("The metrics server stopped", "err", err)
		}
	}()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	return nil
}

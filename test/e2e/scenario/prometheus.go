package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Prometheus is a real Prometheus server (bin/prometheus, built from its
// release) on the host, scraping the cluster as the chart's ServiceMonitor
// and PodMonitors say: the manager's metrics over HTTPS with a
// ServiceAccount's token bound to the chart's metrics-reader ClusterRole,
// each labelled pod's sf-metrics port over HTTPS, the node agents' port,
// each with the namespace, pod and container labels the Prometheus
// Operator gives; and the chart's rules loaded.
type Prometheus struct {
	// URL is the server's API (http://127.0.0.1:port).
	URL string

	cmd  *exec.Cmd
	done chan error
	exit error
	dir  string
}

// monitoringNamespace holds Prometheus's ServiceAccount.
const monitoringNamespace = "e2e-monitoring"

// scrapeInterval is the e2e Prometheus's scrape and rule evaluation
// interval (the chart's monitors say 30 s: a test has no half hour).
const scrapeInterval = 2 * time.Second

// StartPrometheus starts Prometheus with the chart's rule file, each
// alert's `for` replaced by alertFor and each 5-minute window by window (a
// test cannot wait 10 minutes for a starved job, nor 5 for a rate over a
// young series to stop underrating it; the expressions are the chart's).
func (c *Cluster) StartPrometheus(ctx context.Context, alertFor, window time.Duration) (*Prometheus, error) {
	dir := filepath.Join(c.work, "prometheus")
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	token, err := c.prometheusToken(ctx)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600); err != nil {
		return nil, err
	}
	rules, err := os.ReadFile(filepath.Join(c.o.Root, "charts", "shardfeed", "files", "alerts.yaml"))
	if err != nil {
		return nil, err
	}
	rules = regexp.MustCompile(`(?m)^(\s+)for: \S+$`).ReplaceAll(rules, []byte("${1}for: "+alertFor.String()))
	rules = []byte(strings.ReplaceAll(string(rules), "[5m]", "["+model.Duration(window).String()+"]"))
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yaml"), []byte(prometheusConfig(dir, c.o.Kubeconfig)), 0o600); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	_ = l.Close()
	logs, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(c.o.Bin, "prometheus"), "--config.file="+filepath.Join(dir, "prometheus.yaml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		_ = logs.Close()
		return nil, fmt.Errorf("starting %s (hack/tools.sh go builds it: make tools): %w", cmd.Path, err)
	}
	p := &Prometheus{URL: "http://" + addr, cmd: cmd, done: make(chan error, 1), dir: dir}
	go func() { p.done <- cmd.Wait(); _ = logs.Close() }()
	if err := WaitFor(ctx, time.Minute, "Prometheus to be ready", func() (bool, error) {
		select {
		case err := <-p.done:
			p.done <- err
			out, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			return false, fmt.Errorf("prometheus exited (%w):\n%s", err, out)
		default:
		}
		resp, err := http.Get(p.URL + "/-/ready") //nolint:gosec,noctx // the local server's readiness
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Close stops Prometheus.
func (p *Prometheus) Close() {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
		p.exit = <-p.done // killed: a signal's exit status
	}
}

// prometheusToken is a token of ServiceAccount prometheus, bound to the
// chart's metrics-reader ClusterRole, as a platform team binds theirs.
func (c *Cluster) prometheusToken(ctx context.Context) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: monitoringNamespace}}
	if err := c.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prometheus", Namespace: monitoringNamespace}}
	if err := c.Client.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-prometheus-metrics-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "shardfeed-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: monitoringNamespace}}}
	if err := c.Client.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	out, err := c.Cmd(ctx, "kubectl", "create", "token", "prometheus", "-n", monitoringNamespace, "--duration", "2h")
	return strings.TrimSpace(out), err
}

// prometheusConfig scrapes what the chart's monitors name, with the labels
// the Prometheus Operator gives a PodMonitor's and a ServiceMonitor's
// targets (namespace, pod, container, endpoint), which the dashboard and
// the alerts read.
func prometheusConfig(dir, kubeconfig string) string {
	labels := `      - {source_labels: [__meta_kubernetes_namespace], target_label: namespace}
      - {source_labels: [__meta_kubernetes_pod_name], target_label: pod}
      - {source_labels: [__meta_kubernetes_pod_container_name], target_label: container}
      - {source_labels: [__meta_kubernetes_pod_container_port_name], target_label: endpoint}
      - {source_labels: [__meta_kubernetes_pod_node_name], target_label: node}
`
	return fmt.Sprintf(`global:
  scrape_interval: %[3]s
  evaluation_interval: %[3]s
rule_files: [%[1]s/rules.yaml]
scrape_configs:
  # The ServiceMonitor: the manager's metrics port, HTTPS, a token allowed
  # to get /metrics, the self-signed certificate not verified.
  - job_name: shardfeed-manager
    scheme: https
    tls_config: {insecure_skip_verify: true}
    authorization: {credentials_file: %[1]s/token}
    kubernetes_sd_configs:
      - {role: pod, kubeconfig_file: %[2]s, namespaces: {names: [shardfeed-system]}}
    relabel_configs:
      - {source_labels: [__meta_kubernetes_pod_label_app_kubernetes_io_component], regex: manager, action: keep}
      - {source_labels: [__meta_kubernetes_pod_container_port_name], regex: metrics, action: keep}
%[4]s  # The sidecars' PodMonitor: every pod labelled shardfeed.io/dataset,
  # port sf-metrics, HTTPS with the sidecar's self-signed certificate.
  - job_name: shardfeed-sidecars
    scheme: https
    tls_config: {insecure_skip_verify: true}
    kubernetes_sd_configs:
      - {role: pod, kubeconfig_file: %[2]s}
    relabel_configs:
      - {source_labels: [__meta_kubernetes_pod_labelpresent_shardfeed_io_dataset], regex: "true", action: keep}
      - {source_labels: [__meta_kubernetes_pod_container_port_name], regex: sf-metrics, action: keep}
      - {source_labels: [__meta_kubernetes_pod_phase], regex: Running, action: keep}
%[4]s  # The node agents' PodMonitor (nodeCache.enabled): HTTPS, a token
  # allowed to get /metrics, as the manager's.
  - job_name: shardfeed-node-agents
    scheme: https
    tls_config: {insecure_skip_verify: true}
    authorization: {credentials_file: %[1]s/token}
    kubernetes_sd_configs:
      - {role: pod, kubeconfig_file: %[2]s, namespaces: {names: [shardfeed-system]}}
    relabel_configs:
      - {source_labels: [__meta_kubernetes_pod_label_app_kubernetes_io_component], regex: node-agent, action: keep}
      - {source_labels: [__meta_kubernetes_pod_container_port_name], regex: metrics, action: keep}
%[4]s`, dir, kubeconfig, scrapeInterval, labels)
}

// PromSeries is one series of a query's result: its labels and value.
type PromSeries struct {
	Labels map[string]string
	Value  string
}

// Query runs an instant query.
func (p *Prometheus) Query(ctx context.Context, q string) ([]PromSeries, error) {
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if err := p.get(ctx, "/api/v1/query", url.Values{"query": {q}}, &data); err != nil {
		return nil, fmt.Errorf("query %s: %w", q, err)
	}
	var out []PromSeries
	for _, r := range data.Result {
		out = append(out, PromSeries{Labels: r.Metric, Value: fmt.Sprint(r.Value[1])})
	}
	return out, nil
}

// PromRule is a loaded rule: its group, name, type and health.
type PromRule struct {
	Group, Name, Type, Health, LastError string
}

// Rules are the rules Prometheus loaded.
func (p *Prometheus) Rules(ctx context.Context) ([]PromRule, error) {
	var data struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Name      string `json:"name"`
				Type      string `json:"type"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := p.get(ctx, "/api/v1/rules", nil, &data); err != nil {
		return nil, err
	}
	var out []PromRule
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			out = append(out, PromRule{Group: g.Name, Name: r.Name, Type: r.Type, Health: r.Health, LastError: r.LastError})
		}
	}
	return out, nil
}

// PromTarget is a scrape target: its job, labels and health.
type PromTarget struct {
	Job, Health, LastError string
	Labels                 map[string]string
}

// Targets are the active scrape targets.
func (p *Prometheus) Targets(ctx context.Context) ([]PromTarget, error) {
	var data struct {
		ActiveTargets []struct {
			Labels     map[string]string `json:"labels"`
			ScrapePool string            `json:"scrapePool"`
			Health     string            `json:"health"`
			LastError  string            `json:"lastError"`
		} `json:"activeTargets"`
	}
	if err := p.get(ctx, "/api/v1/targets", url.Values{"state": {"active"}}, &data); err != nil {
		return nil, err
	}
	var out []PromTarget
	for _, t := range data.ActiveTargets {
		out = append(out, PromTarget{Job: t.ScrapePool, Health: t.Health, LastError: t.LastError, Labels: t.Labels})
	}
	return out, nil
}

// PromAlert is an active alert (pending or firing).
type PromAlert struct {
	Name, State string
	Labels      map[string]string
}

// Alerts are the active alerts.
func (p *Prometheus) Alerts(ctx context.Context) ([]PromAlert, error) {
	var data struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	}
	if err := p.get(ctx, "/api/v1/alerts", nil, &data); err != nil {
		return nil, err
	}
	var out []PromAlert
	for _, a := range data.Alerts {
		out = append(out, PromAlert{Name: a.Labels["alertname"], State: a.State, Labels: a.Labels})
	}
	return out, nil
}

// get reads an API path's data.
func (p *Prometheus) get(ctx context.Context, path string, q url.Values, into any) error {
	u := p.URL + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("%s: %d %s", path, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	if env.Status != "success" {
		return errors.New(env.Error)
	}
	return json.Unmarshal(env.Data, into)
}

// DashboardQuery is a query of the chart's Grafana dashboard.
type DashboardQuery struct {
	Panel, Expr string
}

// DashboardQueries are the chart's dashboard's queries, with its
// variables as Grafana sets them for "All" namespaces and rateInterval.
func (c *Cluster) DashboardQueries(rateInterval time.Duration) ([]DashboardQuery, error) {
	raw, err := os.ReadFile(filepath.Join(c.o.Root, "charts", "shardfeed", "files", "dashboard.json"))
	if err != nil {
		return nil, err
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		return nil, fmt.Errorf("dashboard.json: %w", err)
	}
	vars := strings.NewReplacer("$namespace", ".*", "$__rate_interval", strconv.Itoa(int(rateInterval.Seconds()))+"s")
	var out []DashboardQuery
	for _, p := range dash.Panels {
		for _, t := range p.Targets {
			if t.Expr != "" {
				out = append(out, DashboardQuery{Panel: p.Title, Expr: vars.Replace(t.Expr)})
			}
		}
	}
	return out, nil
}

// NodeCacheQuery says whether a dashboard query reads the node cache's
// metrics (its row has series only where nodeCache.enabled).
func NodeCacheQuery(q DashboardQuery) bool {
	return strings.Contains(q.Expr, "shardfeed_node_cache_") || strings.Contains(q.Expr, "shardfeed_sidecar_node_cache_")
}

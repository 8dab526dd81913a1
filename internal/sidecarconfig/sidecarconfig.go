// Package sidecarconfig is the contract between the pod webhook and the
// sidecar it injects: the paths, port and environment the webhook gives
// the sidecar container, rendered (Config.Env, Args) by the webhook and
// parsed (FromEnv) by `shardfeed sidecar` with the same names.
package sidecarconfig

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// RankMode says which ranks a sidecar serves.
type RankMode string

// The rank modes.
const (
	// RankModePod serves the ranks of this pod only: the webhook found the
	// pod's index and the job's pod count.
	RankModePod RankMode = "pod"
	// RankModeClient serves any rank a client names (ranks assigned at run
	// time, e.g. by torchrun's rendezvous).
	RankModeClient RankMode = "client"
)

// Paths in the pod, and the metrics port.
const (
	SocketDir  = "/var/run/shardfeed"
	SocketPath = SocketDir + "/feed.sock"
	// LocalSocket is where `shardfeed serve` listens outside a pod unless
	// told otherwise, relative to its working directory; the Python client
	// looks there after SocketPath.
	LocalSocket = ".shardfeed/feed.sock"
	CacheDir    = "/var/cache/shardfeed"
	PlanDir     = "/etc/shardfeed/plan"
	// CredentialsDir holds one directory per credentials Secret, by name.
	CredentialsDir = "/var/run/shardfeed-credentials"
	// ConfigMapsDir holds the ConfigMaps the dataset names (a tokenizer's),
	// one directory each, mounted by the webhook.
	ConfigMapsDir = "/etc/shardfeed/configmaps"
	// TokenDir holds the projected ServiceAccount token (audience
	// "shardfeed") the sidecar shows the operator's progress endpoint.
	TokenDir = "/var/run/secrets/shardfeed"
	// TokenAudience is the token's audience: the operator's alone.
	TokenAudience = "shardfeed"
	TokenPath     = TokenDir + "/token"
	// OperatorCAPath is the operator's CA bundle, a key of the plan.
	OperatorCAPath = PlanDir + "/operator-ca.crt"
	// NodeAgentTokenDir holds the projected token (audience
	// "shardfeed-agent") the sidecar shows the node agent.
	NodeAgentTokenDir  = "/var/run/secrets/shardfeed-agent"
	NodeAgentTokenPath = NodeAgentTokenDir + "/token"
	NodeAgentAudience  = "shardfeed-agent"
	// NodeAgentPort is the node agent's port (its Service's "agent").
	NodeAgentPort = 9466
	// MetricsPort is the sidecar's metrics port unless
	// spec.sidecar.metricsPort says otherwise.
	MetricsPort int32 = 9464
)

// The environment of the sidecar container.
const (
	EnvDataset        = "SHARDFEED_DATASET"
	EnvPlanDir        = "SHARDFEED_PLAN_DIR"
	EnvSocket         = "SHARDFEED_SOCKET"
	EnvCacheDir       = "SHARDFEED_CACHE_DIR"
	EnvCredentialsDir = "SHARDFEED_CREDENTIALS_DIR"
	EnvRankMode       = "SHARDFEED_RANK_MODE"
	EnvPodRank        = "SHARDFEED_POD_RANK"
	EnvPods           = "SHARDFEED_PODS"
	EnvProcsPerPod    = "SHARDFEED_PROCS_PER_POD"
	EnvDataParallel   = "SHARDFEED_DATA_PARALLEL_SIZE"
	EnvJob            = "SHARDFEED_JOB"
	EnvAttempt        = "SHARDFEED_ATTEMPT"
	EnvImage          = "SHARDFEED_IMAGE"
	EnvGeneration     = "SHARDFEED_GENERATION"
	EnvOperatorURL    = "SHARDFEED_OPERATOR_URL"
	EnvOperatorAddr   = "SHARDFEED_OPERATOR_ADDR"
	EnvNamespace      = "POD_NAMESPACE"
	// EnvNodeAgent is the node agent's URL (https://<Service>.<namespace>
	// .svc:<port>, the name its certificate carries) and EnvNodeAgentAddr
	// the address dialled (the node-local Service's cluster IP), set when
	// the pod's namespace uses the node cache.
	EnvNodeAgent     = "SHARDFEED_NODE_AGENT"
	EnvNodeAgentAddr = "SHARDFEED_NODE_AGENT_ADDR"
	// EnvAllowedEndpoints (comma-separated) and EnvAllowCloudEndpoints
	// ("true") are the platform's endpoint policy, as the manager's
	// --allowed-endpoints and --allow-cloud-endpoints say it: the sidecar
	// checks every request and every address it connects to against it.
	EnvAllowedEndpoints    = "SHARDFEED_ALLOWED_ENDPOINTS"
	EnvAllowCloudEndpoints = "SHARDFEED_ALLOW_CLOUD_ENDPOINTS"
)

// Config is what the webhook tells a sidecar.
type Config struct {
	Dataset string
	// Placement is the ranks the sidecar serves. With PodRankField set,
	// the pod's index is read by the kubelet from that field of the pod
	// (e.g. an Indexed Job's completion-index annotation), not Pod.
	Placement
	PodRankField string
	Job          string
	Attempt      string
	// Generation of the attempt, given by the operator at admission.
	Generation int64
	Image      string
	// OperatorURL is the operator's progress endpoint; OperatorAddr, if
	// set, the address dialled first (the Service's cluster IP).
	OperatorURL, OperatorAddr string
	// Namespace is read from the pod (metadata.namespace).
	Namespace string
	// MetricsPort; 0: MetricsPort.
	MetricsPort int32
	// NoMetrics serves no metrics port (a hostNetwork pod that did not
	// ask for one: the port would be the node's).
	NoMetrics bool
}

// Env renders the config as the sidecar container's environment.
func (c Config) Env() []corev1.EnvVar {
	env := []corev1.EnvVar{
		{Name: EnvDataset, Value: c.Dataset},
		{Name: EnvPlanDir, Value: PlanDir},
		{Name: EnvSocket, Value: SocketPath},
		{Name: EnvCacheDir, Value: CacheDir},
		{Name: EnvCredentialsDir, Value: CredentialsDir},
		{Name: EnvRankMode, Value: string(c.RankMode)},
		{Name: EnvProcsPerPod, Value: strconv.Itoa(c.ProcsPerPod)},
		{Name: EnvJob, Value: c.Job},
		{Name: EnvAttempt, Value: c.Attempt},
		{Name: EnvImage, Value: c.Image},
		{Name: EnvGeneration, Value: strconv.FormatInt(c.Generation, 10)},
		{Name: EnvOperatorURL, Value: c.OperatorURL},
		fieldEnv(EnvNamespace, "metadata.namespace"),
	}
	if c.OperatorAddr != "" {
		env = append(env, corev1.EnvVar{Name: EnvOperatorAddr, Value: c.OperatorAddr})
	}
	if c.DataParallel > 0 {
		env = append(env, corev1.EnvVar{Name: EnvDataParallel, Value: strconv.Itoa(c.DataParallel)})
	}
	if c.RankMode == RankModePod {
		rank := corev1.EnvVar{Name: EnvPodRank, Value: strconv.Itoa(c.Pod)}
		if c.PodRankField != "" {
			rank = fieldEnv(EnvPodRank, c.PodRankField)
		}
		env = append(env, rank, corev1.EnvVar{Name: EnvPods, Value: strconv.Itoa(c.Pods)})
	}
	return env
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

// Port returns the metrics port.
func (c Config) Port() int32 {
	if c.MetricsPort != 0 {
		return c.MetricsPort
	}
	return MetricsPort
}

// Args are the sidecar's arguments (its command is /shardfeed).
func (c Config) Args() []string {
	if c.NoMetrics {
		return []string{"sidecar", "--metrics-addr", "", "--log-format", "json"}
	}
	return []string{"sidecar", "--metrics-addr", fmt.Sprintf(":%d", c.Port()), "--metrics-tls", "--log-format", "json"}
}

// FromEnv parses the environment Env rendered (with the pod's fields
// resolved, as the kubelet does). Unset variables keep their defaults:
// rank mode pod, one pod, one process per pod.
func FromEnv(lookup func(string) (string, bool)) (Config, error) {
	c := Config{Placement: Placement{RankMode: RankModePod, Pods: 1, ProcsPerPod: 1}}
	for name, into := range map[string]*string{EnvDataset: &c.Dataset, EnvJob: &c.Job, EnvAttempt: &c.Attempt, EnvImage: &c.Image, EnvNamespace: &c.Namespace,
		EnvOperatorURL: &c.OperatorURL, EnvOperatorAddr: &c.OperatorAddr} {
		if v, ok := lookup(name); ok {
			*into = v
		}
	}
	if v, ok := lookup(EnvRankMode); ok {
		c.RankMode = RankMode(v)
	}
	for name, into := range map[string]*int{EnvPodRank: &c.Pod, EnvPods: &c.Pods, EnvProcsPerPod: &c.ProcsPerPod, EnvDataParallel: &c.DataParallel} {
		v, ok := lookup(name)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return c, fmt.Errorf("%s=%q is not a number", name, v)
		}
		*into = n
	}
	if v, ok := lookup(EnvGeneration); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return c, fmt.Errorf("%s=%q is not a generation (an integer from 0)", EnvGeneration, v)
		}
		c.Generation = n
	}
	return c, nil
}

// FromContainer parses the contract from a sidecar container's environment
// as the webhook wrote it (the literal values; fields the kubelet resolves
// are left unset).
func FromContainer(c *corev1.Container) (Config, error) {
	return FromEnv(func(name string) (string, bool) {
		for _, e := range c.Env {
			if e.Name == name && e.ValueFrom == nil {
				return e.Value, true
			}
		}
		return "", false
	})
}

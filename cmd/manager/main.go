// Command manager runs the shardfeed operator: the TrainingDataset
// controller and the webhooks, with health probes, metrics, leader
// election and its own webhook certificate.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/controllers"
	"github.com/shardfeed/shardfeed/internal/certs"
	"github.com/shardfeed/shardfeed/internal/inject"
	"github.com/shardfeed/shardfeed/internal/jobkind"
	"github.com/shardfeed/shardfeed/internal/memlimit"
	"github.com/shardfeed/shardfeed/internal/progressapi"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/internal/version"
)

// Certificate modes.
const (
	certModeSelf     = "self"     // the manager makes and rotates its certificate
	certModeExternal = "external" // cert-manager (or anything else) fills --cert-dir
)

type options struct {
	metricsAddr, probeAddr string
	metricsSecure          bool
	leaderElect            bool
	webhookPort            int
	certDir, certMode      string
	namespace              string
	webhookService         string
	operatorURL            string
	sidecarCPU             string
	sidecarMemory          string
	operatorAddr           string
	webhookSecret          string
	webhookHosts           string
	mutatingConfig         string
	validatingConfig       string
	sidecarImage           string
	showVersion            bool
	workers                int
	policy                 controllers.StorePolicy
	ambientNamespaces      string
	allowedEndpoints       string
	allowCloudEndpoints    bool
	allowedAudiences       string
	nodeAgentService       string
	nodeAgentSecret        string
	nodeAgentNamespaces    string
	readsFlush             time.Duration
	maxIndexBytes          string
	maxDatasetIndexBytes   string
	indexBytesInFlight     string
	allowedImages          string
	pullSecrets            string
	enableHTTP2            bool
	pprofAddr              string
	kinds                  *jobkind.Registry
}

func main() {
	var o options
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "address the metrics endpoint binds to; 0 disables it")
	flag.BoolVar(&o.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS to authenticated and authorized clients only (a token allowed to get the non-resource URL /metrics); false: plain HTTP to anyone")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address the health probes bind to")
	flag.StringVar(&o.pprofAddr, "pprof-bind-address", "", "address Go's profiler (/debug/pprof/) binds to, plain HTTP to anyone who reaches it: bind it to 127.0.0.1 and port-forward; empty: off")
	flag.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader, so that only one replica runs the controller (every replica serves the webhooks)")
	flag.IntVar(&o.webhookPort, "webhook-port", 9443, "port the webhooks are served on (TLS)")
	flag.StringVar(&o.certDir, "cert-dir", filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs"), "directory of the webhook's tls.crt and tls.key")
	flag.StringVar(&o.certMode, "cert-mode", certModeSelf, "who provides the webhook certificate: self (the manager makes, stores, publishes and rotates it) or external (cert-manager or a mounted Secret fills --cert-dir)")
	flag.StringVar(&o.namespace, "namespace", os.Getenv("POD_NAMESPACE"), "the operator's namespace (default $POD_NAMESPACE): where the certificate Secret lives and where pods are never injected")
	flag.StringVar(&o.webhookService, "webhook-service", "shardfeed-webhook", "the webhook Service's name: the certificate covers <service>.<namespace>.svc")
	flag.StringVar(&o.operatorURL, "progress-url", "", "the progress endpoint as sidecars reach it (default https://<webhook-service>.<namespace>.svc:443)")
	flag.StringVar(&o.operatorAddr, "progress-addr", "", "HOST:PORT sidecars dial first, the URL's name if it does not answer (default: the webhook Service's cluster IP, looked up at start; clusters without DNS need it)")
	flag.StringVar(&o.webhookSecret, "webhook-secret", "shardfeed-webhook-cert", "the Secret that holds the webhook CA and certificate (with --cert-mode=self)")
	flag.StringVar(&o.webhookHosts, "webhook-hosts", "", "more names or IPs for the certificate, comma-separated (e.g. 127.0.0.1 for a webhook reached by URL)")
	flag.StringVar(&o.mutatingConfig, "mutating-webhook-configuration", "shardfeed-pod-injection", "the MutatingWebhookConfiguration whose caBundle the manager keeps (with --cert-mode=self)")
	flag.StringVar(&o.validatingConfig, "validating-webhook-configuration", "shardfeed-validation", "the ValidatingWebhookConfiguration whose caBundle the manager keeps (with --cert-mode=self)")
	flag.StringVar(&o.sidecarImage, "sidecar-image", envOr("SHARDFEED_SIDECAR_IMAGE", version.Image()), "the sidecar image for datasets that do not name one (jobs keep the image they started with)")
	flag.BoolVar(&o.showVersion, "version", false, "print the version and exit")
	flag.StringVar(&o.sidecarCPU, "sidecar-cpu-request", "500m", "the sidecar's CPU request for datasets that set no spec.sidecar.resources (its limit too in a pod whose containers all have limits equal to requests); empty: none")
	flag.StringVar(&o.sidecarMemory, "sidecar-memory-request", "2Gi", "the sidecar's memory request, as --sidecar-cpu-request")
	flag.StringVar(&o.pullSecrets, "sidecar-image-pull-secrets", "", "comma-separated Secrets, in each training pod's namespace, the sidecar's image is pulled with (a private registry): the webhook adds them to the pods it injects (the chart's sidecar.imagePullSecrets)")
	flag.StringVar(&o.allowedImages, "allowed-sidecar-images", "", "comma-separated images a dataset's spec.sidecar.image may name (exact, repo:* for any tag, repo@* for any digest); the default image's repository is always allowed")
	flag.BoolVar(&o.enableHTTP2, "enable-http2", false, "serve the webhooks and metrics over HTTP/2 too; off by default since the HTTP/2 rapid-reset advisories (CVE-2023-44487, CVE-2023-39325), as kubebuilder's scaffold does")
	flag.IntVar(&o.workers, "max-concurrent-reconciles", 4, "datasets reconciled in parallel: one whose store is slow holds one worker, not the controller")
	flag.StringVar(&o.maxIndexBytes, "max-index-bytes", "16Mi", "the cap on one index read (a Kubernetes quantity: 16Mi, 64Mi); a larger index is refused with a condition naming the cap")
	flag.StringVar(&o.maxDatasetIndexBytes, "max-dataset-index-bytes", "64Mi", "the cap on the index bytes of one dataset's reads, its streams' indexes and filters' selections together")
	flag.StringVar(&o.indexBytesInFlight, "index-bytes-in-flight", "128Mi", "the index bytes all reconciles may read at once (each reserves its dataset's share first)")
	flag.DurationVar(&o.policy.RequestTimeout, "store-request-timeout", controllers.DefaultStoreRequestTimeout, "bound on one request to a dataset's store, its body included")
	flag.DurationVar(&o.policy.ReadTimeout, "index-read-timeout", controllers.DefaultIndexReadTimeout, "bound on all the index reads of one reconcile")
	flag.StringVar(&o.ambientNamespaces, "ambient-credentials-namespaces", "", "comma-separated namespaces whose datasets may read without a credentialsSecretRef, with the manager's own cloud identity; * for all; empty: none")
	flag.DurationVar(&o.readsFlush, "progress-reads-flush", progressapi.DefaultReadsFlush, "how long the sidecars' reads reports of a job are summed before they are written into its state (status.jobs[].reads)")
	flag.StringVar(&o.nodeAgentService, "node-agent-service", "", "the node agent's Service in the operator's namespace (the chart's nodeCache.enabled; internalTrafficPolicy Local, port \"agent\"): sidecars ask the agent of their node for shards before the store, over TLS, verifying the certificate the operator's CA signs for <service>.<namespace>.svc. Empty: no node cache")
	flag.StringVar(&o.nodeAgentSecret, "node-agent-secret", "shardfeed-node-agent-cert", "the Secret the node agent's certificate is kept in (with --cert-mode=self; with cert-manager, its Certificate's)")
	flag.StringVar(&o.nodeAgentNamespaces, "node-agent-namespaces", "", "comma-separated namespaces whose pods' sidecars use the node agent (--node-agent-service), \"*\" for all")
	flag.StringVar(&o.allowedAudiences, "allowed-audiences", "", "comma-separated workload identity audiences datasets may name beside the clouds' own (sts.amazonaws.com, api://AzureADTokenExchange, a Google pool provider's name); never the API server's")
	flag.StringVar(&o.allowedEndpoints, "allowed-endpoints", "", "comma-separated store endpoints datasets may name beside the clouds' own (host, host:port, *.domain, an IP address or CIDR), e.g. in-cluster stores; a listed name may resolve to a private or loopback address, a metadata address must be listed as an address; * allows any host name, and sends each stream's credentials wherever its author says (public addresses only)")
	flag.BoolVar(&o.allowCloudEndpoints, "allow-cloud-endpoints", true, "allow the hosts the clouds operate for their stores and token exchanges (S3, STS and Glue in aws, aws-us-gov and aws-cn; Azure Blob Storage and Entra in the public, China and Government clouds; Cloud Storage and Google's token services), each for its own cloud's credentials, beside --allowed-endpoints")
	o.kinds = jobkind.Builtin()
	flag.Func("job-kinds", "the platform's own job kinds, a JSON or YAML list of {group, version, kind, resource, podTemplates, replicas, rank: {label | annotation}, queued} (the chart's jobKinds; docs/operator.md, \"Your own job kind\"): the webhook ranks and sizes their pods, and reserves in queued ones' templates", func(v string) error {
		declared, err := jobkind.Parse([]byte(v))
		if err != nil {
			return err
		}
		o.kinds, err = jobkind.Builtin().With(declared...)
		return err
	})
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine) // --zap-log-level=debug|info|error, --zap-devel, …
	flag.Parse()

	if o.showVersion {
		fmt.Println(version.Get())
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	if err := run(ctrl.SetupSignalHandler(), o); err != nil {
		ctrl.Log.WithName("setup").Error(err, "The manager stopped")
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// list splits a comma-separated flag.
func list(v string) []string {
	var out []string
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

func run(ctx context.Context, o options) error {
	log := ctrl.Log.WithName("setup")
	for _, b := range []struct {
		flag, value string
		to          *int64
	}{{"max-index-bytes", o.maxIndexBytes, &o.policy.MaxIndexBytes}, {"max-dataset-index-bytes", o.maxDatasetIndexBytes, &o.policy.MaxDatasetIndexBytes},
		{"index-bytes-in-flight", o.indexBytesInFlight, &o.policy.InFlightBytes}} {
		q, err := resource.ParseQuantity(b.value)
		if err != nil || q.Value() <= 0 {
			return fmt.Errorf("--%s=%q: write a positive quantity such as 16Mi", b.flag, b.value)
		}
		*b.to = q.Value()
	}
	if o.policy.InFlightBytes < o.policy.MaxIndexBytes {
		return fmt.Errorf("--index-bytes-in-flight=%s is less than --max-index-bytes=%s: no index could be read", o.indexBytesInFlight, o.maxIndexBytes)
	}
	o.policy.InFlight = semaphore.NewWeighted(o.policy.InFlightBytes)
	o.policy.AmbientNamespaces, o.policy.AllowedEndpoints = list(o.ambientNamespaces), list(o.allowedEndpoints)
	o.policy.AllowCloudEndpoints = o.allowCloudEndpoints
	if len(o.policy.AllowedEndpoints) == 0 && !o.allowCloudEndpoints {
		return fmt.Errorf("--allow-cloud-endpoints=false and no --allowed-endpoints: no dataset could be read; list the store endpoints datasets may name")
	}
	o.policy.AllowedAudiences = list(o.allowedAudiences)
	if o.nodeAgentService != "" && len(list(o.nodeAgentNamespaces)) == 0 {
		return fmt.Errorf("--node-agent-service is set but --node-agent-namespaces is empty: name the namespaces whose training pods use the node cache (the chart's nodeCache.namespaces), or \"*\"")
	}
	if soft, err := memlimit.Apply(memlimit.CgroupFile); err != nil {
		log.Info("No Go memory limit from the container's", "err", err.Error())
	} else if soft > 0 {
		log.Info("Go memory limit set from the container's", "bytes", soft, "fraction", memlimit.Fraction)
	}
	if o.certMode != certModeSelf && o.certMode != certModeExternal {
		return fmt.Errorf("--cert-mode=%q: use %s or %s", o.certMode, certModeSelf, certModeExternal)
	}
	if o.namespace == "" {
		return errors.New("--namespace (or $POD_NAMESPACE) is required: the certificate Secret lives there and its pods are never injected; the chart sets it from the downward API")
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(datav1alpha1.AddToScheme(scheme))
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("finding the cluster (in-cluster config or $KUBECONFIG): %w", err)
	}

	var keeper *certs.Keeper
	if o.certMode == certModeSelf {
		// The webhook server reads its certificate when it starts: make
		// it first, with a direct client (no cache runs yet).
		direct, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			return err
		}
		keeper = &certs.Keeper{Client: direct, Options: certOptions(o)}
		if err := keeper.Ensure(ctx); err != nil {
			return fmt.Errorf("webhook certificate: %w", err)
		}
	}

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  controllers.CacheOptions(),
		Metrics:                metricsOptions(o),
		HealthProbeBindAddress: o.probeAddr,
		PprofBindAddress:       o.pprofAddr,
		LeaderElection:         o.leaderElect,
		LeaderElectionID:       "shardfeed-manager.shardfeed.io",
		// The operator's namespace, where its Role allows leases; named, so
		// that a manager run outside a pod elects its leader there too.
		LeaderElectionNamespace: o.namespace,
		// A manager that stops (an upgrade's rollout, a drained node)
		// hands the lease over at once instead of leaving its successor
		// to wait out the lease (15 s without a leader): the process ends
		// as soon as Start returns, so nothing runs after the release.
		LeaderElectionReleaseOnCancel: true,
		WebhookServer:                 webhook.NewServer(webhook.Options{Port: o.webhookPort, CertDir: o.certDir, TLSOpts: tlsOptions(o)}),
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if keeper != nil {
		if err := mgr.Add(keeper); err != nil {
			return err
		}
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	operator := progressEndpoint(ctx, o, clientset)
	datasets := &controllers.TrainingDatasetReconciler{
		Client:     mgr.GetClient(),
		APIReader:  mgr.GetAPIReader(),
		Recorder:   mgr.GetEventRecorder("shardfeed-operator"),
		Policy:     o.policy,
		Workers:    o.workers,
		OperatorCA: operatorCA(o, keeper), IndexImage: o.sidecarImage, IndexPullSecrets: list(o.pullSecrets),
	}
	if err := datasets.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the TrainingDataset controller: %w", err)
	}
	if keeper != nil {
		// A CA rotation reaches the sidecars through the plan ConfigMaps.
		keeper.OnChange = func([]byte) { datasets.OperatorCAChanged() }
	}
	images := inject.ImagePolicy{Default: o.sidecarImage, Allowed: list(o.allowedImages), PullSecrets: list(o.pullSecrets)}
	resources, err := sidecarResources(o)
	if err != nil {
		return err
	}
	decoder := admission.NewDecoder(scheme)
	hooks := mgr.GetWebhookServer()
	// The pod webhook's own direct clients, whose requests are counted
	// (shardfeed_admission_api_requests_total).
	admissionCfg := rest.CopyConfig(cfg)
	admissionCfg.Wrap(controllers.CountAdmissionRequests)
	admissionReader, err := client.New(admissionCfg, client.Options{Scheme: scheme, Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return err
	}
	admissionClients, err := kubernetes.NewForConfig(admissionCfg)
	if err != nil {
		return err
	}
	for _, c := range []prometheus.Collector{controllers.AdmissionAPIRequests, controllers.DatasetPlans,
		controllers.DatasetIndexReadBytes, controllers.DatasetIndexReadRequests} {
		if err := ctrlmetrics.Registry.Register(c); err != nil {
			return err
		}
	}
	injector := &controllers.PodInjector{
		Cache: mgr.GetCache(), Reader: admissionReader, ConfigMaps: admissionClients.CoreV1(), Decoder: decoder, Images: images,
		Operator: operator, Resources: resources, OperatorNamespace: o.namespace, Audiences: o.policy.AllowedAudiences,
		AllowedEndpoints: o.policy.AllowedEndpoints, AllowCloudEndpoints: o.policy.AllowCloudEndpoints, NodeAgent: nodeAgent(ctx, o, clientset), NodeAgentNamespaces: list(o.nodeAgentNamespaces), Kinds: o.kinds,
	}
	hooks.Register(controllers.PodWebhookPath, &webhook.Admission{Handler: injector})
	hooks.Register(controllers.JobWebhookPath, &webhook.Admission{Handler: &controllers.JobReserver{Pods: injector}})
	// The progress endpoint shares the webhook server: its certificate,
	// its Service and its TLS settings.
	endpoint := &progressapi.Endpoint{
		Reviews: clientset.AuthenticationV1().TokenReviews(), Pods: mgr.GetAPIReader(), ConfigMaps: clientset.CoreV1(),
		Log: ctrl.Log.WithName("progress"), ReadsFlush: o.readsFlush,
	}
	endpoint.Register(hooks)
	// Its flush of the sidecars' reads reports into the jobs' states.
	if err := mgr.Add(endpoint); err != nil {
		return err
	}
	hooks.Register(controllers.DatasetWebhookPath, admission.WithValidator(scheme, &controllers.DatasetValidator{
		Reader: mgr.GetAPIReader(), Access: clientset.AuthorizationV1().SubjectAccessReviews(), Policy: o.policy, Images: images,
	}))
	// The datasets' and jobs' progress as metrics, from the cache.
	if err := ctrlmetrics.Registry.Register(controllers.NewDatasetCollector(mgr.GetClient())); err != nil {
		return err
	}
	if err := ctrlmetrics.Registry.Register(version.BuildInfo("shardfeed_manager")); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	// Ready once the webhook server answers: pods are not admitted before.
	if err := mgr.AddReadyzCheck("webhooks", hooks.StartedChecker()); err != nil {
		return err
	}
	log.Info("Starting the manager", "version", version.Get().Version, "certMode", o.certMode, "webhookPort", o.webhookPort,
		"sidecarImage", o.sidecarImage, "allowedSidecarImages", images.Allowed, "workers", o.workers, "maxIndexBytes", o.policy.MaxIndexBytes,
		"maxDatasetIndexBytes", o.policy.MaxDatasetIndexBytes, "indexBytesInFlight", o.policy.InFlightBytes,
		"ambientCredentialsNamespaces", o.policy.AmbientNamespaces, "allowedEndpoints", o.policy.AllowedEndpoints, "allowedAudiences", o.policy.AllowedAudiences,
		"progressURL", operator.URL, "progressAddr", operator.Addr)
	return mgr.Start(ctx)
}

// metricsOptions serves the metrics over TLS (a self-signed certificate
// made in memory: the root filesystem is read-only) to clients whose token
// the API server authenticates and allows to get /metrics (TokenReview,
// SubjectAccessReview).
func metricsOptions(o options) metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.metricsAddr, TLSOpts: tlsOptions(o)}
	if o.metricsSecure {
		m.SecureServing = true
		m.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return m
}

// tlsOptions offer HTTP/1.1 only over TLS unless --enable-http2.
func tlsOptions(o options) []func(*tls.Config) {
	if o.enableHTTP2 {
		return nil
	}
	return []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
}

// The metrics' authentication and authorization of their clients.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// The certificate's Secret, in the operator's namespace only (the
// Helm chart and kustomize set the namespace), and the caBundle of the
// operator's two webhook configurations, by name.
// +kubebuilder:rbac:groups="",namespace=shardfeed-system,resources=secrets,verbs=create
// +kubebuilder:rbac:groups="",namespace=shardfeed-system,resources=secrets,resourceNames=shardfeed-webhook-cert,verbs=get;update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,resourceNames=shardfeed-pod-injection;shardfeed-validation,verbs=get;update
// The webhook Service's endpoints: a CA rotation ends once every ready
// replica serves a certificate of the new CA.
// +kubebuilder:rbac:groups=discovery.k8s.io,namespace=shardfeed-system,resources=endpointslices,verbs=list

// sidecarResources are the sidecar's default requests.
func sidecarResources(o options) (corev1.ResourceRequirements, error) {
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{}}
	for _, r := range []struct {
		flag, value string
		name        corev1.ResourceName
	}{{"--sidecar-cpu-request", o.sidecarCPU, corev1.ResourceCPU}, {"--sidecar-memory-request", o.sidecarMemory, corev1.ResourceMemory}} {
		if r.value == "" {
			continue
		}
		q, err := resource.ParseQuantity(r.value)
		if err != nil || q.Sign() <= 0 {
			return res, fmt.Errorf("%s=%q: write a positive quantity such as 500m or 2Gi", r.flag, r.value)
		}
		res.Requests[r.name] = q
	}
	return res, nil
}

// progressEndpoint is where sidecars reach the progress endpoint: the
// webhook Service by name, and its cluster IP for clusters without DNS.
func progressEndpoint(ctx context.Context, o options, cs kubernetes.Interface) inject.Operator {
	op := inject.Operator{URL: o.operatorURL, Addr: o.operatorAddr}
	if op.URL == "" {
		op.URL = "https://" + o.webhookService + "." + o.namespace + ".svc:443"
	}
	if op.Addr == "" && o.operatorURL == "" {
		svc, err := cs.CoreV1().Services(o.namespace).Get(ctx, o.webhookService, metav1.GetOptions{})
		if err == nil && svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
			op.Addr = net.JoinHostPort(svc.Spec.ClusterIP, "443")
		} else if err != nil {
			ctrl.Log.WithName("setup").Info("Sidecars will reach the progress endpoint by name only", "service", o.webhookService, "err", err.Error())
		}
	}
	return op
}

// nodeAgent is where sidecars reach the node agent: its Service by the
// name its certificate carries, and the cluster IP and port dialled
// (clusters without DNS). The Service's traffic stays on the node.
func nodeAgent(ctx context.Context, o options, cs kubernetes.Interface) inject.NodeAgent {
	if o.nodeAgentService == "" {
		return inject.NodeAgent{}
	}
	port := int32(sidecarconfig.NodeAgentPort)
	svc, err := cs.CoreV1().Services(o.namespace).Get(ctx, o.nodeAgentService, metav1.GetOptions{})
	addr := ""
	if err == nil {
		for _, p := range svc.Spec.Ports {
			if p.Name == "agent" {
				port = p.Port
			}
		}
		if svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
			addr = net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(port)))
		}
	} else {
		ctrl.Log.WithName("setup").Info("Sidecars will reach the node agent by name only", "service", o.nodeAgentService, "err", err.Error())
	}
	return inject.NodeAgent{URL: "https://" + net.JoinHostPort(nodeAgentName(o), strconv.Itoa(int(port))), Addr: addr}
}

// nodeAgentName is the name on the node agent's certificate.
func nodeAgentName(o options) string { return o.nodeAgentService + "." + o.namespace + ".svc" }

// The node agent's Service (its cluster IP) and its certificate's Secret.
// +kubebuilder:rbac:groups="",namespace=shardfeed-system,resources=services,resourceNames=shardfeed-node-agent,verbs=get
// +kubebuilder:rbac:groups="",namespace=shardfeed-system,resources=secrets,resourceNames=shardfeed-node-agent-cert,verbs=get;update

// The webhook Service's cluster IP, in the operator's namespace only.
// +kubebuilder:rbac:groups="",namespace=shardfeed-system,resources=services,resourceNames=shardfeed-webhook,verbs=get

// operatorCA is the CA bundle sidecars verify the progress endpoint with:
// the self-made CA, or ca.crt beside an external certificate.
func operatorCA(o options, keeper *certs.Keeper) func() string {
	if keeper != nil {
		return func() string { return string(keeper.CABundle()) }
	}
	return func() string {
		b, err := os.ReadFile(filepath.Join(o.certDir, certs.KeyCACert))
		if err != nil {
			return ""
		}
		return string(b)
	}
}

// certOptions: what the self-made certificate covers and where it goes.
func certOptions(o options) certs.Options {
	svc := o.webhookService + "." + o.namespace + ".svc"
	c := certs.Options{
		Namespace: o.namespace, SecretName: o.webhookSecret, CertDir: o.certDir, Service: o.webhookService,
		DNSNames:         []string{svc, svc + ".cluster.local"},
		MutatingWebhooks: []string{o.mutatingConfig}, ValidatingWebhooks: []string{o.validatingConfig},
	}
	for _, h := range strings.Split(o.webhookHosts, ",") {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			c.IPs = append(c.IPs, ip)
		} else {
			c.DNSNames = append(c.DNSNames, h)
		}
	}
	if o.nodeAgentService != "" {
		name := nodeAgentName(o)
		c.Leaves = append(c.Leaves, certs.Leaf{SecretName: o.nodeAgentSecret, DNSNames: []string{name, name + ".cluster.local"}})
	}
	return c
}

// Package inject computes what the operator's pod webhook adds to a
// training pod (design §7): the sidecar as a native sidecar, its volumes,
// the socket in every app container, and the rank wiring. It is a pure
// function of the pod, its dataset and what the webhook looked up, so that
// every rule is table-tested; the webhook only gathers the inputs.
package inject

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/jobkind"
	"github.com/shardfeed/shardfeed/internal/planspec"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/internal/workloadidentity"
)

// Labels and annotations a training pod may carry (design §1).
const (
	LabelDataset          = "shardfeed.io/dataset"
	AnnotationRank        = jobkind.AnnotationRank
	AnnotationPods        = jobkind.AnnotationPods
	AnnotationProcsPerPod = jobkind.AnnotationProcsPerPod
	AnnotationJob         = "shardfeed.io/job"
	// AnnotationDataParallel declares the job's data-parallel size when
	// its ranks form replication groups (tensor, context or pipeline
	// parallelism): only the data-parallel ranks count toward numSplits.
	AnnotationDataParallel = "shardfeed.io/data-parallel-size"
	// AnnotationRankMode picks client for jobs whose ranks are assigned at
	// rendezvous (torchrun elastic).
	AnnotationRankMode = "shardfeed.io/rank-mode"
	// AnnotationInjected marks an injected pod (and makes injection
	// idempotent).
	AnnotationInjected = "shardfeed.io/injected"
)

// Names of what is injected.
const (
	SidecarName  = "shardfeed-sidecar"
	SocketVolume = "shardfeed-socket"
	CacheVolume  = "shardfeed-cache"
	PlanVolume   = "shardfeed-plan"
	TokenVolume  = "shardfeed-token"
	// NodeAgentTokenVolume is the token the sidecar shows the node agent.
	NodeAgentTokenVolume = "shardfeed-node-agent-token"
	// The paths of the sidecar contract (internal/sidecarconfig).
	SocketDir        = sidecarconfig.SocketDir
	SocketPath       = sidecarconfig.SocketPath
	CacheDir         = sidecarconfig.CacheDir
	PlanDir          = sidecarconfig.PlanDir
	CredentialsDir   = sidecarconfig.CredentialsDir
	SidecarUID       = int64(65532)
	downloadsInCache = 4 // parallel downloads the cache's sizeLimit leaves room for
)

// Owner is what the webhook found out about the pod's controller.
type Owner = jobkind.Owner

// Input is everything Inject needs.
type Input struct {
	Pod     *corev1.Pod
	Dataset *datav1alpha1.TrainingDataset
	Owner   Owner
	// Kinds are the job kinds whose pods' ranks the wiring reads (nil:
	// the built-in ones).
	Kinds *jobkind.Registry
	// Images decides the sidecar's image. PinnedImage, if set, is the one
	// the job started with (its state): used only where Images allows it.
	Images      ImagePolicy
	PinnedImage string
	// MinCacheBytes per pod count, from the plan ConfigMap (may be nil).
	MinCacheBytes map[int]int64
	// MaxShardBytes is the largest shard of the dataset (0: unknown).
	MaxShardBytes int64
	// Generation is the attempt's generation (from the job's state).
	Generation int64
	// Operator is where the sidecar records progress.
	Operator Operator
	// Resources are the sidecar's default requests (the chart's
	// sidecar.resources), for datasets that set none.
	Resources corev1.ResourceRequirements
	// Audiences are the workload identity audiences the platform allows
	// beside the clouds' own (workloadidentity.CheckAudience).
	Audiences []string
	// AllowedEndpoints and AllowCloudEndpoints are the platform's endpoint
	// policy: the sidecar checks each request and each address it connects
	// to against it (sidecarconfig.EnvAllowedEndpoints). Neither: none
	// given, the sidecar checks nothing (a manager that checks nothing).
	AllowedEndpoints    []string
	AllowCloudEndpoints bool
	// NodeAgent, when its URL is set, is the node agent (the chart's
	// nodeCache): the sidecar asks it for shards before the store.
	NodeAgent NodeAgent
}

// NodeAgent is how sidecars reach their node's agent: over TLS, through a
// Service whose traffic stays on the node, verifying the certificate the
// operator's CA signed for the URL's host. No hostPath: the namespaces
// of training pods may enforce the restricted Pod Security level.
type NodeAgent struct {
	// URL is https://<Service>.<namespace>.svc:<port>; Addr the Service's
	// cluster IP and port, dialled first ("": the name).
	URL, Addr string
}

// Operator is the operator's progress endpoint as sidecars reach it.
type Operator struct {
	// URL is https://<service>.<namespace>.svc:<port>.
	URL string
	// Addr, if set, is dialled first, the URL's name if it does not answer (a
	// cluster without DNS): the Service's cluster IP and port.
	Addr string
}

// tokenExpiry is the lifetime of the sidecar's projected token; the
// kubelet renews it at 80%.
const tokenExpiry = 3600

// Denied is a pod the webhook refuses, with the reason.
type Denied struct{ Reason string }

func (d *Denied) Error() string { return d.Reason }

func deny(format string, args ...any) error { return &Denied{Reason: fmt.Sprintf(format, args...)} }

// Injected reports whether the pod already has the sidecar (a template's
// reservation is not one: Inject replaces it).
func Injected(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == SidecarName && !IsReservation(&c) {
			return true
		}
	}
	return false
}

// Inject returns the pod with the sidecar, or a *Denied error. A pod that
// already has it is returned unchanged.
func Inject(in Input) (*corev1.Pod, error) {
	pod := in.Pod.DeepCopy()
	if Injected(pod) {
		return pod, nil
	}
	withoutReservation(pod)
	ds := in.Dataset
	if err := checkPrivateVolumes(pod); err != nil {
		return nil, err
	}
	w, err := wiring(pod, in.Owner, in.Kinds)
	if err != nil {
		return nil, err
	}
	if err := checkRanks(ds, w, in.MinCacheBytes, in.MaxShardBytes); err != nil {
		return nil, err
	}
	image, err := sidecarImage(in)
	if err != nil {
		return nil, err
	}
	in.Images.addPullSecrets(pod)
	if pod.Spec.ServiceAccountName == "" {
		// What the ServiceAccount admission plugin sets; a projected token
		// needs it named.
		pod.Spec.ServiceAccountName = "default"
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes,
		corev1.Volume{Name: SocketVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: CacheVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: cacheSizeLimit(ds, in.MaxShardBytes)}}},
		corev1.Volume{Name: PlanVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: configmaps.PlanName(ds.Name)}}}},
		// The sidecar's identity toward the operator: a token for the
		// pod's ServiceAccount, bound to the pod, valid only for the
		// operator's audience (useless against the API server).
		corev1.Volume{Name: TokenVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptr.To(int32(0o444)),
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: sidecarconfig.TokenAudience, ExpirationSeconds: ptr.To(int64(tokenExpiry)), Path: "token"}}}}}},
	)
	mounts := []corev1.VolumeMount{
		{Name: SocketVolume, MountPath: SocketDir},
		{Name: CacheVolume, MountPath: CacheDir},
		{Name: PlanVolume, MountPath: PlanDir, ReadOnly: true},
		{Name: TokenVolume, MountPath: sidecarconfig.TokenDir, ReadOnly: true},
	}
	seen := map[string]bool{}
	for _, s := range ds.Spec.Streams {
		ref := s.Source.CredentialsSecretRef
		if ref == nil || seen[ref.Name] {
			continue
		}
		seen[ref.Name] = true
		vol := "shardfeed-cred-" + strconv.Itoa(len(seen))
		// World-readable inside the sidecar, the only container that
		// mounts it: the sidecar runs as 65532 and the pod's fsGroup is the
		// user's, so group-readable files (0440, root's) are not its to read.
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: ref.Name, DefaultMode: ptr.To(int32(0o444))}}})
		mounts = append(mounts, corev1.VolumeMount{Name: vol, MountPath: CredentialsDir + "/" + ref.Name, ReadOnly: true})
	}
	// A tokenizer.json from a ConfigMap: the ConfigMap mounted read-only
	// into the sidecar alone, one directory per ConfigMap.
	cms := map[string]bool{}
	for _, t := range tokenizations(ds) {
		ref := t.Tokenizer.ConfigMapRef
		if ref == nil || cms[ref.Name] {
			continue
		}
		cms[ref.Name] = true
		vol := "shardfeed-cm-" + strconv.Itoa(len(cms))
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: ref.Name}}}})
		mounts = append(mounts, corev1.VolumeMount{Name: vol, MountPath: sidecarconfig.ConfigMapsDir + "/" + ref.Name, ReadOnly: true})
	}
	var env []corev1.EnvVar
	if in.NodeAgent.URL != "" {
		vol, agentMount := nodeAgentToken()
		pod.Spec.Volumes = append(pod.Spec.Volumes, vol)
		mounts = append(mounts, agentMount)
		env = append(env, corev1.EnvVar{Name: sidecarconfig.EnvNodeAgent, Value: in.NodeAgent.URL})
		if in.NodeAgent.Addr != "" {
			env = append(env, corev1.EnvVar{Name: sidecarconfig.EnvNodeAgentAddr, Value: in.NodeAgent.Addr})
		}
	}
	if len(in.AllowedEndpoints) > 0 || in.AllowCloudEndpoints {
		env = append(env, corev1.EnvVar{Name: sidecarconfig.EnvAllowedEndpoints, Value: strings.Join(in.AllowedEndpoints, ",")},
			corev1.EnvVar{Name: sidecarconfig.EnvAllowCloudEndpoints, Value: strconv.FormatBool(in.AllowCloudEndpoints)})
	}
	if vol, mount, err := identityVolume(pod, ds, in.Audiences); err != nil {
		return nil, err
	} else if vol != nil {
		pod.Spec.Volumes = append(pod.Spec.Volumes, *vol)
		mounts = append(mounts, *mount)
	}
	contract := sidecarconfig.Config{Dataset: ds.Name, PodRankField: w.rankField,
		Placement: sidecarconfig.Placement{RankMode: w.mode, Pod: w.rank, Pods: w.pods, ProcsPerPod: w.procs, DataParallel: w.dataParallel}, Job: JobName(pod, in.Owner), Attempt: Attempt(pod, in.Owner), Generation: in.Generation, Image: image, MetricsPort: ptr.Deref(ds.Spec.Sidecar.MetricsPort, 0),
		OperatorURL: in.Operator.URL, OperatorAddr: in.Operator.Addr,
		// On the node's network, a metrics port would be the node's and
		// collide between a node's pods: only where the dataset asks.
		NoMetrics: pod.Spec.HostNetwork && ds.Spec.Sidecar.MetricsPort == nil}
	var ports []corev1.ContainerPort
	if !contract.NoMetrics {
		ports = []corev1.ContainerPort{{Name: "sf-metrics", ContainerPort: contract.Port()}}
	}
	sidecar := corev1.Container{
		Name:          SidecarName,
		Image:         image,
		Command:       []string{"/shardfeed"},
		Args:          contract.Args(),
		Env:           append(contract.Env(), env...),
		VolumeMounts:  mounts,
		Resources:     sidecarResources(pod, ds, in.Resources),
		RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		Ports:         ports,
		StartupProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/shardfeed", "probe", "--socket", SocketPath}}},
			PeriodSeconds:    1,
			FailureThreshold: 600,
		},
		SecurityContext: sidecarSecurityContext(),
	}
	// Native sidecar: first among the init containers, so the socket is up
	// before any other init container or app container starts.
	pod.Spec.InitContainers = append([]corev1.Container{sidecar}, pod.Spec.InitContainers...)
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		c.Env = append(c.Env, corev1.EnvVar{Name: sidecarconfig.EnvSocket, Value: SocketPath})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: SocketVolume, MountPath: SocketDir})
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[AnnotationInjected] = image
	return pod, nil
}

// sidecarSecurityContext is the sidecar's (and its reservation's): the
// restricted Pod Security level's, as user 65532 on a read-only root.
func sidecarSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		RunAsUser:                ptr.To(SidecarUID),
		ReadOnlyRootFilesystem:   ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// nodeAgentToken is the sidecar's identity toward the node agent: a
// token of the pod's ServiceAccount, bound to the pod, for the agent's
// audience alone.
func nodeAgentToken() (corev1.Volume, corev1.VolumeMount) {
	return corev1.Volume{Name: NodeAgentTokenVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptr.To(int32(0o444)),
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: sidecarconfig.NodeAgentAudience, ExpirationSeconds: ptr.To(int64(tokenExpiry)), Path: "token"}}}}}},
		corev1.VolumeMount{Name: NodeAgentTokenVolume, MountPath: sidecarconfig.NodeAgentTokenDir, ReadOnly: true}
}

// tokenizations are the dataset's tokenizations: its default and its
// streams' own.
func tokenizations(ds *datav1alpha1.TrainingDataset) []*datav1alpha1.Tokenize {
	var out []*datav1alpha1.Tokenize
	if ds.Spec.Tokenize != nil {
		out = append(out, ds.Spec.Tokenize)
	}
	for _, s := range ds.Spec.Streams {
		if s.Tokenize != nil {
			out = append(out, s.Tokenize)
		}
	}
	return out
}

// checkPrivateVolumes refuses a pod whose containers mount the volumes
// only the sidecar may: its cache (whose files it maps and serves from; a
// container that rewrote them would change batches under it) and its
// token. The training containers reach the data through the socket.
func checkPrivateVolumes(pod *corev1.Pod) error {
	private := map[string]bool{CacheVolume: true, TokenVolume: true, NodeAgentTokenVolume: true}
	for _, v := range pod.Spec.Volumes {
		if private[v.Name] {
			return deny("the pod declares a volume named %q, which shardfeed injects for its sidecar: rename it", v.Name)
		}
	}
	check := func(name string, mounts []corev1.VolumeMount) error {
		for _, m := range mounts {
			if private[m.Name] {
				return deny("container %q mounts %q, the shardfeed sidecar's own volume: remove the mount (the training containers read batches through the socket, %s)", name, m.Name, SocketPath)
			}
		}
		return nil
	}
	for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
		if err := check(c.Name, c.VolumeMounts); err != nil {
			return err
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if err := check(c.Name, c.VolumeMounts); err != nil {
			return err
		}
	}
	return nil
}

// checkRanks refuses a job whose data-parallel ranks do not divide the
// dataset's numSplits, or whose pods' cache is below what they need
// (design §7; with replication groups, a pod serves up to min(procs, D)
// data-parallel ranks, each needing at most what a pod of a D-pod job
// needs without its prefetch).
func checkRanks(ds *datav1alpha1.TrainingDataset, w rankWiring, minCache map[int]int64, maxShard int64) error {
	S := int(ds.Spec.NumSplits)
	dp := w.dataParallel
	if dp > 0 && S%dp != 0 {
		return deny("TrainingDataset %q has numSplits %d, which the data-parallel size %d (annotation %s) does not divide: use a data-parallel size that divides %d",
			ds.Name, S, dp, AnnotationDataParallel, S)
	}
	if w.mode != sidecarconfig.RankModePod {
		return nil
	}
	world := w.pods * w.procs
	pods, ranksPerPod := w.pods, 1
	switch {
	case dp > 0 && world%dp != 0:
		return deny("annotation %s=%d does not divide the job's %d pods × %d processes = %d ranks: every data-parallel rank is a replication group of the same number of ranks",
			AnnotationDataParallel, dp, w.pods, w.procs, world)
	case dp > 0:
		pods, ranksPerPod = dp, min(w.procs, dp)
	case S%world != 0:
		return deny("TrainingDataset %q has numSplits %d, which the job's %d pods × %d processes = %d ranks do not divide: run a world size that divides %d, or declare the data-parallel size with annotation %s",
			ds.Name, S, w.pods, w.procs, world, S, AnnotationDataParallel)
	}
	limit := ds.Spec.Sidecar.CacheLimit
	need, ok := minCache[pods]
	if limit == nil || !ok {
		return nil
	}
	if ranksPerPod > 1 {
		prefetch := int64(planspec.Prefetch(&ds.Spec)) * maxShard
		need = int64(ranksPerPod)*max(need-prefetch, 0) + prefetch
	}
	if limit.Value() < need {
		what := fmt.Sprintf("a pod of a %d-pod job", w.pods)
		if dp > 0 {
			what = fmt.Sprintf("a pod serving up to %d of the %d data-parallel ranks", ranksPerPod, dp)
		}
		return deny("TrainingDataset %q: spec.sidecar.cacheLimit %s is below the %s %s needs to never stall: raise it (shardfeed plan prints the minimum per pod count)",
			ds.Name, limit.String(), resource.NewQuantity(need, resource.BinarySI).String(), what)
	}
	return nil
}

// sidecarResources are the dataset's, else the operator's defaults, with
// the hand-off memory added to the memory request and limit (its pages are
// charged to the sidecar's container); in a pod whose every container has
// limits equal to its requests (the Guaranteed class, which the kubelet's
// CPU manager pins), the sidecar's limits equal its requests too, so the
// pod stays Guaranteed.
func sidecarResources(pod *corev1.Pod, ds *datav1alpha1.TrainingDataset, defaults corev1.ResourceRequirements) corev1.ResourceRequirements {
	res := *ds.Spec.Sidecar.Resources.DeepCopy()
	if len(res.Requests) == 0 && len(res.Limits) == 0 {
		res = *defaults.DeepCopy()
	}
	if pool := planspec.HandoffBytes(&ds.Spec); pool > 0 {
		for _, list := range []corev1.ResourceList{res.Requests, res.Limits} {
			if q, ok := list[corev1.ResourceMemory]; ok {
				q.Add(*resource.NewQuantity(pool, resource.BinarySI))
				list[corev1.ResourceMemory] = q
			}
		}
	}
	if !guaranteed(pod) {
		return res
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, hasReq := res.Requests[name]
		if _, hasLimit := res.Limits[name]; hasReq && !hasLimit {
			if res.Limits == nil {
				res.Limits = corev1.ResourceList{}
			}
			res.Limits[name] = req
		}
	}
	return res
}

// guaranteed reports whether every container of the pod has CPU and
// memory limits and requests equal to them (or unset: they default to
// the limits).
func guaranteed(pod *corev1.Pod) bool {
	containers := append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range containers {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			limit, ok := c.Resources.Limits[name]
			if !ok {
				return false
			}
			if req, ok := c.Resources.Requests[name]; ok && req.Cmp(limit) != 0 {
				return false
			}
		}
	}
	return len(containers) > 0
}

// cacheSizeLimit leaves room above cacheLimit for the downloads in flight,
// so that they never get the pod evicted.
func cacheSizeLimit(ds *datav1alpha1.TrainingDataset, maxShard int64) *resource.Quantity {
	if ds.Spec.Sidecar.CacheLimit == nil {
		return nil
	}
	q := resource.NewQuantity(ds.Spec.Sidecar.CacheLimit.Value()+downloadsInCache*maxShard, resource.BinarySI)
	return q
}

type rankWiring struct {
	mode        sidecarconfig.RankMode
	pods, procs int
	// dataParallel is the declared data-parallel size (0: the world size).
	dataParallel int
	// rank is the pod's index, or rankField the field of the pod it is in.
	rank      int
	rankField string
}

// wiring finds the pod's rank and the job's pod count (design §7): the
// shardfeed annotations override; else the first job kind that claims the
// pod places it (a TrainJob's node, a JobSet's pod, a PyTorchJob's
// replica, an Indexed Job's completion index, a StatefulSet's pod index,
// a platform's own kind's index label; internal/jobkind); else the ranks
// come from the clients (rank mode client).
func wiring(pod *corev1.Pod, owner Owner, kinds *jobkind.Registry) (rankWiring, error) {
	w := rankWiring{mode: sidecarconfig.RankModeClient, procs: 1}
	a := pod.Annotations
	if v, ok := a[AnnotationProcsPerPod]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return w, deny("annotation %s=%q must be a positive integer (the training processes per pod)", AnnotationProcsPerPod, v)
		}
		w.procs = n
	}
	if v, ok := a[AnnotationDataParallel]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return w, deny("annotation %s=%q must be a positive integer (the job's data-parallel size: its ranks divided by the tensor, context and pipeline parallel sizes)", AnnotationDataParallel, v)
		}
		w.dataParallel = n
	}
	if procs, ok, err := kinds.Procs(pod); err != nil {
		return w, deny("%s", err)
	} else if ok && a[AnnotationProcsPerPod] == "" {
		w.procs = procs
	}
	if a[AnnotationRankMode] == string(sidecarconfig.RankModeClient) {
		return w, nil
	}
	if v, ok := a[AnnotationPods]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return w, deny("annotation %s=%q must be a positive integer (the job's pod count)", AnnotationPods, v)
		}
		w.pods = n
	}
	if a[AnnotationRank] != "" {
		r, err := strconv.Atoi(a[AnnotationRank])
		if err != nil || r < 0 {
			return w, deny("annotation %s=%q must be a non-negative integer (the pod's rank)", AnnotationRank, a[AnnotationRank])
		}
		w.rank = r
		if w.pods == 0 {
			return w, deny("annotation %s needs %s (the job's pod count) beside it", AnnotationRank, AnnotationPods)
		}
		if r >= w.pods {
			return w, deny("annotation %s=%d is outside the job's %d pods", AnnotationRank, r, w.pods)
		}
	} else {
		p, ok, err := kinds.Place(pod, owner, w.pods)
		if err != nil {
			return w, deny("%s", err)
		}
		if !ok {
			return w, nil // no index: ranks come at rendezvous
		}
		w.rank, w.rankField, w.pods = p.Rank, p.RankField, p.Pods
	}
	if w.pods < 1 {
		return w, deny("cannot tell how many pods the job has: set the annotation %s", AnnotationPods)
	}
	w.mode = sidecarconfig.RankModePod
	return w, nil
}

// sidecarImage is the dataset's image if the policy allows it, else the
// operator's default; a job keeps the one it started with.
func sidecarImage(in Input) (string, error) {
	image := in.Images.Default
	if in.Dataset.Spec.Sidecar.Image != "" {
		if err := in.Images.Check(in.Dataset.Spec.Sidecar.Image); err != nil {
			return "", deny("TrainingDataset %q: %v", in.Dataset.Name, err)
		}
		image = in.Dataset.Spec.Sidecar.Image
	}
	// The job keeps the sidecar it started with, if the policy still
	// allows it: a pin is data the job's pods could have written.
	if in.PinnedImage != "" && in.Images.Allows(in.PinnedImage) {
		image = in.PinnedImage
	}
	if image == "" {
		return "", deny("no sidecar image: set spec.sidecar.image on TrainingDataset %q or the operator's default image", in.Dataset.Name)
	}
	return image, nil
}

// JobName is the job's identity: the annotation, else the owner's name,
// else the pod's.
func JobName(pod *corev1.Pod, owner Owner) string { return jobName(pod, owner) }

func jobName(pod *corev1.Pod, owner Owner) string {
	if v := pod.Annotations[AnnotationJob]; v != "" {
		return v
	}
	if v := pod.Labels[jobkind.JobSetName]; v != "" {
		return v // not the child Job: the JobSet is the training job
	}
	if owner.Name != "" {
		return owner.Name
	}
	if pod.Name != "" {
		return pod.Name
	}
	return pod.GenerateName + "job"
}

// Attempt is shared by the pods of one job attempt: the owner's UID (for a
// JobSet, its UID and restart count: a restart recreates every child Job).
func Attempt(pod *corev1.Pod, owner Owner) string {
	if l := pod.Labels; l[jobkind.JobSetName] != "" {
		id := l[jobkind.JobSetUID]
		if id == "" {
			id = "jobset-" + l[jobkind.JobSetName]
		}
		return id + "-" + cmp.Or(l[jobkind.JobSetRestartAttempt], "0")
	}
	if owner.UID != "" {
		return owner.UID
	}
	return "pod-" + JobName(pod, owner)
}

// IdentityVolume is the projected volume of the sidecar's workload
// identity tokens.
const IdentityVolume = "shardfeed-identity"

// identityVolume projects, for each stream that reads with a workload
// identity, a token of the pod's ServiceAccount for the stream's cloud
// audience, into the sidecar alone. The pod must run as the stream's
// ServiceAccount: the sidecar reads with the pod's own identity, never
// one the dataset's author names for it.
func identityVolume(pod *corev1.Pod, ds *datav1alpha1.TrainingDataset, audiences []string) (*corev1.Volume, *corev1.VolumeMount, error) {
	var sources []corev1.VolumeProjection
	for i, s := range ds.Spec.Streams {
		wi := s.Source.WorkloadIdentity
		if wi == nil {
			continue
		}
		if pod.Spec.ServiceAccountName != wi.ServiceAccountName {
			return nil, nil, deny("TrainingDataset %q: spec.streams[%d] (%q) reads with the workload identity of ServiceAccount %q, and the pod runs as %q: set the pod's serviceAccountName to %q",
				ds.Name, i, s.Name, wi.ServiceAccountName, pod.Spec.ServiceAccountName, wi.ServiceAccountName)
		}
		// Checked here too: a dataset admitted before the check, or past
		// the validating webhook, must not get a pod's token projected for
		// an audience of the author's choosing.
		if err := workloadidentity.CheckAudience(s.Source.URI, workloadidentity.Audience(s.Source), audiences); err != nil {
			return nil, nil, deny("TrainingDataset %q: spec.streams[%d] (%q): %v", ds.Name, i, s.Name, err)
		}
		sources = append(sources, corev1.VolumeProjection{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Audience: workloadidentity.Audience(s.Source), ExpirationSeconds: ptr.To(int64(workloadidentity.TokenExpiry)), Path: s.Name}})
	}
	if sources == nil {
		return nil, nil, nil
	}
	return &corev1.Volume{Name: IdentityVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptr.To(int32(0o444)), Sources: sources}}},
		&corev1.VolumeMount{Name: IdentityVolume, MountPath: workloadidentity.TokenDir, ReadOnly: true}, nil
}

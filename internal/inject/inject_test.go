package inject

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/jobkind"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
)

func dataset() *datav1alpha1.TrainingDataset {
	return &datav1alpha1.TrainingDataset{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ml"},
		Spec: datav1alpha1.TrainingDatasetSpec{
			Streams: []datav1alpha1.Stream{
				{Name: "a", Source: datav1alpha1.Source{URI: "s3://b/a/", CredentialsSecretRef: &datav1alpha1.SecretReference{Name: "s3"}}},
				{Name: "b", Source: datav1alpha1.Source{URI: "s3://b/b/", CredentialsSecretRef: &datav1alpha1.SecretReference{Name: "s3"}}},
			},
			NumSplits: 8, GlobalBatchSize: 64,
			Sidecar: datav1alpha1.SidecarSpec{CacheLimit: ptr.To(resource.MustParse("10Gi"))},
		},
	}
}

func pod(labels, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "train-0", Namespace: "ml", Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "setup", Image: "busybox"}},
			Containers:     []corev1.Container{{Name: "trainer", Image: "pytorch"}, {Name: "logger", Image: "fluent"}},
		},
	}
}

// trainJobPod is a node pod of a TrainJob as Kubeflow Trainer v2's torch
// runtime makes it (pkg/runtime/framework/plugins/torch): the JobSet's
// labels, the completion index, and the PET_ variables in the "node"
// container, nproc its PET_NPROC_PER_NODE ("" for none).
func trainJobPod(nodes, index, nproc string, gpus int64) *corev1.Pod {
	p := pod(map[string]string{LabelDataset: "web", jobkind.JobSetName: "llm", jobkind.JobSetUID: "js1", jobkind.JobSetJobIndex: "0", jobkind.JobSetReplicas: "1",
		jobkind.JobSetJobGlobalIndex: "2", jobkind.JobSetGlobalReplicas: "3", jobkind.JobCompletionIndex: index}, map[string]string{jobkind.JobCompletionIndex: index})
	node := corev1.Container{Name: "node", Image: "pytorch", Env: []corev1.EnvVar{
		{Name: jobkind.TrainerNumNodes, Value: nodes},
		{Name: jobkind.TrainerNodeRank, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + jobkind.JobCompletionIndex + "']"}}},
		{Name: "PET_MASTER_ADDR", Value: "llm-node-0-0.llm"}, {Name: "PET_MASTER_PORT", Value: "29400"},
	}}
	if nproc != "" {
		node.Env = append(node.Env, corev1.EnvVar{Name: jobkind.TrainerNumProcPerNode, Value: nproc})
	}
	if gpus > 0 {
		node.Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
	}
	p.Spec.Containers = []corev1.Container{node}
	return p
}

func env(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func TestInjectWiresTheRankOfEveryKindOfOwner(t *testing.T) {
	indexed := map[string]string{jobkind.JobCompletionIndex: "3"}
	pods := func(mode sidecarconfig.RankMode, pod, pods, procs int) sidecarconfig.Placement {
		return sidecarconfig.Placement{RankMode: mode, Pod: pod, Pods: pods, ProcsPerPod: procs}
	}
	const podMode, clientMode = sidecarconfig.RankModePod, sidecarconfig.RankModeClient
	tests := []struct {
		name  string
		pod   *corev1.Pod
		owner Owner
		// want is the placement the sidecar reads from its environment;
		// rankField, if set, the pod's field the kubelet reads its rank from.
		want         sidecarconfig.Placement
		rankField    string
		job, attempt string
	}{
		{name: "Indexed Job", pod: pod(map[string]string{LabelDataset: "web"}, indexed), owner: Owner{Kind: "Job", Name: "train", UID: "u1", Replicas: 4},
			want: pods(podMode, 0, 4, 1), rankField: "metadata.annotations['batch.kubernetes.io/job-completion-index']", job: "train", attempt: "u1"},
		{name: "StatefulSet", pod: pod(map[string]string{LabelDataset: "web", jobkind.PodIndexLabel: "1"}, nil), owner: Owner{Kind: "StatefulSet", Name: "trainers", UID: "u2", Replicas: 2},
			want: pods(podMode, 0, 2, 1), rankField: "metadata.labels['apps.kubernetes.io/pod-index']", job: "trainers", attempt: "u2"},
		{name: "annotations override the Job's", pod: pod(map[string]string{LabelDataset: "web"}, map[string]string{jobkind.JobCompletionIndex: "3", AnnotationRank: "1", AnnotationPods: "2", AnnotationProcsPerPod: "4", AnnotationJob: "llm"}),
			owner: Owner{Kind: "Job", Name: "train", UID: "u1", Replicas: 4}, want: pods(podMode, 1, 2, 4), job: "llm", attempt: "u1"},
		{name: "torchrun elastic", pod: pod(map[string]string{LabelDataset: "web"}, map[string]string{AnnotationRankMode: "client"}), owner: Owner{Kind: "Job", Name: "elastic", UID: "u3", Replicas: 3},
			want: pods(clientMode, 0, 1, 1), job: "elastic", attempt: "u3"},
		{name: "bare pod", pod: pod(map[string]string{LabelDataset: "web"}, nil), want: pods(clientMode, 0, 1, 1), job: "train-0", attempt: "pod-train-0"},
		// JobSet (also what Kubeflow Trainer v2 runs): Job 1 of 2, 4 pods
		// each, completion index 3 → rank 7 of 8.
		{name: "JobSet", pod: pod(map[string]string{LabelDataset: "web", jobkind.JobSetName: "llm", jobkind.JobSetUID: "js1", jobkind.JobSetJobIndex: "1", jobkind.JobSetReplicas: "2",
			jobkind.JobSetRestartAttempt: "2"}, indexed), owner: Owner{Kind: "Job", Name: "llm-workers-1", UID: "u4", Replicas: 4},
			want: pods(podMode, 7, 8, 1), job: "llm", attempt: "js1-2"},
		{name: "JobSet with global indexes", pod: pod(map[string]string{LabelDataset: "web", jobkind.JobSetName: "llm", jobkind.JobSetJobIndex: "0", jobkind.JobSetReplicas: "1",
			jobkind.JobSetJobGlobalIndex: "1", jobkind.JobSetGlobalReplicas: "2"}, map[string]string{jobkind.JobCompletionIndex: "0"}), owner: Owner{Kind: "Job", Name: "llm-b-0", UID: "u5", Replicas: 4},
			want: pods(podMode, 4, 8, 1), job: "llm", attempt: "jobset-llm-0"},
		// A TrainJob's node 3 of 4 (its JobSet's third Job, after two
		// initializers: the global index is not the rank), torchrun
		// starting 2 processes in it.
		{name: "TrainJob", pod: trainJobPod("4", "3", "2", 0), owner: Owner{Kind: "Job", Name: "llm-node-0", UID: "u7", Replicas: 4},
			want: pods(podMode, 3, 4, 2), job: "llm", attempt: "js1-0"},
		// nproc_per_node "auto" on a GPU node: one process per GPU.
		{name: "TrainJob on GPUs", pod: trainJobPod("1", "0", "auto", 8), owner: Owner{Kind: "Job", Name: "llm-node-0", UID: "u7", Replicas: 1},
			want: pods(podMode, 0, 1, 8), job: "llm", attempt: "js1-0"},
		{name: "TrainJob, processes annotated", pod: func() *corev1.Pod {
			p := trainJobPod("2", "1", "8", 0)
			p.Annotations[AnnotationProcsPerPod] = "4"
			return p
		}(), owner: Owner{Kind: "Job", Name: "llm-node-0", UID: "u7", Replicas: 2}, want: pods(podMode, 1, 2, 4), job: "llm", attempt: "js1-0"},
		{name: "PyTorchJob master", pod: pod(map[string]string{LabelDataset: "web", jobkind.KubeflowReplicaType: "master", jobkind.KubeflowReplicaIndex: "0"}, nil),
			owner: Owner{Kind: "PyTorchJob", Name: "pt", UID: "u6", Replicas: 4, Masters: 1}, want: pods(podMode, 0, 4, 1), job: "pt", attempt: "u6"},
		{name: "PyTorchJob worker", pod: pod(map[string]string{LabelDataset: "web", jobkind.KubeflowReplicaType: "Worker", jobkind.KubeflowReplicaIndex: "2"}, nil),
			owner: Owner{Kind: "PyTorchJob", Name: "pt", UID: "u6", Replicas: 4, Masters: 1}, want: pods(podMode, 3, 4, 1), job: "pt", attempt: "u6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Inject(Input{Pod: tt.pod, Dataset: dataset(), Owner: tt.owner, Images: ImagePolicy{Default: "shardfeed:v1"}})
			if err != nil {
				t.Fatal(err)
			}
			sc := got.Spec.InitContainers[0]
			if sc.Name != SidecarName || got.Spec.InitContainers[1].Name != "setup" {
				t.Fatalf("init containers %v: the sidecar must come first", got.Spec.InitContainers)
			}
			// What the sidecar reads, as it reads it (the kubelet's fields aside).
			contract, err := sidecarconfig.FromContainer(&sc)
			if err != nil {
				t.Fatal(err)
			}
			if contract.Placement != tt.want || contract.Job != tt.job || contract.Attempt != tt.attempt || contract.Dataset != "web" {
				t.Errorf("the sidecar reads %+v, job %q, attempt %q, dataset %q; want %+v, %q, %q, web",
					contract.Placement, contract.Job, contract.Attempt, contract.Dataset, tt.want, tt.job, tt.attempt)
			}
			field := func(name string) string {
				if e := env(sc, name); e != nil && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
					return e.ValueFrom.FieldRef.FieldPath
				}
				return ""
			}
			if f := field(sidecarconfig.EnvPodRank); f != tt.rankField {
				t.Errorf("the pod's rank is read from field %q, want %q", f, tt.rankField)
			}
			if f := field(sidecarconfig.EnvNamespace); f != "metadata.namespace" {
				t.Errorf("the namespace is read from %q", f)
			}
			if tt.want.RankMode == clientMode && (env(sc, sidecarconfig.EnvPodRank) != nil || env(sc, sidecarconfig.EnvPods) != nil) {
				t.Errorf("rank mode client, yet the sidecar is given a pod rank or a pod count")
			}
		})
	}
}

func TestInjectAddsASafeNativeSidecarAndTheSocketToEveryAppContainer(t *testing.T) {
	in := Input{Pod: pod(map[string]string{LabelDataset: "web"}, map[string]string{jobkind.JobCompletionIndex: "0"}), Dataset: dataset(),
		Owner: Owner{Kind: "Job", Name: "train", UID: "u1", Replicas: 2}, Images: ImagePolicy{Default: "shardfeed:v1"}, MaxShardBytes: 1 << 30}
	got, err := Inject(in)
	if err != nil {
		t.Fatal(err)
	}
	sc := got.Spec.InitContainers[0]
	if sc.RestartPolicy == nil || *sc.RestartPolicy != corev1.ContainerRestartPolicyAlways || sc.StartupProbe == nil || sc.StartupProbe.Exec == nil {
		t.Fatalf("not a native sidecar with a startup probe: %+v", sc)
	}
	if !reflect.DeepEqual(sc.Command, []string{"/shardfeed"}) || sc.Args[0] != "sidecar" || sc.Image != "shardfeed:v1" {
		t.Fatalf("command %v %v image %s", sc.Command, sc.Args, sc.Image)
	}
	sec := sc.SecurityContext
	if !*sec.RunAsNonRoot || !*sec.ReadOnlyRootFilesystem || *sec.AllowPrivilegeEscalation || sec.Capabilities.Drop[0] != "ALL" ||
		sec.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Fatalf("security context %+v", sec)
	}
	vols := map[string]corev1.Volume{}
	for _, v := range got.Spec.Volumes {
		vols[v.Name] = v
	}
	// 10 GiB of cache plus 4 downloads of the largest shard in flight.
	if v := vols[CacheVolume]; v.EmptyDir == nil || v.EmptyDir.SizeLimit.Value() != 14<<30 {
		t.Fatalf("cache volume %+v", v)
	}
	if v := vols[PlanVolume]; v.ConfigMap == nil || v.ConfigMap.Name != "web-plan" {
		t.Fatalf("plan volume %+v", v)
	}
	secrets := 0
	for _, v := range got.Spec.Volumes {
		if v.Secret != nil {
			secrets++
			// Readable by the sidecar's non-root user (found on a real node).
			if v.Secret.SecretName != "s3" || v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o004 == 0 {
				t.Fatalf("secret volume %+v", v)
			}
		}
	}
	if secrets != 1 {
		t.Fatalf("%d Secret volumes for one Secret used by two streams", secrets)
	}
	for _, c := range got.Spec.Containers {
		if e := env(c, sidecarconfig.EnvSocket); e == nil || e.Value != SocketPath {
			t.Errorf("container %s has no SHARDFEED_SOCKET", c.Name)
		}
		found := false
		for _, m := range c.VolumeMounts {
			found = found || (m.Name == SocketVolume && m.MountPath == SocketDir)
		}
		if !found {
			t.Errorf("container %s does not mount the socket", c.Name)
		}
	}
	// Injecting twice changes nothing.
	again, err := Inject(Input{Pod: got, Dataset: dataset(), Owner: in.Owner, Images: ImagePolicy{Default: "shardfeed:v2"}})
	if err != nil || !reflect.DeepEqual(again, got) {
		t.Fatalf("a second injection changed the pod (%v)", err)
	}
	// A job that started with another image keeps it.
	pinned, err := Inject(Input{Pod: in.Pod, Dataset: dataset(), Owner: in.Owner, Images: ImagePolicy{Default: "shardfeed:v2"}, PinnedImage: "shardfeed:v1"})
	if err != nil || pinned.Spec.InitContainers[0].Image != "shardfeed:v1" {
		t.Fatalf("pinned image: %v", err)
	}
}

func TestInjectDeniesPodsThatCannotBeServed(t *testing.T) {
	ds := dataset()
	tests := []struct {
		name  string
		pod   *corev1.Pod
		owner Owner
		min   map[int]int64
		want  string
	}{
		{"world does not divide numSplits", pod(nil, map[string]string{jobkind.JobCompletionIndex: "0"}), Owner{Kind: "Job", Name: "j", Replicas: 3}, nil,
			"3 pods × 1 processes = 3 ranks do not divide"},
		{"procs per pod make the world wrong", pod(nil, map[string]string{jobkind.JobCompletionIndex: "0", AnnotationProcsPerPod: "3"}), Owner{Kind: "Job", Name: "j", Replicas: 2}, nil,
			"2 pods × 3 processes = 6 ranks"},
		{"cache below the minimum", pod(nil, map[string]string{jobkind.JobCompletionIndex: "0"}), Owner{Kind: "Job", Name: "j", Replicas: 2}, map[int]int64{2: 20 << 30},
			"cacheLimit 10Gi is below the 20Gi"},
		{"data-parallel size does not divide numSplits", pod(nil, map[string]string{jobkind.JobCompletionIndex: "0", AnnotationProcsPerPod: "4", AnnotationDataParallel: "3"}),
			Owner{Kind: "Job", Name: "j", Replicas: 3}, nil, "the data-parallel size 3 (annotation shardfeed.io/data-parallel-size) does not divide"},
		{"data-parallel size does not divide the world", pod(nil, map[string]string{jobkind.JobCompletionIndex: "0", AnnotationProcsPerPod: "3", AnnotationDataParallel: "4"}),
			Owner{Kind: "Job", Name: "j", Replicas: 2}, nil, "data-parallel-size=4 does not divide the job's 2 pods × 3 processes = 6 ranks"},
		{"bad data-parallel size", pod(nil, map[string]string{jobkind.JobCompletionIndex: "0", AnnotationDataParallel: "0"}), Owner{Kind: "Job", Name: "j", Replicas: 2}, nil,
			"must be a positive integer (the job's data-parallel size"},
		{"data-parallel size in client mode too", pod(nil, map[string]string{AnnotationDataParallel: "5"}), Owner{}, nil, "data-parallel size 5"},
		// Four data-parallel ranks on a pod, each needing 3Gi of the 4Gi a
		// pod of a 4-pod job needs with 1Gi of prefetch: 4×3 + 1 = 13Gi.
		{"cache below what a pod's replication groups need", pod(nil, map[string]string{jobkind.JobCompletionIndex: "0", AnnotationProcsPerPod: "4", AnnotationDataParallel: "4"}),
			Owner{Kind: "Job", Name: "j", Replicas: 3}, map[int]int64{4: 4 << 30}, "below the 13Gi a pod serving up to 4 of the 4 data-parallel ranks needs"},
		{"rank without pods", pod(nil, map[string]string{AnnotationRank: "1"}), Owner{}, nil, "needs shardfeed.io/pods"},
		{"rank outside the pods", pod(nil, map[string]string{AnnotationRank: "5", AnnotationPods: "4"}), Owner{}, nil, "outside the job's 4 pods"},
		{"bad procs per pod", pod(nil, map[string]string{AnnotationProcsPerPod: "two"}), Owner{}, nil, "must be a positive integer"},
		{"indexed pod of unknown size", pod(nil, map[string]string{jobkind.JobCompletionIndex: "0"}), Owner{}, nil, "set the annotation shardfeed.io/pods"},
		{"JobSet pod with no job index", pod(map[string]string{jobkind.JobSetName: "llm", jobkind.JobSetReplicas: "2"}, map[string]string{jobkind.JobCompletionIndex: "0"}),
			Owner{Kind: "Job", Replicas: 4}, nil, "without a valid jobset.sigs.k8s.io/job-global-index"},
		{"JobSet pod not Indexed", pod(map[string]string{jobkind.JobSetName: "llm", jobkind.JobSetJobIndex: "0", jobkind.JobSetReplicas: "2"}, nil),
			Owner{Kind: "Job", Replicas: 4}, nil, "use completionMode Indexed"},
		{"JobSet index outside", pod(map[string]string{jobkind.JobSetName: "llm", jobkind.JobSetJobIndex: "2", jobkind.JobSetReplicas: "2"}, map[string]string{jobkind.JobCompletionIndex: "0"}),
			Owner{Kind: "Job", Replicas: 4}, nil, "outside 2 Jobs of 4 pods"},
		{"JobSet of more pods than a job may have (no wrap around)", pod(map[string]string{jobkind.JobSetName: "llm", jobkind.JobSetJobIndex: "4611686018427387904", jobkind.JobSetReplicas: "4611686018427387905"}, map[string]string{jobkind.JobCompletionIndex: "0"}),
			Owner{Kind: "Job", Replicas: 4}, nil, "are more than 1048576 pods"},
		{"TrainJob node count not a number", trainJobPod("x", "0", "1", 0), Owner{Kind: "Job", Replicas: 2}, nil, `PET_NNODES="x": expected a positive node count`},
		{"TrainJob auto processes without GPUs", trainJobPod("2", "0", "auto", 0), Owner{Kind: "Job", Replicas: 2}, nil,
			`PET_NPROC_PER_NODE="auto" and no GPU limit: cannot tell how many processes`},
		{"TrainJob nodes other than its Job's", trainJobPod("2", "0", "1", 0), Owner{Kind: "Job", Replicas: 4}, nil, "PET_NNODES=2, but its Job has 4 completions"},
		{"TrainJob node outside", trainJobPod("2", "2", "1", 0), Owner{}, nil, "job-completion-index=2 outside its 2 nodes"},
		{"TrainJob node without an index", trainJobPod("2", "", "1", 0), Owner{}, nil, "TrainJob pod without a valid batch.kubernetes.io/job-completion-index"},
		{"PyTorchJob replica type unknown", pod(map[string]string{jobkind.KubeflowReplicaType: "ps", jobkind.KubeflowReplicaIndex: "0"}, nil),
			Owner{Kind: "PyTorchJob", Replicas: 4, Masters: 1}, nil, `replica type "ps"`},
		{"PyTorchJob bad index", pod(map[string]string{jobkind.KubeflowReplicaType: "worker", jobkind.KubeflowReplicaIndex: "x"}, nil),
			Owner{Kind: "PyTorchJob", Replicas: 4, Masters: 1}, nil, "expected a non-negative index"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Inject(Input{Pod: tt.pod, Dataset: ds, Owner: tt.owner, Images: ImagePolicy{Default: "shardfeed:v1"}, MinCacheBytes: tt.min, MaxShardBytes: 512 << 20})
			var d *Denied
			if !errors.As(err, &d) || !strings.Contains(d.Reason, tt.want) {
				t.Fatalf("got %v, want a denial saying %q", err, tt.want)
			}
		})
	}
}

// TestInjectCountsOnlyDataParallelRanks: 3 pods of 4 processes (12 ranks,
// which do not divide numSplits 8) run 4 replication groups of 3 ranks;
// the sidecar learns the data-parallel size, and the cache check counts a
// pod's 4 data-parallel ranks.
func TestInjectCountsOnlyDataParallelRanks(t *testing.T) {
	p := pod(nil, map[string]string{jobkind.JobCompletionIndex: "1", AnnotationProcsPerPod: "4", AnnotationDataParallel: "4"})
	in := Input{Pod: p, Dataset: dataset(), Owner: Owner{Kind: "Job", Name: "j", Replicas: 3}, Images: ImagePolicy{Default: "shardfeed:v1"},
		MinCacheBytes: map[int]int64{4: 3 << 30}, MaxShardBytes: 512 << 20} // 4×2 + 1 = 9Gi ≤ 10Gi
	got, err := Inject(in)
	if err != nil {
		t.Fatal(err)
	}
	c, err := sidecarconfig.FromContainer(&got.Spec.InitContainers[0])
	if err != nil {
		t.Fatal(err)
	}
	if c.DataParallel != 4 || c.Pods != 3 || c.ProcsPerPod != 4 || c.RankMode != sidecarconfig.RankModePod {
		t.Fatalf("the sidecar is told %+v, want 3 pods × 4 processes in 4 data-parallel ranks", c)
	}
}

func TestInjectGivesTheSidecarResourcesThatKeepThePodsQoS(t *testing.T) {
	q := resource.MustParse
	defaults := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("500m"), corev1.ResourceMemory: q("1Gi")}}
	exact := corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: q("8"), corev1.ResourceMemory: q("64Gi")}}
	burstable := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("4"), corev1.ResourceMemory: q("32Gi")},
		Limits: corev1.ResourceList{corev1.ResourceCPU: q("8"), corev1.ResourceMemory: q("64Gi")}}
	own := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("2"), corev1.ResourceMemory: q("4Gi")}}
	ownLimited := corev1.ResourceRequirements{Requests: own.Requests, Limits: corev1.ResourceList{corev1.ResourceMemory: q("6Gi")}}
	// The hand-off memory (256Mi unless the dataset says) is added to the
	// memory request and limit: its pages are charged to the sidecar.
	withPool := func(memory string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: q("500m"), corev1.ResourceMemory: q(memory)}
	}
	tests := []struct {
		name       string
		containers corev1.ResourceRequirements
		dataset    corev1.ResourceRequirements
		handoff    string
		want       corev1.ResourceRequirements
	}{
		{"no resources: the defaults as requests", corev1.ResourceRequirements{}, corev1.ResourceRequirements{}, "",
			corev1.ResourceRequirements{Requests: withPool("1280Mi")}},
		{"Burstable: requests only", burstable, corev1.ResourceRequirements{}, "", corev1.ResourceRequirements{Requests: withPool("1280Mi")}},
		{"Guaranteed: limits equal to the requests", exact, corev1.ResourceRequirements{}, "",
			corev1.ResourceRequirements{Requests: withPool("1280Mi"), Limits: withPool("1280Mi")}},
		{"the dataset's own, in a Guaranteed pod", exact, own, "0", corev1.ResourceRequirements{Requests: own.Requests, Limits: own.Requests}},
		{"the dataset's own, in a Burstable pod", burstable, own, "0", own},
		{"the dataset's own and its hand-off memory", burstable, ownLimited, "1Gi", corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: q("2"), corev1.ResourceMemory: q("5Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: q("7Gi")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pod(map[string]string{LabelDataset: "web"}, map[string]string{jobkind.JobCompletionIndex: "0"})
			for i := range p.Spec.Containers {
				p.Spec.Containers[i].Resources = tt.containers
			}
			p.Spec.InitContainers[0].Resources = tt.containers
			ds := dataset()
			ds.Spec.Sidecar.Resources = tt.dataset
			if tt.handoff != "" {
				ds.Spec.Sidecar.HandoffMemory = ptr.To(q(tt.handoff))
			}
			in := Input{Pod: p, Dataset: ds, Owner: Owner{Kind: "Job", Name: "train", UID: "u1", Replicas: 2},
				Images: ImagePolicy{Default: "shardfeed:v1"}, Resources: defaults}
			got, err := Inject(in)
			if err != nil {
				t.Fatal(err)
			}
			if res := got.Spec.InitContainers[0].Resources; !equality.Semantic.DeepEqual(res, tt.want) {
				t.Errorf("sidecar resources %v, want %v", res, tt.want)
			}
			// A queued job's template reserves the same resources, and its
			// pods are injected as if it had not.
			r := Reservation(&corev1.PodTemplateSpec{Spec: p.Spec}, ds, in.Images, defaults)
			if r == nil || !equality.Semantic.DeepEqual(r.Resources, tt.want) {
				t.Fatalf("reservation %+v, want resources %v", r, tt.want)
			}
			in.Pod = p.DeepCopy()
			in.Pod.Spec.InitContainers = append([]corev1.Container{*r}, in.Pod.Spec.InitContainers...)
			if Injected(in.Pod) {
				t.Error("a pod with a reservation counts as injected")
			}
			reserved, err := Inject(in)
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(reserved, got) {
				t.Errorf("the pod of a reserved template was injected as\n%+v\nwant\n%+v", reserved.Spec.InitContainers, got.Spec.InitContainers)
			}
		})
	}
}

func TestInjectOpensNoMetricsPortOnTheNodesNetworkUnlessAsked(t *testing.T) {
	for _, tt := range []struct {
		name        string
		hostNetwork bool
		port        *int32
		wantPort    int32 // 0: none
	}{
		{"pod network", false, nil, 9464},
		{"node network", true, nil, 0},
		{"node network, a port asked for", true, ptr.To(int32(19464)), 19464},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := pod(map[string]string{LabelDataset: "web"}, map[string]string{jobkind.JobCompletionIndex: "0"})
			p.Spec.HostNetwork = tt.hostNetwork
			ds := dataset()
			ds.Spec.Sidecar.MetricsPort = tt.port
			got, err := Inject(Input{Pod: p, Dataset: ds, Owner: Owner{Kind: "Job", Name: "train", UID: "u1", Replicas: 2}, Images: ImagePolicy{Default: "i"}})
			if err != nil {
				t.Fatal(err)
			}
			sc := got.Spec.InitContainers[0]
			addr := "?"
			for i, a := range sc.Args {
				if a == "--metrics-addr" && i+1 < len(sc.Args) {
					addr = sc.Args[i+1]
				}
			}
			if tt.wantPort == 0 {
				if len(sc.Ports) != 0 || addr != "" {
					t.Errorf("ports %v, --metrics-addr %q: want no metrics listener", sc.Ports, addr)
				}
				return
			}
			if len(sc.Ports) != 1 || sc.Ports[0].ContainerPort != tt.wantPort || addr != fmt.Sprintf(":%d", tt.wantPort) {
				t.Errorf("ports %v, --metrics-addr %q: want port %d", sc.Ports, addr, tt.wantPort)
			}
		})
	}
}

// The sidecar maps the files of its cache and serves batches from them: no
// other container may mount it (nor its token).
func TestInjectRefusesAPodThatMountsTheSidecarsOwnVolumes(t *testing.T) {
	mount := func(name string) []corev1.VolumeMount { return []corev1.VolumeMount{{Name: name, MountPath: "/x"}} }
	tests := []struct {
		name  string
		alter func(p *corev1.Pod)
		want  string
	}{
		{"trainer mounts the cache", func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts = mount(CacheVolume) }, `container "trainer" mounts "shardfeed-cache"`},
		{"init container mounts the cache", func(p *corev1.Pod) { p.Spec.InitContainers[0].VolumeMounts = mount(CacheVolume) }, `container "setup" mounts "shardfeed-cache"`},
		{"logger mounts the token", func(p *corev1.Pod) { p.Spec.Containers[1].VolumeMounts = mount(TokenVolume) }, `container "logger" mounts "shardfeed-token"`},
		{"ephemeral container mounts the cache", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", VolumeMounts: mount(CacheVolume)}}}
		}, `container "debug" mounts "shardfeed-cache"`},
		{"pod declares the cache volume", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: CacheVolume, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		}, `declares a volume named "shardfeed-cache"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pod(nil, map[string]string{AnnotationRank: "0", AnnotationPods: "1"})
			tt.alter(p)
			_, err := Inject(Input{Pod: p, Dataset: dataset(), Images: ImagePolicy{Default: "shardfeed:v1"}, MaxShardBytes: 512 << 20})
			var d *Denied
			if !errors.As(err, &d) || !strings.Contains(d.Reason, tt.want) {
				t.Fatalf("got %v, want a denial saying %q", err, tt.want)
			}
		})
	}
	// The socket volume is the trainers' to mount: still admitted.
	p := pod(nil, map[string]string{AnnotationRank: "0", AnnotationPods: "1"})
	p.Spec.Containers[0].VolumeMounts = mount(SocketVolume)
	if _, err := Inject(Input{Pod: p, Dataset: dataset(), Images: ImagePolicy{Default: "shardfeed:v1"}, MaxShardBytes: 512 << 20}); err != nil {
		t.Fatalf("a trainer mounting the socket volume: %v", err)
	}
}

// A tokenizer from a ConfigMap: each ConfigMap the dataset's
// tokenizations name is mounted once, read-only, into the sidecar alone,
// where its --configmaps-dir default reads it.
func TestInjectMountsTheTokenizersConfigMapsIntoTheSidecarOnly(t *testing.T) {
	ds := dataset()
	tok := func(name string) *datav1alpha1.Tokenize {
		return &datav1alpha1.Tokenize{Column: "text", Tokenizer: datav1alpha1.TokenizerFile{SHA256: strings.Repeat("0", 64),
			ConfigMapRef: &datav1alpha1.ConfigMapKey{Name: name, Key: "tokenizer.json.gz"}}}
	}
	ds.Spec.Tokenize = tok("llama")
	ds.Spec.Streams[0].Tokenize = tok("llama")
	ds.Spec.Streams[1].Tokenize = tok("qwen")
	in := Input{Pod: pod(map[string]string{LabelDataset: "web"}, map[string]string{jobkind.JobCompletionIndex: "0"}), Dataset: ds,
		Owner: Owner{Kind: "Job", Name: "train", UID: "u1", Replicas: 2}, Images: ImagePolicy{Default: "shardfeed:v1"}, MaxShardBytes: 1 << 30}
	got, err := Inject(in)
	if err != nil {
		t.Fatal(err)
	}
	byVolume := map[string]string{} // volume → its ConfigMap
	for _, v := range got.Spec.Volumes {
		if v.ConfigMap != nil && strings.HasPrefix(v.Name, "shardfeed-cm-") {
			byVolume[v.Name] = v.ConfigMap.Name
		}
	}
	if len(byVolume) != 2 {
		t.Fatalf("ConfigMap volumes %v, want one for llama and one for qwen", byVolume)
	}
	mounted := map[string]bool{}
	for _, m := range got.Spec.InitContainers[0].VolumeMounts {
		if cm, ok := byVolume[m.Name]; ok {
			if !m.ReadOnly || m.MountPath != sidecarconfig.ConfigMapsDir+"/"+cm {
				t.Fatalf("mount %+v of ConfigMap %s", m, cm)
			}
			mounted[cm] = true
		}
	}
	if !mounted["llama"] || !mounted["qwen"] {
		t.Fatalf("the sidecar mounts %v", mounted)
	}
	for _, c := range append(got.Spec.Containers, got.Spec.InitContainers[1:]...) {
		for _, m := range c.VolumeMounts {
			if _, ok := byVolume[m.Name]; ok {
				t.Fatalf("container %s mounts the tokenizer's ConfigMap", c.Name)
			}
		}
	}
}

// With the chart's node cache, the sidecar alone mounts a pod-bound token
// for the agent's audience, and is told the agent's URL and address; no
// hostPath. Without it, nothing of the agent is injected.
func TestInjectGivesTheSidecarAloneTheNodeAgent(t *testing.T) {
	agent := NodeAgent{URL: "https://shardfeed-node-agent.shardfeed-system.svc:9466", Addr: "198.19.0.9:9466"}
	in := func(a NodeAgent, p *corev1.Pod) Input {
		return Input{Pod: p, Dataset: dataset(), Owner: Owner{Kind: "Job", Name: "train", UID: "u1", Replicas: 2},
			Images: ImagePolicy{Default: "shardfeed:v1"}, MaxShardBytes: 1 << 30, NodeAgent: a}
	}
	trainer := func() *corev1.Pod {
		return pod(map[string]string{LabelDataset: "web"}, map[string]string{jobkind.JobCompletionIndex: "0"})
	}
	got, err := Inject(in(agent, trainer()))
	if err != nil {
		t.Fatal(err)
	}
	vols := map[string]corev1.Volume{}
	for _, v := range got.Spec.Volumes {
		vols[v.Name] = v
		if v.HostPath != nil {
			t.Errorf("volume %s is a hostPath", v.Name)
		}
	}
	tok := vols[NodeAgentTokenVolume].Projected
	if tok == nil || len(tok.Sources) != 1 || tok.Sources[0].ServiceAccountToken == nil || tok.Sources[0].ServiceAccountToken.Audience != sidecarconfig.NodeAgentAudience {
		t.Fatalf("the agent's token: %+v", vols[NodeAgentTokenVolume])
	}
	side := got.Spec.InitContainers[0]
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range side.VolumeMounts {
		mounts[m.Name] = m
	}
	if m := mounts[NodeAgentTokenVolume]; !m.ReadOnly || m.MountPath != sidecarconfig.NodeAgentTokenDir {
		t.Errorf("the sidecar mounts the agent's token as %+v", m)
	}
	if !slices.Contains(side.Env, corev1.EnvVar{Name: sidecarconfig.EnvNodeAgent, Value: agent.URL}) ||
		!slices.Contains(side.Env, corev1.EnvVar{Name: sidecarconfig.EnvNodeAgentAddr, Value: agent.Addr}) {
		t.Errorf("the sidecar is not told the agent: %v", side.Env)
	}
	for _, c := range got.Spec.Containers {
		for _, m := range c.VolumeMounts {
			if m.Name == NodeAgentTokenVolume {
				t.Errorf("container %s mounts %s", c.Name, m.Name)
			}
		}
	}

	plain, err := Inject(in(NodeAgent{}, trainer()))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range plain.Spec.Volumes {
		if v.Name == NodeAgentTokenVolume {
			t.Errorf("without the node cache, %s is injected", v.Name)
		}
	}

	// A training container may not take the sidecar's token for the agent.
	thief := trainer()
	thief.Spec.Volumes = append(thief.Spec.Volumes, corev1.Volume{Name: NodeAgentTokenVolume})
	if _, err := Inject(in(agent, thief)); err == nil || !strings.Contains(err.Error(), NodeAgentTokenVolume) {
		t.Errorf("a pod declaring the agent's token volume: %v", err)
	}
}

func TestReservationIsMadeOnceWithTheImageThePodsWillRun(t *testing.T) {
	images := ImagePolicy{Default: "shardfeed:v1", Allowed: []string{"registry.example/team/sidecar:*"}}
	tests := []struct {
		name      string
		image     string
		inits     []corev1.Container
		wantImage string
	}{
		{"the default image", "", nil, "shardfeed:v1"},
		{"the dataset's allowed image", "registry.example/team/sidecar:v2", nil, "registry.example/team/sidecar:v2"},
		{"an image the policy refuses: the default (the pods are refused)", "evil.example/sidecar", nil, "shardfeed:v1"},
		{"a template with the sidecar: none", "", []corev1.Container{{Name: SidecarName, Image: "x"}}, ""},
		{"a template with a reservation: none", "", []corev1.Container{{Name: SidecarName, Image: "x", Command: ReservedCommand}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := dataset()
			ds.Spec.Sidecar.Image = tt.image
			tmpl := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{InitContainers: tt.inits, Containers: []corev1.Container{{Name: "trainer", Image: "pytorch"}}}}
			r := Reservation(tmpl, ds, images, corev1.ResourceRequirements{})
			switch {
			case tt.wantImage == "" && r != nil:
				t.Errorf("reservation %+v, want none", r)
			case tt.wantImage != "" && (r == nil || r.Image != tt.wantImage || !IsReservation(r) || ptr.Deref(r.RestartPolicy, "") != corev1.ContainerRestartPolicyAlways):
				t.Errorf("reservation %+v, want a native sidecar of image %s running %v", r, tt.wantImage, ReservedCommand)
			}
		})
	}
}

// The sidecar is told the platform's endpoint policy, which it checks
// every request and every address it connects to against; a manager that
// checks nothing tells it nothing.
func TestInjectTellsTheSidecarThePlatformsEndpoints(t *testing.T) {
	in := Input{Pod: pod(map[string]string{LabelDataset: "web"}, map[string]string{jobkind.JobCompletionIndex: "0"}), Dataset: dataset(),
		Owner: Owner{Kind: "Job", Name: "train", UID: "u1", Replicas: 2}, Images: ImagePolicy{Default: "shardfeed:v1"}, MaxShardBytes: 1 << 30,
		AllowedEndpoints: []string{"minio.storage:9000", "10.0.0.0/8"}, AllowCloudEndpoints: true}
	got, err := Inject(in)
	if err != nil {
		t.Fatal(err)
	}
	env := got.Spec.InitContainers[0].Env
	for _, want := range []corev1.EnvVar{{Name: sidecarconfig.EnvAllowedEndpoints, Value: "minio.storage:9000,10.0.0.0/8"},
		{Name: sidecarconfig.EnvAllowCloudEndpoints, Value: "true"}} {
		if !slices.Contains(env, want) {
			t.Errorf("the sidecar is not told %s=%s: %v", want.Name, want.Value, env)
		}
	}
	in.Pod = pod(map[string]string{LabelDataset: "web"}, map[string]string{jobkind.JobCompletionIndex: "0"})
	in.AllowedEndpoints, in.AllowCloudEndpoints = nil, false
	if got, err = Inject(in); err != nil {
		t.Fatal(err)
	}
	for _, e := range got.Spec.InitContainers[0].Env {
		if e.Name == sidecarconfig.EnvAllowedEndpoints || e.Name == sidecarconfig.EnvAllowCloudEndpoints {
			t.Errorf("a manager that checks nothing told the sidecar %s=%q", e.Name, e.Value)
		}
	}
}

// A private registry: the sidecar's image is pulled with the platform's
// Secrets, added once each after the pod's own.
func TestInjectGivesThePodTheSidecarImagesPullSecrets(t *testing.T) {
	tests := []struct {
		name   string
		pod    []corev1.LocalObjectReference
		policy []string
		want   string
	}{
		{"none", nil, nil, "[]"},
		{"the platform's", nil, []string{"sidecar-pull", "mirror"}, "[{sidecar-pull} {mirror}]"},
		{"after the pod's own, once", []corev1.LocalObjectReference{{Name: "team"}, {Name: "mirror"}}, []string{"sidecar-pull", "mirror"}, "[{team} {mirror} {sidecar-pull}]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pod(map[string]string{jobkind.JobCompletionIndex: "0"}, map[string]string{jobkind.JobCompletionIndex: "0"})
			p.Spec.ImagePullSecrets = tt.pod
			out, err := Inject(Input{Pod: p, Dataset: dataset(), Owner: Owner{Kind: "Job", Name: "train", UID: "u", Replicas: 2},
				Images: ImagePolicy{Default: "ghcr.io/shardfeed/shardfeed:1", PullSecrets: tt.policy}})
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(out.Spec.ImagePullSecrets); got != tt.want {
				t.Errorf("imagePullSecrets %s, want %s", got, tt.want)
			}
			if len(tt.pod) > 0 && fmt.Sprint(p.Spec.ImagePullSecrets) != fmt.Sprint(tt.pod) {
				t.Error("Inject changed its input pod")
			}
		})
	}
}

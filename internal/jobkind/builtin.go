package jobkind

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The labels, annotations and variables the built-in kinds' ranks come
// from.
const (
	// An Indexed Job's pod index; a StatefulSet's.
	JobCompletionIndex = "batch.kubernetes.io/job-completion-index"
	PodIndexLabel      = "apps.kubernetes.io/pod-index"

	// JobSet's labels on its pods (jobset.x-k8s.io/v1alpha2).
	JobSetName           = "jobset.sigs.k8s.io/jobset-name"
	JobSetUID            = "jobset.sigs.k8s.io/jobset-uid"
	JobSetJobIndex       = "jobset.sigs.k8s.io/job-index"
	JobSetJobGlobalIndex = "jobset.sigs.k8s.io/job-global-index"
	JobSetReplicas       = "jobset.sigs.k8s.io/replicatedjob-replicas"
	JobSetGlobalReplicas = "jobset.sigs.k8s.io/global-replicas"
	JobSetRestartAttempt = "jobset.sigs.k8s.io/restart-attempt"

	// What Kubeflow Trainer v2's torch runtime sets on a TrainJob's node
	// containers (trainer.kubeflow.org/v1alpha1): the node count, the
	// processes torchrun starts in each, and the node's rank (the Job's
	// completion index, through the downward API).
	TrainerNumNodes       = "PET_NNODES"
	TrainerNumProcPerNode = "PET_NPROC_PER_NODE"
	TrainerNodeRank       = "PET_NODE_RANK"

	// Kubeflow's labels on a PyTorchJob's pods (kubeflow.org/v1).
	KubeflowReplicaType  = "training.kubeflow.org/replica-type"
	KubeflowReplicaIndex = "training.kubeflow.org/replica-index"

	// The annotations by which a pod states its rank, its job's pod count
	// and its processes, overriding any kind's wiring.
	AnnotationRank        = "shardfeed.io/rank"
	AnnotationPods        = "shardfeed.io/pods"
	AnnotationProcsPerPod = "shardfeed.io/procs-per-pod"
)

// builtins are the rows of the kinds shardfeed wires out of the box, in
// the order their ranks are looked for: a TrainJob's node is a JobSet's
// pod, and a JobSet's an Indexed Job's.
func builtins() []*Kind {
	return []*Kind{{
		Group: "trainer.kubeflow.org", Version: "v1alpha1", Kind: "TrainJob", Resource: "trainjobs",
		LabelAt: "node Job, through runtimePatches",
		Rank:    trainJobRank, Procs: trainJobProcs,
	}, {
		Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: "JobSet", Resource: "jobsets",
		Templates: []Path{"spec.replicatedJobs[].template.spec.template"},
		Queued:    true, LabelAt: "replicated Jobs' pod templates",
		Rank: jobSetRank,
	}, {
		Group: "kubeflow.org", Version: "v1", Kind: "PyTorchJob", Resource: "pytorchjobs",
		Templates: []Path{"spec.pytorchReplicaSpecs.*.template"},
		Replicas: []Replicas{
			{Path: "spec.pytorchReplicaSpecs.Master.replicas", Default: 1, Leading: true},
			{Path: "spec.pytorchReplicaSpecs.Worker.replicas", Default: 1},
		},
		Owns: true, Queued: true, LabelAt: "replicas' template.metadata.labels",
		Rank: pyTorchJobRank,
	}, {
		Group: "batch", Version: "v1", Kind: "Job", Resource: "jobs",
		Templates: []Path{"spec.template"},
		Replicas:  []Replicas{{Path: "spec.completions"}},
		Owns:      true, Queued: true, LabelAt: "spec.template.metadata.labels",
		Rank: indexedJobRank,
	}, {
		Group: "apps", Version: "v1", Kind: "StatefulSet", Resource: "statefulsets",
		Templates: []Path{"spec.template"},
		Replicas:  []Replicas{{Path: "spec.replicas"}},
		Owns:      true, LabelAt: "spec.template.metadata.labels",
		Rank: statefulSetRank,
	}}
}

// indexedJobRank: an Indexed Job's completion index, through the
// downward API, of its completions.
func indexedJobRank(pod *corev1.Pod, owner Owner, pods int) (Placement, bool, error) {
	if pod.Annotations[JobCompletionIndex] == "" && pod.Labels[JobCompletionIndex] == "" {
		return Placement{}, false, nil
	}
	if pods == 0 && owner.Kind == "Job" {
		pods = owner.Replicas
	}
	return Placement{RankField: "metadata.annotations['" + JobCompletionIndex + "']", Pods: pods}, true, nil
}

// statefulSetRank: a StatefulSet's pod index of its replicas.
func statefulSetRank(pod *corev1.Pod, owner Owner, pods int) (Placement, bool, error) {
	if pod.Labels[PodIndexLabel] == "" {
		return Placement{}, false, nil
	}
	if pods == 0 && owner.Kind == "StatefulSet" {
		pods = owner.Replicas
	}
	return Placement{RankField: "metadata.labels['" + PodIndexLabel + "']", Pods: pods}, true, nil
}

// jobSetRank: a JobSet's pod is job index × pods per Job + completion
// index, computed here (the downward API cannot multiply). Jobs are
// numbered across the JobSet (job-global-index; job-index with one
// replicated Job) and each has the owning Job's completions pods.
// Replicated Jobs of different sizes need the shardfeed.io annotations.
func jobSetRank(pod *corev1.Pod, owner Owner, pods int) (Placement, bool, error) {
	a, l := pod.Annotations, pod.Labels
	if l[JobSetName] == "" {
		return Placement{}, false, nil
	}
	index := func(keys ...string) (int, string, bool) {
		for _, k := range keys {
			for _, m := range []map[string]string{l, a} {
				if v, ok := m[k]; ok {
					n, err := strconv.Atoi(v)
					return n, k + "=" + v, err == nil && n >= 0
				}
			}
		}
		return 0, "", false
	}
	job, jobKey, ok := index(JobSetJobGlobalIndex, JobSetJobIndex)
	if !ok {
		return Placement{}, true, refuse("JobSet pod without a valid %s or %s label (%s): set the annotations %s and %s", JobSetJobGlobalIndex, JobSetJobIndex, jobKey, AnnotationRank, AnnotationPods)
	}
	jobs, jobsKey, ok := index(JobSetGlobalReplicas, JobSetReplicas)
	if !ok || jobs < 1 {
		return Placement{}, true, refuse("JobSet pod without a valid %s or %s label (%s): set the annotations %s and %s", JobSetGlobalReplicas, JobSetReplicas, jobsKey, AnnotationRank, AnnotationPods)
	}
	completion, key, ok := index(JobCompletionIndex)
	if !ok {
		return Placement{}, true, refuse("JobSet pod without a valid %s (%s): use completionMode Indexed in the replicated Job, or set the annotations %s and %s", JobCompletionIndex, key, AnnotationRank, AnnotationPods)
	}
	if owner.Kind != "Job" || owner.Replicas < 1 {
		return Placement{}, true, refuse("cannot tell how many pods each Job of the JobSet has (the pod's Job has no completions): set the annotations %s and %s", AnnotationRank, AnnotationPods)
	}
	per := owner.Replicas
	if jobs > MaxPods/per {
		return Placement{}, true, refuse("JobSet pod with %s: %d Jobs of %d pods are more than %d pods", jobsKey, jobs, per, MaxPods)
	}
	if job >= jobs || completion >= per {
		return Placement{}, true, refuse("JobSet pod with %s and %s=%d outside %d Jobs of %d pods", jobKey, JobCompletionIndex, completion, jobs, per)
	}
	if pods == 0 {
		pods = jobs * per
	}
	return Placement{Rank: job*per + completion, Pods: pods}, true, nil
}

// trainJobWiring is what Kubeflow Trainer v2 told a TrainJob's node.
type trainJobWiring struct{ nodes, procs, rank int }

// trainJobRank: a TrainJob's node is its Job's completion index of the
// nodes Kubeflow Trainer gives torchrun (the JobSet's other Jobs, the
// initializers, are no ranks).
func trainJobRank(pod *corev1.Pod, owner Owner, pods int) (Placement, bool, error) {
	w, err := trainJobNode(pod)
	if w == nil || err != nil {
		return Placement{}, err != nil, err
	}
	if w.nodes != owner.Replicas && owner.Kind == "Job" {
		return Placement{}, true, refuse("TrainJob pod with %s=%d, but its Job has %d completions: set the annotations %s and %s", TrainerNumNodes, w.nodes, owner.Replicas, AnnotationRank, AnnotationPods)
	}
	if pods == 0 {
		pods = w.nodes
	}
	if w.rank >= pods {
		return Placement{}, true, refuse("TrainJob pod with %s=%d outside its %d nodes", JobCompletionIndex, w.rank, pods)
	}
	return Placement{Rank: w.rank, Pods: pods}, true, nil
}

func trainJobProcs(pod *corev1.Pod) (int, bool, error) {
	w, err := trainJobNode(pod)
	if w == nil || err != nil {
		return 0, err != nil, err
	}
	return w.procs, true, nil
}

// trainJobNode reads the rank wiring Kubeflow Trainer v2's torch runtime
// gives a TrainJob's node pod (a JobSet's pod whose container has
// PET_NNODES and PET_NODE_RANK from the completion index); nil for any
// other pod. PET_NPROC_PER_NODE is the processes torchrun starts: a
// number, or "auto" (Trainer leaves it so only for GPU nodes: torchrun
// then starts one per GPU, the container's GPU limit).
func trainJobNode(pod *corev1.Pod) (*trainJobWiring, error) {
	if pod.Labels[JobSetName] == "" {
		return nil, nil
	}
	for _, c := range pod.Spec.Containers {
		nodes, rank := envOf(c, TrainerNumNodes), envOf(c, TrainerNodeRank)
		if nodes == nil || rank == nil || rank.ValueFrom == nil || rank.ValueFrom.FieldRef == nil ||
			rank.ValueFrom.FieldRef.FieldPath != "metadata.annotations['"+JobCompletionIndex+"']" {
			continue
		}
		w := &trainJobWiring{}
		var err error
		if w.nodes, err = strconv.Atoi(nodes.Value); err != nil || w.nodes < 1 {
			return nil, refuse("TrainJob container %q with %s=%q: expected a positive node count; or set the annotations %s and %s", c.Name, TrainerNumNodes, nodes.Value, AnnotationRank, AnnotationPods)
		}
		v, ok := pod.Annotations[JobCompletionIndex]
		if !ok {
			v = pod.Labels[JobCompletionIndex]
		}
		if w.rank, err = strconv.Atoi(v); err != nil || w.rank < 0 {
			return nil, refuse("TrainJob pod without a valid %s (%q): set the annotations %s and %s", JobCompletionIndex, v, AnnotationRank, AnnotationPods)
		}
		w.procs = 1
		if p := envOf(c, TrainerNumProcPerNode); p != nil {
			if w.procs, err = strconv.Atoi(p.Value); err != nil || w.procs < 1 {
				w.procs = gpus(c)
			}
			if w.procs < 1 {
				return nil, refuse("TrainJob container %q with %s=%q and no GPU limit: cannot tell how many processes torchrun starts; set the annotation %s", c.Name, TrainerNumProcPerNode, p.Value, AnnotationProcsPerPod)
			}
		}
		return w, nil
	}
	return nil, nil
}

// envOf is the container's variable name, nil if it has none.
func envOf(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

// gpus is the container's GPU limit (any vendor's "<vendor>/gpu"): the
// processes torchrun's nproc_per_node=auto starts on a GPU node.
func gpus(c corev1.Container) int {
	n := int64(0)
	for name, q := range c.Resources.Limits {
		if strings.HasSuffix(string(name), "/gpu") {
			n += q.Value()
		}
	}
	return int(n)
}

// pyTorchJobRank: the masters first (rank = master index), then the
// workers (rank = masters + worker index), as torch.distributed numbers
// them.
func pyTorchJobRank(pod *corev1.Pod, owner Owner, pods int) (Placement, bool, error) {
	if pod.Labels[KubeflowReplicaType] == "" {
		return Placement{}, false, nil
	}
	typ, v := strings.ToLower(pod.Labels[KubeflowReplicaType]), pod.Labels[KubeflowReplicaIndex]
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 {
		return Placement{}, true, refuse("PyTorchJob pod with %s=%q: expected a non-negative index; or set the annotations %s and %s", KubeflowReplicaIndex, v, AnnotationRank, AnnotationPods)
	}
	if pods == 0 && owner.Kind == "PyTorchJob" {
		pods = owner.Replicas
	}
	switch typ {
	case "master":
		return Placement{Rank: i, Pods: pods}, true, nil
	case "worker":
		masters := owner.Masters
		if owner.Kind != "PyTorchJob" || !owner.Sized {
			masters = 1 // the PyTorchJob was not found: Kubeflow's usual single master
		}
		return Placement{Rank: masters + i, Pods: pods}, true, nil
	}
	return Placement{}, true, refuse("PyTorchJob pod of replica type %q: shardfeed ranks Master and Worker replicas; set the annotations %s and %s for others", typ, AnnotationRank, AnnotationPods)
}

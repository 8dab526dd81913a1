package scenario

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kueue's story: a queued Indexed Job trains until a job of a higher
// priority preempts it; Kueue suspends it (its pods go), admits the other,
// and resumes it once that one is done; it ends exactly once. The queue's
// quota is exactly what the first job's pods ask for, sidecars included:
// had Kueue not counted the sidecars, the second job would have fit beside
// the first and preempted nothing.

const (
	kueueNamespace = "e2e-kueue"
	kueueQueue     = "e2e-kueue"
	// kueuePods is the queued job's pod count.
	kueuePods = 2
)

// KueueReport is what Kueue's story saw.
type KueueReport struct {
	// Lineage of the preempted and resumed job.
	Lineage Lineage
	// Usage is what Kueue counted for the queued job when it admitted it
	// (its Workload's resourceUsage); PodRequests is what its running
	// pods ask for, their sidecars included.
	Usage, PodRequests corev1.ResourceList
	// Evicted is the reason of the queued job's Workload's Evicted
	// condition; Suspended whether its Job was suspended meanwhile.
	Evicted   string
	Suspended bool
	// Attempts are the attempt ids the job's pods were given, before the
	// preemption and after: a suspended Job keeps its UID, so one.
	Attempts []string
}

// RunKueue plays Kueue's story on the local cluster (hack/controllers.sh
// kueue installs it).
func RunKueue(ctx context.Context, o Options) (*KueueReport, error) {
	c, err := NewCluster(o.withDefaults())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.startOn(ctx, "kueue.x-k8s.io/v1beta2", "ClusterQueue"); err != nil {
		return nil, err
	}
	// The manager publishes its CA into every webhook of its configuration
	// (at its start, then each minute: an upgraded chart's new webhooks
	// wait for it).
	if err := WaitFor(ctx, 2*time.Minute, "the manager's CA in every webhook of shardfeed-pod-injection", func() (bool, error) {
		var cfg admissionregistrationv1.MutatingWebhookConfiguration
		if err := c.Client.Get(ctx, client.ObjectKey{Name: "shardfeed-pod-injection"}, &cfg); err != nil {
			return false, err
		}
		for _, w := range cfg.Webhooks {
			if len(w.ClientConfig.CABundle) == 0 {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return nil, err
	}
	rep := &KueueReport{}
	return rep, c.kueueStory(ctx, rep)
}

func (c *Cluster) kueueStory(ctx context.Context, rep *KueueReport) error {
	e, err := c.NewEnv(ctx, kueueNamespace, DatasetOptions{Samples: c.o.Samples, NumSplits: numSplits,
		GlobalBatchSize: globalBatch, BlockSize: 256, CommitEvery: commitEvery, StepTime: c.o.StepTime})
	if err != nil {
		return err
	}
	// The sidecar's requests, as the chart is installed here (50m, 256Mi)
	// plus the hand-off memory (256Mi): the quota holds kueuePods of them.
	cpu := resource.MustParse("50m")
	memory := resource.MustParse("512Mi")
	cpu.Mul(kueuePods)
	memory.Mul(kueuePods)
	c.Step("Kueue: ClusterQueue %s (cpu %s, memory %s: two sidecars' requests), LocalQueue %s, priorities low and high", kueueQueue, cpu.String(), memory.String(), kueueQueue)
	if err := c.applyKueueQueue(ctx, cpu, memory); err != nil {
		return err
	}

	low := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", e.jobName(), kueuePods), Namespace: e.NS, Labels: map[string]string{
			"kueue.x-k8s.io/queue-name": kueueQueue, "kueue.x-k8s.io/priority-class": "e2e-low"}},
		Spec: batchv1.JobSpec{
			Completions: ptr.To(int32(kueuePods)), Parallelism: ptr.To(int32(kueuePods)), CompletionMode: ptr.To(batchv1.IndexedCompletion),
			BackoffLimit: ptr.To(int32(30)),
			Template:     e.trainerPod(kueuePods, "metadata.labels['batch.kubernetes.io/controller-uid']"),
		},
	}
	c.Step("Job %s (%d pods, priority low) queued in %s", low.Name, kueuePods, kueueQueue)
	if err := e.Client.Create(ctx, low); err != nil {
		return fmt.Errorf("creating the queued Job: %w", err)
	}
	if err := e.WaitPodsRunning(ctx, low, kueuePods); err != nil {
		return err
	}
	wl, err := e.workloadOf(ctx, low)
	if err != nil {
		return err
	}
	assignments, _, _ := unstructured.NestedSlice(wl.Object, "status", "admission", "podSetAssignments")
	rep.Usage = corev1.ResourceList{}
	for _, a := range assignments {
		usage, _, _ := unstructured.NestedStringMap(a.(map[string]any), "resourceUsage")
		for name, v := range usage {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return fmt.Errorf("workload %s: resourceUsage %s=%q: %w", wl.GetName(), name, v, err)
			}
			sum := rep.Usage[corev1.ResourceName(name)]
			sum.Add(q)
			rep.Usage[corev1.ResourceName(name)] = sum
		}
	}
	pods, err := e.PodsOf(ctx, low.Name)
	if err != nil {
		return err
	}
	rep.PodRequests = corev1.ResourceList{}
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if a := sidecarEnv(&p)["SHARDFEED_ATTEMPT"]; !slices.Contains(rep.Attempts, a) {
			rep.Attempts = append(rep.Attempts, a)
		}
		for _, ct := range append(append([]corev1.Container{}, p.Spec.Containers...), p.Spec.InitContainers...) {
			for name, q := range ct.Resources.Requests {
				sum := rep.PodRequests[name]
				sum.Add(q)
				rep.PodRequests[name] = sum
			}
		}
	}
	c.Detail("Kueue counts cpu %s, memory %s for the job; its pods ask for cpu %s, memory %s", ptr.To(rep.Usage[corev1.ResourceCPU]),
		ptr.To(rep.Usage[corev1.ResourceMemory]), ptr.To(rep.PodRequests[corev1.ResourceCPU]), ptr.To(rep.PodRequests[corev1.ResourceMemory]))

	at, err := e.WaitCommitted(ctx, 3*commitEvery)
	if err != nil {
		return err
	}
	// The preempting job: one pod asking for one sidecar's requests, which
	// fit only once the queued job is suspended.
	high := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "urgent", Namespace: e.NS, Labels: map[string]string{
			"kueue.x-k8s.io/queue-name": kueueQueue, "kueue.x-k8s.io/priority-class": "e2e-high"}},
		Spec: batchv1.JobSpec{BackoffLimit: ptr.To(int32(0)), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "urgent", Image: OperatorImage, ImagePullPolicy: corev1.PullNever, Command: []string{"/shardfeed", "version"},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
				SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65532)),
					AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
			SecurityContext: &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		}}},
	}
	c.Step("Job urgent (priority high, 50m and 64Mi) queued after the commit of step %d", at)
	if err := e.Client.Create(ctx, high); err != nil {
		return fmt.Errorf("creating the preempting Job: %w", err)
	}
	if err := WaitFor(ctx, 2*time.Minute, "Kueue to preempt "+low.Name, func() (bool, error) {
		wl, err := e.workloadOf(ctx, low)
		if err != nil {
			return false, err
		}
		if cond := workloadCondition(wl, "Evicted"); cond != nil {
			rep.Evicted = fmt.Sprint(cond["reason"])
		}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(low), low); err != nil {
			return false, err
		}
		rep.Suspended = rep.Suspended || ptr.Deref(low.Spec.Suspend, false)
		return rep.Evicted != "" && rep.Suspended, nil
	}); err != nil {
		return err
	}
	c.Detail("%s evicted (%s), its Job suspended", low.Name, rep.Evicted)
	if err := e.WaitJobDone(ctx, high, 3*time.Minute); err != nil {
		return err
	}
	c.Step("Job urgent done; waiting for Kueue to admit %s again", low.Name)
	if err := WaitFor(ctx, 3*time.Minute, "Kueue to resume "+low.Name, func() (bool, error) {
		err := e.Client.Get(ctx, client.ObjectKeyFromObject(low), low)
		return err == nil && !ptr.Deref(low.Spec.Suspend, false), err
	}); err != nil {
		return err
	}
	resumed, err := e.waitRunning(ctx, client.MatchingLabels{"job-name": low.Name}, kueuePods, "Job "+low.Name)
	if err != nil {
		return err
	}
	for _, p := range resumed {
		if a := sidecarEnv(&p)["SHARDFEED_ATTEMPT"]; !slices.Contains(rep.Attempts, a) {
			rep.Attempts = append(rep.Attempts, a)
		}
	}
	if rep.Lineage, err = e.LineageOf(ctx, low, 10*time.Minute); err != nil {
		return err
	}
	c.Detail("Kueue: %s", rep.Lineage.Summary())
	return nil
}

// applyKueueQueue applies the story's Kueue objects as a platform team
// does (kubectl apply): a ResourceFlavor, a ClusterQueue of the given
// quota for the story's namespace that preempts lower priorities, its
// LocalQueue, and the two WorkloadPriorityClasses.
func (c *Cluster) applyKueueQueue(ctx context.Context, cpu, memory resource.Quantity) error {
	manifest := fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: %[1]s}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: %[1]s}
spec:
  namespaceSelector:
    matchLabels: {kubernetes.io/metadata.name: %[2]s}
  preemption:
    withinClusterQueue: LowerPriority
  resourceGroups:
    - coveredResources: [cpu, memory]
      flavors:
        - name: %[1]s
          resources:
            - {name: cpu, nominalQuota: %[3]s}
            - {name: memory, nominalQuota: %[4]s}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: %[1]s, namespace: %[2]s}
spec: {clusterQueue: %[1]s}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: e2e-low}
value: 100
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: e2e-high}
value: 1000
`, kueueQueue, kueueNamespace, cpu.String(), memory.String())
	path := filepath.Join(c.work, "kueue.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		return err
	}
	_, err := c.Cmd(ctx, "kubectl", "apply", "--server-side", "--field-manager", "shardfeed-e2e", "--force-conflicts", "-f", path)
	return err
}

// workloadOf is the Kueue Workload of job.
func (e *Env) workloadOf(ctx context.Context, job *batchv1.Job) (*unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion("kueue.x-k8s.io/v1beta2")
	list.SetKind("WorkloadList")
	if err := e.Client.List(ctx, list, client.InNamespace(e.NS)); err != nil {
		return nil, err
	}
	for i := range list.Items {
		for _, o := range list.Items[i].GetOwnerReferences() {
			if o.UID == job.UID {
				return &list.Items[i], nil
			}
		}
	}
	return nil, fmt.Errorf("no Kueue Workload owned by Job %s", job.Name)
}

// workloadCondition is a Workload's condition of the type, if true.
func workloadCondition(wl *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ && m["status"] == "True" {
			return m
		}
	}
	return nil
}

package scenario

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shardfeed/shardfeed/internal/inject"
	"github.com/shardfeed/shardfeed/internal/jobkind"
)

// The training controllers' stories (hack/controllers.sh installs them):
// a job of each kind trains on a TrainingDataset through a deleted pod and
// ends exactly once against `shardfeed plan --ids`.

const (
	trainJobNamespace = "e2e-trainjob"
	jobSetNamespace   = "e2e-jobset"
	pyTorchNamespace  = "e2e-pytorchjob"
)

// ControllersReport is what the controllers' stories saw.
type ControllersReport struct {
	// TrainJob is the lineage of a Kubeflow Trainer v2 TrainJob;
	// TrainJobWiring the rank wiring its node pods' sidecars were given.
	TrainJob       Lineage
	TrainJobWiring []string
	// JobSet is the lineage of a JobSet of 2 Jobs of 2 pods rescaled to 1
	// Job; JobSetWiring its first pods' wiring.
	JobSet       Lineage
	JobSetWiring []string
	// PyTorchJob is the lineage of a training operator PyTorchJob (a
	// master and 3 workers); PyTorchJobWiring its pods' wiring.
	PyTorchJob       Lineage
	PyTorchJobWiring []string
}

// RunControllers plays the controllers' stories on the local cluster.
func RunControllers(ctx context.Context, o Options) (*ControllersReport, error) {
	c, err := NewCluster(o.withDefaults())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.startOn(ctx, "trainer.kubeflow.org/v1alpha1", "TrainJob"); err != nil {
		return nil, err
	}
	rep := &ControllersReport{}
	if err := c.jobSetStory(ctx, rep); err != nil {
		return rep, err
	}
	if err := c.trainJobStory(ctx, rep); err != nil {
		return rep, err
	}
	return rep, c.pyTorchJobStory(ctx, rep)
}

// jobSetStory: a JobSet of 2 replicated Jobs of 2 pods (4 ranks: a pod's
// rank is its Job's index × 2 + its completion index, which the webhook
// computes and the trainers take from their sidecars), the pod of rank 3
// deleted mid-epoch, then rescaled as a user does: the JobSet deleted and
// one of 1 Job of 2 pods created under the same shardfeed.io/job.
func (c *Cluster) jobSetStory(ctx context.Context, rep *ControllersReport) error {
	e, err := c.NewEnv(ctx, jobSetNamespace, DatasetOptions{Samples: c.o.Samples, NumSplits: numSplits,
		GlobalBatchSize: globalBatch, BlockSize: 256, CommitEvery: commitEvery, StepTime: c.o.StepTime})
	if err != nil {
		return err
	}
	c.Step("JobSet %s-4: 2 replicated Jobs of 2 pods", e.jobName())
	first, err := e.startJobSet(ctx, 2, 2)
	if err != nil {
		return err
	}
	pods, err := e.waitRunning(ctx, client.MatchingLabels{jobkind.JobSetName: first.GetName()}, 4, "JobSet "+first.GetName())
	if err != nil {
		return err
	}
	for _, p := range pods {
		rep.JobSetWiring = append(rep.JobSetWiring, fmt.Sprintf("job %s index %s: %s", p.Labels[jobkind.JobSetJobIndex],
			p.Annotations[jobkind.JobCompletionIndex], wiringOf(&p)))
	}
	c.Detail("pods wired as %v", rep.JobSetWiring)
	at, err := e.WaitCommitted(ctx, 3*commitEvery)
	if err != nil {
		return err
	}
	c.Step("Deleting the pod of Job 1, index 1 (rank 3) after the commit of step %d", at)
	for _, p := range pods {
		if p.Labels[jobkind.JobSetJobIndex] == "1" && p.Annotations[jobkind.JobCompletionIndex] == "1" {
			if err := e.Client.Delete(ctx, &p, client.GracePeriodSeconds(0)); err != nil {
				return err
			}
		}
	}
	if at, err = e.WaitCommitted(ctx, at+3*commitEvery); err != nil {
		return err
	}
	c.Step("Rescaling after the commit of step %d: JobSet %s deleted, %s-2 (1 Job of 2 pods) created", at, first.GetName(), e.jobName())
	if err := e.Client.Delete(ctx, first, client.PropagationPolicy("Foreground")); err != nil {
		return err
	}
	if err := WaitFor(ctx, 2*time.Minute, "the pods of "+first.GetName()+" to go", func() (bool, error) {
		pods, err := e.jobSetPods(ctx, first.GetName())
		return err == nil && len(pods) == 0, err
	}); err != nil {
		return err
	}
	second, err := e.startJobSet(ctx, 1, 2)
	if err != nil {
		return err
	}
	if err := waitCondition(ctx, e.Client, second, "Completed", "Failed"); err != nil {
		return err
	}
	st, err := e.State(ctx)
	if err != nil {
		return err
	}
	if rep.JobSet, err = e.CheckLineage(ctx, st); err != nil {
		return err
	}
	c.Detail("JobSet: %s", rep.JobSet.Summary())
	return nil
}

// startJobSet creates JobSet <job>-<jobs×pods>: jobs replicated Jobs of
// pods pods each, running the e2e trainer with its rank from its sidecar.
func (e *Env) startJobSet(ctx context.Context, jobs, pods int) (*unstructured.Unstructured, error) {
	tmpl := e.trainerPod(jobs*pods, "metadata.labels['"+jobkind.JobSetUID+"']", corev1.EnvVar{Name: "E2E_RANK_FROM", Value: "sidecar"})
	pod, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&tmpl)
	if err != nil {
		return nil, err
	}
	js := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
		"metadata": map[string]any{"name": fmt.Sprintf("%s-%d", e.jobName(), jobs*pods), "namespace": e.NS},
		"spec": map[string]any{"replicatedJobs": []any{map[string]any{
			"name": "workers", "replicas": int64(jobs),
			"template": map[string]any{"spec": map[string]any{
				"parallelism": int64(pods), "completions": int64(pods), "completionMode": "Indexed", "backoffLimit": int64(30),
				"template": pod,
			}},
		}}},
	}}
	return js, e.Client.Create(ctx, js)
}

// jobSetPods are the pods of a JobSet.
func (e *Env) jobSetPods(ctx context.Context, name string) ([]corev1.Pod, error) {
	var list corev1.PodList
	err := e.Client.List(ctx, &list, client.InNamespace(e.NS), client.MatchingLabels{jobkind.JobSetName: name})
	return list.Items, err
}

// waitRunning waits until n pods of the selector run, and returns them.
func (e *Env) waitRunning(ctx context.Context, selector client.MatchingLabels, n int, what string) ([]corev1.Pod, error) {
	var running []corev1.Pod
	err := WaitFor(ctx, 3*time.Minute, fmt.Sprintf("%d running pods of %s", n, what), func() (bool, error) {
		var list corev1.PodList
		err := e.Client.List(ctx, &list, client.InNamespace(e.NS), selector)
		running = running[:0]
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running = append(running, p)
			}
		}
		return len(running) >= n, err
	})
	return running, err
}

// waitCondition waits (10 min at most) until obj has condition done, and
// fails at once when it has condition failed (a terminal state WaitFor
// would poll on).
func waitCondition(ctx context.Context, cl client.Client, obj *unstructured.Unstructured, done, failed string) error {
	var terminal error
	err := WaitFor(ctx, 10*time.Minute, fmt.Sprintf("%s %s to be %s", obj.GetKind(), obj.GetName(), done), func() (bool, error) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["status"] != "True" {
				continue
			}
			switch m["type"] {
			case done:
				return true, nil
			case failed:
				terminal = fmt.Errorf("%s %s is %s: %v", obj.GetKind(), obj.GetName(), failed, m["message"])
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	return terminal
}

// trainJobStory: a TrainJob of 2 nodes on the torch-distributed runtime
// Kubeflow Trainer installs, its node pods labelled through runtimePatches
// (its initializers' Jobs, none here, would not be); node 1's pod deleted
// mid-epoch (its Job makes another, as for any Indexed Job).
func (c *Cluster) trainJobStory(ctx context.Context, rep *ControllersReport) error {
	const nodes = 2
	e, err := c.NewEnv(ctx, trainJobNamespace, DatasetOptions{Samples: c.o.Samples, NumSplits: numSplits,
		GlobalBatchSize: globalBatch, BlockSize: 256, CommitEvery: commitEvery, StepTime: c.o.StepTime})
	if err != nil {
		return err
	}
	c.Step("TrainJob %s: %d nodes on ClusterTrainingRuntime torch-distributed, the e2e trainer as its image", e.jobName(), nodes)
	if err := e.Client.Create(ctx, e.trainJob(nodes)); err != nil {
		return fmt.Errorf("creating the TrainJob: %w", err)
	}
	// Trainer makes a JobSet of the TrainJob's name; its node Job is
	// <name>-node-0.
	job := &batchv1.Job{}
	if err := WaitFor(ctx, 2*time.Minute, "the TrainJob's node Job", func() (bool, error) {
		err := e.Client.Get(ctx, client.ObjectKey{Namespace: e.NS, Name: e.jobName() + "-node-0"}, job)
		return err == nil, client.IgnoreNotFound(err)
	}); err != nil {
		return err
	}
	if err := e.WaitPodsRunning(ctx, job, nodes); err != nil {
		return err
	}
	pods, err := e.PodsOf(ctx, job.Name)
	if err != nil {
		return err
	}
	for _, p := range pods {
		rep.TrainJobWiring = append(rep.TrainJobWiring, wiringOf(&p))
	}
	c.Detail("node pods wired as %v", rep.TrainJobWiring)
	at, err := e.WaitCommitted(ctx, 3*commitEvery)
	if err != nil {
		return err
	}
	c.Step("Deleting node 1's pod after the commit of step %d", at)
	if err := e.DeletePod(ctx, job, 1); err != nil {
		return err
	}
	if err := e.WaitJobDone(ctx, job, 10*time.Minute); err != nil {
		return err
	}
	st, err := e.State(ctx)
	if err != nil {
		return err
	}
	if rep.TrainJob, err = e.CheckLineage(ctx, st); err != nil {
		return err
	}
	c.Detail("TrainJob: %s", rep.TrainJob.Summary())
	return nil
}

// trainJob is a TrainJob running the e2e trainer on nodes nodes, its node
// pods labelled for the dataset and given the trainers' directory.
func (e *Env) trainJob(nodes int) *unstructured.Unstructured {
	env := []any{
		map[string]any{"name": "E2E_WORLD", "value": strconv.Itoa(nodes)},
		map[string]any{"name": "E2E_DIR", "value": path.Join("/e2e", e.sub)},
		map[string]any{"name": "E2E_STEP_MS", "value": strconv.Itoa(int(e.ds.StepTime / time.Millisecond))},
		map[string]any{"name": "E2E_COMMIT_EVERY", "value": strconv.Itoa(e.ds.CommitEvery)},
		map[string]any{"name": "E2E_ATTEMPT", "valueFrom": map[string]any{"fieldRef": map[string]any{
			"fieldPath": "metadata.labels['batch.kubernetes.io/controller-uid']"}}},
	}
	restricted := map[string]any{"runAsNonRoot": true, "runAsUser": int64(65532), "allowPrivilegeEscalation": false,
		"readOnlyRootFilesystem": true, "capabilities": map[string]any{"drop": []any{"ALL"}}}
	pod := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{inject.LabelDataset: datasetName}},
		"spec": map[string]any{
			"securityContext": map[string]any{"runAsNonRoot": true, "seccompProfile": map[string]any{"type": "RuntimeDefault"}},
			"volumes":         []any{map[string]any{"name": "e2e", "persistentVolumeClaim": map[string]any{"claimName": recordsClaim}}},
			"containers": []any{map[string]any{"name": "node", "securityContext": restricted,
				"volumeMounts": []any{map[string]any{"name": "e2e", "mountPath": "/e2e"}}}},
		},
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
		"metadata": map[string]any{"name": e.jobName(), "namespace": e.NS},
		"spec": map[string]any{
			"runtimeRef": map[string]any{"name": "torch-distributed"},
			"trainer": map[string]any{"numNodes": int64(nodes), "numProcPerNode": int64(1),
				"image": "registry.local/shardfeed-trainer:e2e", "command": []any{"/trainer"}, "env": env},
			"runtimePatches": []any{map[string]any{"manager": "shardfeed.io/e2e", "trainingRuntimeSpec": map[string]any{
				"template": map[string]any{"spec": map[string]any{"replicatedJobs": []any{map[string]any{
					"name": "node", "template": map[string]any{"spec": map[string]any{"template": pod}}}}}}}}},
		},
	}}
}

// pyTorchJobStory: a PyTorchJob of the Kubeflow training operator, a
// master and 3 workers (ranks: the master 0, worker i 1 + i), worker 1's
// pod deleted mid-epoch (the operator makes another).
func (c *Cluster) pyTorchJobStory(ctx context.Context, rep *ControllersReport) error {
	e, err := c.NewEnv(ctx, pyTorchNamespace, DatasetOptions{Samples: c.o.Samples, NumSplits: numSplits,
		GlobalBatchSize: globalBatch, BlockSize: 256, CommitEvery: commitEvery, StepTime: c.o.StepTime})
	if err != nil {
		return err
	}
	c.Step("PyTorchJob %s: a master and 3 workers", e.jobName())
	tmpl := e.trainerPod(4, "metadata.labels['training.kubeflow.org/job-name']", corev1.EnvVar{Name: "E2E_RANK_FROM", Value: "sidecar"})
	tmpl.Spec.Containers[0].Name = "pytorch" // the operator's container
	pod, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&tmpl)
	if err != nil {
		return err
	}
	replica := func(n int64) map[string]any {
		// OnFailure: a replica's pod that fails or goes is made again (with
		// Never, one deleted pod fails the whole job).
		return map[string]any{"replicas": n, "restartPolicy": "OnFailure", "template": pod}
	}
	ptj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
		"metadata": map[string]any{"name": e.jobName(), "namespace": e.NS},
		"spec": map[string]any{"runPolicy": map[string]any{"backoffLimit": int64(30)},
			"pytorchReplicaSpecs": map[string]any{"Master": replica(1), "Worker": replica(3)}},
	}}
	if err := e.Client.Create(ctx, ptj); err != nil {
		return fmt.Errorf("creating the PyTorchJob: %w", err)
	}
	running, err := e.waitRunning(ctx, client.MatchingLabels{"training.kubeflow.org/job-name": e.jobName()}, 4, "PyTorchJob "+e.jobName())
	if err != nil {
		return err
	}
	for _, p := range running {
		rep.PyTorchJobWiring = append(rep.PyTorchJobWiring, fmt.Sprintf("%s %s: %s", p.Labels[jobkind.KubeflowReplicaType],
			p.Labels[jobkind.KubeflowReplicaIndex], wiringOf(&p)))
	}
	c.Detail("pods wired as %v", rep.PyTorchJobWiring)
	at, err := e.WaitCommitted(ctx, 3*commitEvery)
	if err != nil {
		return err
	}
	c.Step("Deleting worker 1's pod after the commit of step %d", at)
	for _, p := range running {
		if p.Labels[jobkind.KubeflowReplicaType] == "worker" && p.Labels[jobkind.KubeflowReplicaIndex] == "1" {
			if err := e.Client.Delete(ctx, &p, client.GracePeriodSeconds(0)); err != nil {
				return err
			}
		}
	}
	if err := waitCondition(ctx, e.Client, ptj, "Succeeded", "Failed"); err != nil {
		return err
	}
	st, err := e.State(ctx)
	if err != nil {
		return err
	}
	if rep.PyTorchJob, err = e.CheckLineage(ctx, st); err != nil {
		return err
	}
	c.Detail("PyTorchJob: %s", rep.PyTorchJob.Summary())
	return nil
}

// wiringOf is the rank wiring a pod's sidecar was given, as
// "rank/pods×procs job attempt".
func wiringOf(p *corev1.Pod) string {
	env := sidecarEnv(p)
	return fmt.Sprintf("%s/%s×%s %s %s", env["SHARDFEED_POD_RANK"], env["SHARDFEED_PODS"], env["SHARDFEED_PROCS_PER_POD"], env["SHARDFEED_JOB"], env["SHARDFEED_ATTEMPT"])
}

// startOn starts a controller's story: once the API server serves its
// kind, MinIO on the node's address and the operator's chart.
func (c *Cluster) startOn(ctx context.Context, apiVersion, kind string) error {
	if err := c.installed(ctx, apiVersion, kind); err != nil {
		return err
	}
	c.Step("Starting MinIO on the node address; the operator's chart")
	if err := c.StartMinIO(ctx); err != nil {
		return err
	}
	return c.InstallOperator(ctx)
}

// sidecarEnv is the literal environment of a pod's sidecar.
func sidecarEnv(p *corev1.Pod) map[string]string {
	env := map[string]string{}
	for _, c := range p.Spec.InitContainers {
		if c.Name == inject.SidecarName {
			for _, v := range c.Env {
				env[v.Name] = v.Value
			}
		}
	}
	return env
}

// installed says whether the API server serves a kind (a controller's CRD).
func (c *Cluster) installed(ctx context.Context, apiVersion, kind string) error {
	u := &unstructured.UnstructuredList{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind + "List")
	if err := c.Client.List(ctx, u, client.Limit(1)); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return fmt.Errorf("%s %s is not served: install the controllers (hack/controllers.sh, make controllers)", apiVersion, kind)
		}
		return err
	}
	return nil
}

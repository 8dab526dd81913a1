package scenario

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/inject"
	"github.com/shardfeed/shardfeed/internal/jobkind"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
)

// e2e story constants: the dataset's shape and the trainers' pace.
const (
	e2eNamespace = "e2e"
	numSplits    = 4
	globalBatch  = 16
	commitEvery  = 5
	// The plan's features at once: a row filter on the Parquet stream (half
	// its rows), stratified batching, and a schedule whose batch size ramps
	// up from 8 to 16 at step 30, which skips the data of 2 steps at step
	// 60 and repeats 2 steps at step 100 (150 steps, within one pass of
	// each stream).
	textFilter = "id % 2 == 0"
	planExtra  = `  batching: stratified
  schedule:
    phases:
    - {startStep: 0, globalBatchSize: 8}
    - {startStep: 30, globalBatchSize: 16}
    - {startStep: 60, skipSteps: 2}
    - {startStep: 100, repeatSteps: 2}
`
)

func (c *Cluster) play(ctx context.Context, rep *Report) error {
	// 1. The operator.
	c.Step("Installing the operator with Helm (image %s)", OperatorImage)
	if err := c.InstallOperator(ctx); err != nil {
		return err
	}
	c.Detail("the manager is ready; it made its own webhook certificate")
	out, err := c.Cmd(ctx, "helm", "test", "shardfeed", "--namespace", operatorNS, "--logs", "--timeout", "120s")
	if err != nil {
		return fmt.Errorf("helm test: %w", err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if (strings.HasPrefix(line, "ok ") || strings.HasPrefix(line, "FAIL ")) && !seen[line] {
			seen[line] = true
			c.Detail("helm test: %s", line)
		}
	}

	// 2. The data.
	c.Step("Starting MinIO on the node address and writing a dataset of two streams (MDS and Parquet), %d samples each", c.o.Samples)
	if err := c.StartMinIO(ctx); err != nil {
		return err
	}

	// 3. The TrainingDataset.
	c.Step("kubectl apply: namespace %s, the MinIO credentials Secret and TrainingDataset %q", e2eNamespace, datasetName)
	e, err := c.NewEnv(ctx, e2eNamespace, DatasetOptions{Samples: c.o.Samples, NumSplits: numSplits, GlobalBatchSize: globalBatch,
		BlockSize: 256, CommitEvery: commitEvery, StepTime: c.o.StepTime, TextFilter: textFilter, Extra: planExtra})
	if err != nil {
		return err
	}
	c.Detail("s3://%s/tokens/ and s3://%s/text/ on %s", e.Bucket, e.Bucket, c.MinIO.URL())
	c.Detail("text filtered by %q (its selection indexed with shardfeed index --filter), stratified batching, a batch size ramping up from 8 to 16 at step 30, the data of 2 steps skipped at step 60, 2 steps repeated at step 100", textFilter)
	ds, err := e.Dataset(ctx)
	if err != nil {
		return err
	}
	rep.Ready = meta.FindStatusCondition(ds.Status.Conditions, "Ready").Message
	rep.Totals = ds.Status.Samples
	table, _ := c.Cmd(ctx, "kubectl", "get", "tds", "-n", e.NS)
	c.Detail("Ready: %s", rep.Ready)
	for _, line := range strings.Split(strings.TrimSpace(table), "\n") {
		c.Detail("%s", line)
	}

	// 3b. The Python-first start's manifest, applied as it is.
	if err := c.pythonFirstManifest(ctx, e); err != nil {
		return err
	}

	// 4. A pod for a dataset that does not exist is refused.
	bad := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "lost", Namespace: e.NS, Labels: map[string]string{inject.LabelDataset: "missing"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.local/shardfeed-trainer:e2e"}}}}
	err = c.Client.Create(ctx, bad)
	if err == nil {
		return errors.New("a pod labelled for a missing dataset was admitted")
	}
	rep.RejectedMissingDataset = err.Error()
	c.Step("A pod labelled for a dataset that does not exist is refused:")
	c.Detail("%s", rep.RejectedMissingDataset)

	// 5. The training job.
	c.Step("Starting Indexed Job %s-%d: %d pods labelled shardfeed.io/dataset=%s", jobName, c.o.Pods, c.o.Pods, datasetName)
	first, err := e.StartJob(ctx, c.o.Pods)
	if err != nil {
		return err
	}
	if err := e.WaitPodsRunning(ctx, first, c.o.Pods); err != nil {
		return err
	}
	if rep.InjectedSpecProblems, rep.SidecarFirst, err = e.CheckInjected(ctx, first); err != nil {
		return err
	}
	c.Detail("every pod has the native sidecar (started before the trainer: %v)", rep.SidecarFirst)

	// 6. A sidecar dies.
	if rep.KilledSidecarAt, err = e.WaitCommitted(ctx, 3*commitEvery); err != nil {
		return err
	}
	c.Step("Killing the sidecar container of %s-%d's pod 1 at committed step %d (the kubelet restarts it)", jobName, c.o.Pods, rep.KilledSidecarAt)
	if rep.SidecarRestarts, err = e.KillSidecar(ctx, first, 1); err != nil {
		return err
	}
	c.Detail("restarted (restart count %d); the trainer reconnected at its step", rep.SidecarRestarts)

	// 7. A pod dies.
	if rep.DeletedPodAt, err = e.WaitCommitted(ctx, rep.KilledSidecarAt+3*commitEvery); err != nil {
		return err
	}
	c.Step("Deleting pod 2 of %s-%d at committed step %d (the Job makes a new one; every rank goes back to the committed step)", jobName, c.o.Pods, rep.DeletedPodAt)
	if err := e.DeletePod(ctx, first, 2); err != nil {
		return err
	}

	// 8. Rescale.
	if rep.RescaledAt, err = e.WaitCommitted(ctx, rep.DeletedPodAt+3*commitEvery); err != nil {
		return err
	}
	c.Step("Rescaling at committed step %d: deleting %s-%d, starting %s-%d with the same shardfeed.io/job", rep.RescaledAt, jobName, c.o.Pods, jobName, c.o.RescaledPods)
	second, err := e.Rescale(ctx, first, c.o.RescaledPods)
	if err != nil {
		return err
	}
	if err := e.WaitJobDone(ctx, second, 10*time.Minute); err != nil {
		return err
	}
	st, err := e.State(ctx)
	if err != nil {
		return err
	}
	c.Step("%s-%d completed: the job committed epoch %d step %d", jobName, c.o.RescaledPods, st.Epoch, st.Step)

	// 9. The verdict.
	c.Step("Checking the committed lineage against `shardfeed plan --ids`")
	if rep.Lineage, err = e.CheckLineage(ctx, st); err != nil {
		return err
	}
	c.Detail("%s", rep.Summary())

	// 10. Clean-up by owner references.
	c.Step("Deleting the TrainingDataset: its plan and job state go with it (the operator made no Role or RoleBinding)")
	var roles rbacv1.RoleList
	var bindings rbacv1.RoleBindingList
	if err := c.Client.List(ctx, &roles, client.InNamespace(e.NS)); err != nil {
		return err
	}
	if err := c.Client.List(ctx, &bindings, client.InNamespace(e.NS)); err != nil {
		return err
	}
	if len(roles.Items)+len(bindings.Items) > 0 {
		return fmt.Errorf("namespace %s holds %d Roles and %d RoleBindings: the operator grants pods nothing", e.NS, len(roles.Items), len(bindings.Items))
	}
	if err := c.Client.Delete(ctx, ds); err != nil {
		return err
	}
	err = WaitFor(ctx, 2*time.Minute, "the dataset's objects to be collected", func() (bool, error) {
		for _, obj := range []client.Object{
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: configmaps.PlanName(datasetName)}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: configmaps.StateName(datasetName, jobName)}},
		} {
			if err := c.Client.Get(ctx, client.ObjectKey{Namespace: e.NS, Name: obj.GetName()}, obj); !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		return true, nil
	})
	rep.CleanedUp = err == nil
	if err != nil {
		return err
	}

	for _, story := range []func(context.Context, *Report) error{c.packedStory, c.lerobotStory} { // 11. packed, 12. LeRobot
		if err := story(ctx, rep); err != nil {
			return err
		}
	}
	// 13. Pods on the node's network.
	c.Step("Two hostNetwork pods of one job on the node, in namespace %s of their own (the restricted level forbids hostNetwork)", hostNetNamespace)
	if rep.HostNetwork, err = c.hostNetwork(ctx); err != nil {
		return err
	}
	c.Detail("%s", rep.HostNetwork)
	return nil
}

const hostNetNamespace = "e2e-hostnet"

// hostNetwork runs a Job of two hostNetwork pods (the app container is
// the pause image: only the sidecars matter) and checks that both
// sidecars start — a metrics port on the node's network would collide —
// and that nothing listens on the node's address at the sidecar's
// metrics port.
func (c *Cluster) hostNetwork(ctx context.Context) (string, error) {
	e, err := c.NewEnv(ctx, hostNetNamespace, DatasetOptions{PodSecurity: "privileged", Samples: 200, NumSplits: 2, GlobalBatchSize: 4,
		BlockSize: 64, CommitEvery: commitEvery, StepTime: c.o.StepTime})
	if err != nil {
		return "", err
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "hostnet", Namespace: e.NS},
		Spec: batchv1.JobSpec{
			Completions: ptr.To(int32(2)), Parallelism: ptr.To(int32(2)), CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{inject.LabelDataset: datasetName}},
				Spec: corev1.PodSpec{
					HostNetwork: true, RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To(int64(1)),
					Containers: []corev1.Container{{Name: "app", Image: "registry.local/pause:e2e", ImagePullPolicy: corev1.PullNever}},
				},
			},
		},
	}
	if err := e.Client.Create(ctx, job); err != nil {
		return "", err
	}
	if err := WaitFor(ctx, 3*time.Minute, "both hostNetwork pods with a started sidecar", func() (bool, error) {
		pods, err := e.PodsOf(ctx, job.Name)
		if err != nil {
			return false, err
		}
		started := 0
		for _, p := range pods {
			for _, s := range p.Status.InitContainerStatuses {
				if s.Name == inject.SidecarName && s.Started != nil && *s.Started && s.RestartCount == 0 {
					started++
				}
			}
		}
		return started == 2, nil
	}); err != nil {
		return "", err
	}
	pods, err := e.PodsOf(ctx, job.Name)
	if err != nil {
		return "", err
	}
	for _, p := range pods {
		if sc := p.Spec.InitContainers[0]; len(sc.Ports) != 0 {
			return "", fmt.Errorf("pod %s: the sidecar declares ports %v on the node's network", p.Name, sc.Ports)
		}
	}
	addr := net.JoinHostPort(c.o.NodeIP, strconv.Itoa(int(sidecarconfig.MetricsPort)))
	if conn, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
		_ = conn.Close()
		return "", fmt.Errorf("something listens on the node's %s", addr)
	}
	if err := e.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.NS}}); err != nil {
		return "", err
	}
	return fmt.Sprintf("both sidecars started without a restart, neither declares a port, nothing answers on %s", addr), nil
}

// Rescale deletes job (its pods first) and starts the job's next Job with
// pods pods, under the same shardfeed.io/job.
func (e *Env) Rescale(ctx context.Context, job *batchv1.Job, pods int) (*batchv1.Job, error) {
	if err := e.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	if err := WaitFor(ctx, 2*time.Minute, "the pods of "+job.Name+" to go", func() (bool, error) {
		pods, err := e.PodsOf(ctx, job.Name)
		return err == nil && len(pods) == 0, err
	}); err != nil {
		return nil, err
	}
	// The Job object itself goes after its pods (foreground deletion).
	if err := WaitFor(ctx, time.Minute, "Job "+job.Name+" to go", func() (bool, error) {
		err := e.Client.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}); err != nil {
		return nil, err
	}
	return e.StartJob(ctx, pods)
}

// WaitJobDone waits until every pod of job succeeded; a failed Job is an
// error with its message.
func (e *Env) WaitJobDone(ctx context.Context, job *batchv1.Job, timeout time.Duration) error {
	return WaitFor(ctx, timeout, "Job "+job.Name+" to complete", func() (bool, error) { return e.jobDone(ctx, job) })
}

// LineageOf waits until job completed, then checks what the story's job
// committed against `shardfeed plan --ids`.
func (e *Env) LineageOf(ctx context.Context, job *batchv1.Job, timeout time.Duration) (Lineage, error) {
	if err := e.WaitJobDone(ctx, job, timeout); err != nil {
		return Lineage{}, err
	}
	st, err := e.State(ctx)
	if err != nil {
		return Lineage{}, err
	}
	return e.CheckLineage(ctx, st)
}

// StartJob creates Indexed Job <job>-<pods> running the e2e trainer.
func (e *Env) StartJob(ctx context.Context, pods int) (*batchv1.Job, error) {
	return e.startJob(ctx, pods)
}

// startJob is StartJob with env added to the trainers' environment.
func (e *Env) startJob(ctx context.Context, pods int, env ...corev1.EnvVar) (*batchv1.Job, error) {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", e.jobName(), pods), Namespace: e.NS},
		Spec: batchv1.JobSpec{
			Completions: ptr.To(int32(pods)), Parallelism: ptr.To(int32(pods)), CompletionMode: ptr.To(batchv1.IndexedCompletion),
			BackoffLimit: ptr.To(int32(30)), // the chaos suite kills trainers on purpose
			Template:     e.trainerPod(pods, "metadata.labels['batch.kubernetes.io/controller-uid']", env...),
		},
	}
	return job, e.Client.Create(ctx, job)
}

// trainerPod is the pod template of the e2e trainer in a job of world
// ranks, labelled for the dataset; attemptField is the pod's field that
// names its job's attempt (shared by every pod of the attempt).
func (e *Env) trainerPod(world int, attemptField string, env ...corev1.EnvVar) corev1.PodTemplateSpec {
	env = append([]corev1.EnvVar{
		{Name: "E2E_WORLD", Value: strconv.Itoa(world)},
		{Name: "E2E_DIR", Value: path.Join("/e2e", e.sub)},
		{Name: "E2E_STEP_MS", Value: strconv.Itoa(int(e.ds.StepTime / time.Millisecond))},
		{Name: "E2E_COMMIT_EVERY", Value: strconv.Itoa(e.ds.CommitEvery)},
		{Name: "E2E_ATTEMPT", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: attemptField}}},
	}, env...)
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{inject.LabelDataset: datasetName},
			Annotations: map[string]string{inject.AnnotationJob: e.jobName()},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To(int64(5)),
			Containers: []corev1.Container{{
				Name: "trainer", Image: "registry.local/shardfeed-trainer:e2e", ImagePullPolicy: corev1.PullNever,
				Env: env, VolumeMounts: []corev1.VolumeMount{{Name: "e2e", MountPath: "/e2e"}},
				SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65532)),
					AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
			Volumes: []corev1.Volume{{Name: "e2e", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: recordsClaim}}}},
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		},
	}
}

// WaitPodsRunning waits until n pods of job run (or have succeeded).
func (e *Env) WaitPodsRunning(ctx context.Context, job *batchv1.Job, n int) error {
	return WaitFor(ctx, 3*time.Minute, fmt.Sprintf("%d running pods of %s", n, job.Name), func() (bool, error) {
		pods, err := e.PodsOf(ctx, job.Name)
		if err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded {
				running++
			}
		}
		return running >= n, nil
	})
}

// CheckInjected checks the live pods' injected spec and start order.
func (e *Env) CheckInjected(ctx context.Context, job *batchv1.Job) ([]string, bool, error) {
	pods, err := e.PodsOf(ctx, job.Name)
	if err != nil {
		return nil, false, err
	}
	var problems []string
	first := true
	for _, p := range pods {
		if len(p.Spec.InitContainers) == 0 || p.Spec.InitContainers[0].Name != inject.SidecarName {
			problems = append(problems, p.Name+": no sidecar as the first init container")
			continue
		}
		sc := p.Spec.InitContainers[0]
		if sc.RestartPolicy == nil || *sc.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			problems = append(problems, p.Name+": the sidecar is not a native sidecar")
		}
		if sc.StartupProbe == nil {
			problems = append(problems, p.Name+": the sidecar has no startup probe")
		}
		if sc.SecurityContext == nil || sc.SecurityContext.RunAsNonRoot == nil || !*sc.SecurityContext.RunAsNonRoot ||
			sc.SecurityContext.ReadOnlyRootFilesystem == nil || !*sc.SecurityContext.ReadOnlyRootFilesystem {
			problems = append(problems, p.Name+": the sidecar is not non-root with a read-only root filesystem")
		}
		hasSocket := false
		for _, e := range p.Spec.Containers[0].Env {
			hasSocket = hasSocket || (e.Name == "SHARDFEED_SOCKET" && e.Value == inject.SocketPath)
		}
		if !hasSocket {
			problems = append(problems, p.Name+": the trainer has no SHARDFEED_SOCKET")
		}
		var sidecarStarted, trainerStarted time.Time
		for _, s := range p.Status.InitContainerStatuses {
			if s.Name == inject.SidecarName && s.State.Running != nil {
				sidecarStarted = s.State.Running.StartedAt.Time
			}
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.State.Running != nil {
				trainerStarted = s.State.Running.StartedAt.Time
			} else if s.State.Terminated != nil {
				trainerStarted = s.State.Terminated.StartedAt.Time
			}
		}
		if sidecarStarted.IsZero() || trainerStarted.IsZero() || trainerStarted.Before(sidecarStarted) {
			first = false
		}
	}
	return problems, first, nil
}

// State returns the job's committed state, from its state ConfigMap.
func (e *Env) State(ctx context.Context) (*configmaps.State, error) {
	var cm corev1.ConfigMap
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: e.NS, Name: configmaps.StateName(datasetName, e.jobName())}, &cm); err != nil {
		return nil, err
	}
	return configmaps.StateFromData(cm.Data)
}

// WaitCommitted waits until the job committed step at least min.
func (e *Env) WaitCommitted(ctx context.Context, min int64) (int64, error) {
	var got int64
	err := WaitFor(ctx, 5*time.Minute, fmt.Sprintf("a commit of step %d", min), func() (bool, error) {
		st, err := e.State(ctx)
		if err != nil {
			return false, err
		}
		got = st.Step
		return st.Step >= min || st.Epoch > 0, nil
	})
	return got, err
}

// KillSidecar kills the sidecar container of the pod with completion
// index idx through containerd, and waits for the kubelet to restart it.
func (e *Env) KillSidecar(ctx context.Context, job *batchv1.Job, idx int) (int32, error) {
	pod, err := e.PodAt(ctx, job, idx)
	if err != nil {
		return 0, err
	}
	var id string
	var restarts int32
	for _, s := range pod.Status.InitContainerStatuses {
		if s.Name == inject.SidecarName {
			id, restarts = strings.TrimPrefix(s.ContainerID, "containerd://"), s.RestartCount
		}
	}
	if id == "" {
		return 0, fmt.Errorf("pod %s has no running sidecar", pod.Name)
	}
	if err := e.sigkill(ctx, id); err != nil {
		return 0, err
	}
	var now int32
	err = WaitFor(ctx, 2*time.Minute, "the sidecar to restart", func() (bool, error) {
		p, err := e.PodAt(ctx, job, idx)
		if err != nil {
			return false, err
		}
		for _, s := range p.Status.InitContainerStatuses {
			if s.Name == inject.SidecarName {
				now = s.RestartCount
				return s.RestartCount > restarts && s.Started != nil && *s.Started, nil
			}
		}
		return false, nil
	})
	return now, err
}

// KillTrainer kills the trainer container of the pod with completion
// index idx (SIGKILL, through containerd): the pod fails and the Job
// replaces it; it waits for the replacement to run.
func (e *Env) KillTrainer(ctx context.Context, job *batchv1.Job, idx int) error {
	pod, err := e.PodAt(ctx, job, idx)
	if err != nil {
		return err
	}
	var id string
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == "trainer" && s.State.Running != nil {
			id = strings.TrimPrefix(s.ContainerID, "containerd://")
		}
	}
	if id == "" {
		return fmt.Errorf("pod %s has no running trainer", pod.Name)
	}
	if err := e.sigkill(ctx, id); err != nil {
		return err
	}
	return WaitFor(ctx, 3*time.Minute, "the killed trainer's pod to be replaced", func() (bool, error) {
		p, err := e.PodAt(ctx, job, idx)
		if err != nil {
			return false, nil //nolint:nilerr // no running pod yet
		}
		return p.UID != pod.UID, nil
	})
}

// sigkill kills a container through containerd.
func (e *Env) sigkill(ctx context.Context, id string) error {
	socket := filepath.Join(e.o.Root, ".cache", "cluster", "run", "containerd", "containerd.sock")
	if out, err := execCommand(ctx, "ctr", "-a", socket, "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", id); err != nil {
		return fmt.Errorf("ctr tasks kill: %w: %s", err, out)
	}
	return nil
}

// DeletePod deletes the pod of completion index idx at once.
func (e *Env) DeletePod(ctx context.Context, job *batchv1.Job, idx int) error {
	pod, err := e.PodAt(ctx, job, idx)
	if err != nil {
		return err
	}
	return e.Client.Delete(ctx, pod, client.GracePeriodSeconds(0))
}

// PodAt is the live pod of completion index idx.
func (e *Env) PodAt(ctx context.Context, job *batchv1.Job, idx int) (*corev1.Pod, error) {
	pods, err := e.PodsOf(ctx, job.Name)
	if err != nil {
		return nil, err
	}
	for i := range pods {
		p := &pods[i]
		if p.Annotations[jobkind.JobCompletionIndex] == strconv.Itoa(idx) && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no running pod of %s with index %d", job.Name, idx)
}

// managerPods are the manager's running pods.
func (c *Cluster) managerPods(ctx context.Context) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.Client.List(ctx, &pods, client.InNamespace(operatorNS), client.MatchingLabels{"app.kubernetes.io/component": "manager"}); err != nil {
		return nil, err
	}
	var running []corev1.Pod
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running = append(running, p)
		}
	}
	return running, nil
}

// KillManager kills the manager container of one replica (SIGKILL,
// through containerd), which=0 or 1, and waits until the kubelet restarted
// it and it is ready again: meanwhile the other replica serves the
// webhooks and the sidecars' commits.
func (c *Cluster) KillManager(ctx context.Context, which int) (string, error) {
	pods, err := c.managerPods(ctx)
	if err != nil {
		return "", err
	}
	if len(pods) == 0 {
		return "", errors.New("no running manager pod")
	}
	pod := pods[which%len(pods)]
	var id string
	var restarts int32
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == "manager" {
			id, restarts = strings.TrimPrefix(s.ContainerID, "containerd://"), s.RestartCount
		}
	}
	if id == "" {
		return "", fmt.Errorf("manager pod %s has no container", pod.Name)
	}
	socket := filepath.Join(c.o.Root, ".cache", "cluster", "run", "containerd", "containerd.sock")
	if out, err := execCommand(ctx, "ctr", "-a", socket, "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", id); err != nil {
		return "", fmt.Errorf("ctr tasks kill: %w: %s", err, out)
	}
	err = WaitFor(ctx, 3*time.Minute, "the killed manager to be ready again", func() (bool, error) {
		var p corev1.Pod
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(&pod), &p); err != nil {
			return false, err
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == "manager" {
				return s.RestartCount > restarts && s.Ready, nil
			}
		}
		return false, nil
	})
	return pod.Name, err
}

// RollManager restarts the manager's Deployment (kubectl rollout restart:
// one replica after the other, the PodDisruptionBudget's way) and waits
// for the rollout.
func (c *Cluster) RollManager(ctx context.Context) error {
	if _, err := c.Cmd(ctx, "kubectl", "rollout", "restart", "deployment/shardfeed-manager", "-n", operatorNS); err != nil {
		return err
	}
	_, err := c.Cmd(ctx, "kubectl", "rollout", "status", "deployment/shardfeed-manager", "-n", operatorNS, "--timeout", "180s")
	return err
}

// UpgradeOperator upgrades the release as a platform team does (helm
// upgrade --reuse-values) to the operator image tagged tag, which becomes
// the default sidecar image too, and waits for the rollout. The local
// cluster has no registry and no earlier release: tag names the build
// under test, so the upgrade changes the chart's rendering, the image
// references and every manager pod, not the code.
func (c *Cluster) UpgradeOperator(ctx context.Context, tag string) error {
	socket := filepath.Join(c.o.Root, ".cache", "cluster", "run", "containerd", "containerd.sock")
	if out, err := execCommand(ctx, "ctr", "-a", socket, "-n", "k8s.io", "images", "tag", "--force",
		operatorImageName, OperatorRepository+":"+tag); err != nil {
		return fmt.Errorf("ctr images tag: %w: %s", err, out)
	}
	if _, err := c.Cmd(ctx, "helm", "upgrade", "shardfeed", c.chart(), "--namespace", operatorNS,
		"--reuse-values", "--set", "image.tag="+tag, "--set", "image.digest=", "--wait", "--timeout", "180s"); err != nil {
		return err
	}
	if _, err := c.Cmd(ctx, "kubectl", "rollout", "status", "deployment/shardfeed-manager", "-n", operatorNS, "--timeout", "180s"); err != nil {
		return err
	}
	return WaitFor(ctx, 2*time.Minute, "every manager pod on the new image", func() (bool, error) {
		pods, err := c.managerPods(ctx)
		if err != nil || len(pods) == 0 {
			return false, err
		}
		for _, p := range pods {
			if p.Spec.Containers[0].Image != OperatorRepository+":"+tag {
				return false, nil
			}
		}
		return true, nil
	})
}

// SidecarImage is the image of a pod's injected sidecar.
func SidecarImage(p *corev1.Pod) string {
	for _, c := range p.Spec.InitContainers {
		if c.Name == inject.SidecarName {
			return c.Image
		}
	}
	return ""
}

// pythonFirstManifest is the quickstart's Python-first path taken to the
// cluster: FeedDataset.from_uri serves the text stream from MinIO on this
// machine (the environment's credentials, the filter's selection read
// where shardfeed index wrote it), and the TrainingDataset its
// to_manifest() returns, applied with kubectl as it is, becomes Ready.
func (c *Cluster) pythonFirstManifest(ctx context.Context, e *Env) error {
	c.Step("The Python client's from_uri(\"s3://%s/text/\", ...) serves here; kubectl apply of its to_manifest() as it is", e.Bucket)
	dir := filepath.Join(c.work, "python-first")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	manifest := filepath.Join(dir, "text.yaml")
	script := fmt.Sprintf(`import os, sys
sys.path.insert(0, %q)
os.environ["SHARDFEED_BINARY"] = %q
import shardfeed
ds = shardfeed.FeedDataset.from_uri("s3://%s/text/", format="parquet", batch_size=8, shuffle_seed=1, filter=%q,
                                    endpoint=%q, insecure=True, credentials_secret=%q, directory=%q,
                                    rank=0, world_size=1, output="arrow")
rows = sum(b.num_rows for b in ds)
open(%q, "w").write(ds.to_manifest())
print("served", rows, "rows")
`, filepath.Join(c.o.Root, "clients", "python", "src"), filepath.Join(c.o.Bin, "shardfeed"), e.Bucket, textFilter,
		c.MinIO.URL(), secretName, dir, manifest)
	out, err := c.Cmd(ctx, filepath.Join("venv", "bin", "python"), "-c", script)
	if err != nil {
		return err
	}
	c.Detail("%s", strings.TrimSpace(out[strings.LastIndex(out, "served"):]))
	if _, err := c.Cmd(ctx, "kubectl", "apply", "-n", e.NS, "-f", manifest); err != nil {
		return err
	}
	ds := &datav1alpha1.TrainingDataset{}
	key := client.ObjectKey{Namespace: e.NS, Name: "text"}
	if err := WaitFor(ctx, 2*time.Minute, "the Python-first dataset to be Ready", func() (bool, error) {
		if err := c.Client.Get(ctx, key, ds); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		cond := meta.FindStatusCondition(ds.Status.Conditions, "Ready")
		return cond != nil && cond.Status == metav1.ConditionTrue, nil
	}); err != nil {
		return fmt.Errorf("%w (status %+v)", err, ds.Status)
	}
	c.Detail("TrainingDataset %q Ready: %d samples (%s)", key.Name, ds.Status.Samples, meta.FindStatusCondition(ds.Status.Conditions, "Ready").Message)
	return c.Client.Delete(ctx, ds)
}

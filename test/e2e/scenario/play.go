package scenario

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/inject"
	"github.com/shardfeed/shardfeed/internal/testdata"
	"github.com/shardfeed/shardfeed/internal/testenv"
)

func (r *run) play(ctx context.Context, rep *Report) error {
	// 1. The operator.
	r.step("Installing the operator with Helm (image registry.local/shardfeed:e2e)")
	if _, err := r.cmd(ctx, "helm", "upgrade", "--install", "shardfeed", filepath.Join(r.o.Root, "charts", "shardfeed"),
		"--namespace", operatorNS, "--create-namespace", "--set", "image.repository=registry.local/shardfeed",
		"--set", "image.tag=e2e", "--set", "image.pullPolicy=Never", "--wait", "--timeout", "180s"); err != nil {
		return err
	}
	r.detail("the manager is ready; it made its own webhook certificate")
	out, err := r.cmd(ctx, "helm", "test", "shardfeed", "--namespace", operatorNS, "--logs", "--timeout", "120s")
	if err != nil {
		return fmt.Errorf("helm test: %w", err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if (strings.HasPrefix(line, "ok ") || strings.HasPrefix(line, "FAIL ")) && !seen[line] {
			seen[line] = true
			r.detail("helm test: %s", line)
		}
	}

	// 2. The data.
	r.step("Starting MinIO on the node address and writing a dataset of two streams (MDS and Parquet), %d samples each", r.o.Samples)
	if r.minio, err = testenv.StartMinIOAt(ctx, r.o.NodeIP); err != nil {
		return err
	}
	bucket := "e2e-data"
	if err := r.minio.Client.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: r.minio.Region}); err != nil {
		return err
	}
	mdsDir, pqDir := filepath.Join(r.work, "tokens"), filepath.Join(r.work, "text")
	if err := testdata.MDS(mdsDir, "tokens", r.o.Samples, 4<<10, ""); err != nil {
		return err
	}
	if err := testdata.Parquet(ctx, pqDir, "text", r.o.Samples, r.o.Samples/4, 50); err != nil {
		return err
	}
	if err := r.upload(ctx, mdsDir, bucket, "tokens/"); err != nil {
		return err
	}
	if err := r.upload(ctx, pqDir, bucket, "text/"); err != nil {
		return err
	}
	r.detail("s3://%s/tokens/ and s3://%s/text/ on %s", bucket, bucket, r.minio.URL())

	// 3. The TrainingDataset.
	r.step("kubectl apply: namespace %s, the MinIO credentials Secret and TrainingDataset %q", r.ns, datasetName)
	// A namespace left by an earlier run on a kept cluster goes first.
	if err := r.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}}); err == nil {
		r.detail("removing namespace %s of an earlier run", r.ns)
	}
	if err := waitFor(ctx, 3*time.Minute, "namespace "+r.ns+" of an earlier run to go", func() (bool, error) {
		err := r.c.Get(ctx, client.ObjectKey{Name: r.ns}, &corev1.Namespace{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}); err != nil {
		return err
	}
	if err := r.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}}); err != nil {
		return err
	}
	if err := r.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: r.ns},
		StringData: map[string]string{"AWS_ACCESS_KEY_ID": r.minio.AccessKey, "AWS_SECRET_ACCESS_KEY": r.minio.SecretKey}}); err != nil {
		return err
	}
	manifest := testdata.Manifest(datasetName, r.streams(bucket), r.spec())
	var ds datav1alpha1.TrainingDataset
	if err := yaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096).Decode(&ds); err != nil {
		return err
	}
	ds.Namespace = r.ns
	for i := range ds.Spec.Streams {
		ds.Spec.Streams[i].Source.CredentialsSecretRef = &datav1alpha1.SecretReference{Name: secretName}
	}
	if err := r.c.Create(ctx, &ds); err != nil {
		return err
	}
	if err := waitFor(ctx, 2*time.Minute, "the dataset to be Ready", func() (bool, error) {
		if err := r.c.Get(ctx, client.ObjectKeyFromObject(&ds), &ds); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(ds.Status.Conditions, "Ready")
		return c != nil && c.Status == metav1.ConditionTrue, nil
	}); err != nil {
		return fmt.Errorf("%w (status %+v)", err, ds.Status)
	}
	rep.Ready = meta.FindStatusCondition(ds.Status.Conditions, "Ready").Message
	rep.Totals = ds.Status.Samples
	table, _ := r.cmd(ctx, "kubectl", "get", "tds", "-n", r.ns)
	r.detail("Ready: %s", rep.Ready)
	for _, line := range strings.Split(strings.TrimSpace(table), "\n") {
		r.detail("%s", line)
	}

	// 4. A pod for a dataset that does not exist is refused.
	bad := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "lost", Namespace: r.ns, Labels: map[string]string{inject.LabelDataset: "missing"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.local/shardfeed-trainer:e2e"}}}}
	err = r.c.Create(ctx, bad)
	if err == nil {
		return errors.New("a pod labelled for a missing dataset was admitted")
	}
	rep.RejectedMissingDataset = err.Error()
	r.step("A pod labelled for a dataset that does not exist is refused:")
	r.detail("%s", rep.RejectedMissingDataset)

	// 5. The training job.
	r.step("Starting Indexed Job %s-%d: %d pods labelled shardfeed.io/dataset=%s", jobName, r.o.Pods, r.o.Pods, datasetName)
	first, err := r.startJob(ctx, r.o.Pods)
	if err != nil {
		return err
	}
	if err := r.waitPodsRunning(ctx, first, r.o.Pods); err != nil {
		return err
	}
	if rep.InjectedSpecProblems, rep.SidecarFirst, err = r.checkInjected(ctx, first); err != nil {
		return err
	}
	r.detail("every pod has the native sidecar (started before the trainer: %v)", rep.SidecarFirst)

	// 6. A sidecar dies.
	if rep.KilledSidecarAt, err = r.waitCommitted(ctx, 3*commitEvery); err != nil {
		return err
	}
	r.step("Killing the sidecar container of %s-%d's pod 1 at committed step %d (the kubelet restarts it)", jobName, r.o.Pods, rep.KilledSidecarAt)
	if rep.SidecarRestarts, err = r.killSidecar(ctx, first, 1); err != nil {
		return err
	}
	r.detail("restarted (restart count %d); the trainer reconnected at its step", rep.SidecarRestarts)

	// 7. A pod dies.
	if rep.DeletedPodAt, err = r.waitCommitted(ctx, rep.KilledSidecarAt+3*commitEvery); err != nil {
		return err
	}
	r.step("Deleting pod 2 of %s-%d at committed step %d (the Job makes a new one; every rank goes back to the committed step)", jobName, r.o.Pods, rep.DeletedPodAt)
	if err := r.deletePod(ctx, first, 2); err != nil {
		return err
	}

	// 8. Rescale.
	if rep.RescaledAt, err = r.waitCommitted(ctx, rep.DeletedPodAt+3*commitEvery); err != nil {
		return err
	}
	r.step("Rescaling at committed step %d: deleting %s-%d, starting %s-%d with the same shardfeed.io/job", rep.RescaledAt, jobName, r.o.Pods, jobName, r.o.RescaledPods)
	if err := r.c.Delete(ctx, first, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		return err
	}
	if err := waitFor(ctx, 2*time.Minute, "the first Job's pods to go", func() (bool, error) {
		pods, err := r.podsOf(ctx, first.Name)
		return err == nil && len(pods) == 0, err
	}); err != nil {
		return err
	}
	second, err := r.startJob(ctx, r.o.RescaledPods)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, 10*time.Minute, "the rescaled Job to complete", func() (bool, error) {
		if err := r.c.Get(ctx, client.ObjectKeyFromObject(second), second); err != nil {
			return false, err
		}
		for _, c := range second.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				return false, fmt.Errorf("job %s failed: %s", second.Name, c.Message)
			}
		}
		return second.Status.Succeeded == int32(r.o.RescaledPods), nil
	}); err != nil {
		return err
	}
	st, err := r.state(ctx)
	if err != nil {
		return err
	}
	r.step("%s-%d completed: the job committed epoch %d step %d", jobName, r.o.RescaledPods, st.Epoch, st.Step)

	// 9. The verdict.
	r.step("Checking the committed lineage against `shardfeed plan --ids`")
	manifestFile := filepath.Join(r.work, "dataset.yaml")
	if err := os.WriteFile(manifestFile, []byte(manifest), 0o600); err != nil {
		return err
	}
	if rep.Lineage, err = r.checkLineage(ctx, manifestFile, st); err != nil {
		return err
	}
	r.detail("%s", rep.Summary())

	// 10. Clean-up by owner references.
	r.step("Deleting the TrainingDataset: its plan, job state, Role and RoleBinding go with it")
	if err := r.c.Delete(ctx, &ds); err != nil {
		return err
	}
	err = waitFor(ctx, 2*time.Minute, "the dataset's objects to be collected", func() (bool, error) {
		for _, obj := range []client.Object{
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: configmaps.PlanName(datasetName)}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: configmaps.StateName(datasetName, jobName)}},
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "shardfeed-" + datasetName + "-" + jobName}},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "shardfeed-" + datasetName + "-" + jobName}},
		} {
			if err := r.c.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: obj.GetName()}, obj); !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		return true, nil
	})
	rep.CleanedUp = err == nil
	return err
}

// startJob creates Indexed Job train-<pods> running the e2e trainer.
func (r *run) startJob(ctx context.Context, pods int) (*batchv1.Job, error) {
	env := []corev1.EnvVar{
		{Name: "E2E_WORLD", Value: strconv.Itoa(pods)},
		{Name: "E2E_DIR", Value: "/e2e"},
		{Name: "E2E_STEP_MS", Value: strconv.Itoa(int(r.o.StepTime / time.Millisecond))},
		{Name: "E2E_COMMIT_EVERY", Value: strconv.Itoa(commitEvery)},
		{Name: "E2E_ATTEMPT", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['batch.kubernetes.io/controller-uid']"}}},
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", jobName, pods), Namespace: r.ns},
		Spec: batchv1.JobSpec{
			Completions: ptr.To(int32(pods)), Parallelism: ptr.To(int32(pods)), CompletionMode: ptr.To(batchv1.IndexedCompletion),
			BackoffLimit: ptr.To(int32(10)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      map[string]string{inject.LabelDataset: datasetName},
					Annotations: map[string]string{inject.AnnotationJob: jobName},
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
					Volumes: []corev1.Volume{{Name: "e2e", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: r.work}}}},
				},
			},
		},
	}
	return job, r.c.Create(ctx, job)
}

func (r *run) waitPodsRunning(ctx context.Context, job *batchv1.Job, n int) error {
	return waitFor(ctx, 3*time.Minute, fmt.Sprintf("%d running pods of %s", n, job.Name), func() (bool, error) {
		pods, err := r.podsOf(ctx, job.Name)
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

// checkInjected checks the live pods' injected spec and start order.
func (r *run) checkInjected(ctx context.Context, job *batchv1.Job) ([]string, bool, error) {
	pods, err := r.podsOf(ctx, job.Name)
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

func (r *run) state(ctx context.Context) (*configmaps.State, error) {
	var cm corev1.ConfigMap
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: configmaps.StateName(datasetName, jobName)}, &cm); err != nil {
		return nil, err
	}
	return configmaps.StateFromData(cm.Data)
}

// waitCommitted waits until the job committed step at least min.
func (r *run) waitCommitted(ctx context.Context, min int64) (int64, error) {
	var got int64
	err := waitFor(ctx, 5*time.Minute, fmt.Sprintf("a commit of step %d", min), func() (bool, error) {
		st, err := r.state(ctx)
		if err != nil {
			return false, err
		}
		got = st.Step
		return st.Step >= min || st.Epoch > 0, nil
	})
	return got, err
}

// killSidecar kills the sidecar container of the pod with completion
// index idx through containerd, and waits for the kubelet to restart it.
func (r *run) killSidecar(ctx context.Context, job *batchv1.Job, idx int) (int32, error) {
	pod, err := r.podAt(ctx, job, idx)
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
	socket := filepath.Join(r.o.Root, ".cache", "cluster", "run", "containerd", "containerd.sock")
	if out, err := execCommand(ctx, "ctr", "-a", socket, "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", id); err != nil {
		return 0, fmt.Errorf("ctr tasks kill: %w: %s", err, out)
	}
	var now int32
	err = waitFor(ctx, 2*time.Minute, "the sidecar to restart", func() (bool, error) {
		p, err := r.podAt(ctx, job, idx)
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

func (r *run) deletePod(ctx context.Context, job *batchv1.Job, idx int) error {
	pod, err := r.podAt(ctx, job, idx)
	if err != nil {
		return err
	}
	return r.c.Delete(ctx, pod, client.GracePeriodSeconds(0))
}

// podAt is the live pod of completion index idx.
func (r *run) podAt(ctx context.Context, job *batchv1.Job, idx int) (*corev1.Pod, error) {
	pods, err := r.podsOf(ctx, job.Name)
	if err != nil {
		return nil, err
	}
	for i := range pods {
		p := &pods[i]
		if p.Annotations[inject.JobCompletionIndex] == strconv.Itoa(idx) && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no running pod of %s with index %d", job.Name, idx)
}

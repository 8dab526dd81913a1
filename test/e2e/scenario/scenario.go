// Package scenario is the end-to-end story on a real cluster (the local one
// of hack/cluster-up.sh), shared by the e2e test, which asserts its
// report, and `make demo`, which narrates it: the operator installed with
// Helm, a two-stream dataset in MinIO, a TrainingDataset applied, an
// Indexed Job of trainers that loses a sidecar and a pod mid-epoch, is
// rescaled to fewer pods, resumes from the committed step and finishes;
// then the committed lineage is checked against `shardfeed plan --ids`.
package scenario

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/testdata"
	"github.com/shardfeed/shardfeed/internal/testenv"
)

// Options of a run.
type Options struct {
	// Root is the repository; Bin its bin/ (helm, kubectl, shardfeed).
	Root, Bin string
	// Kubeconfig and NodeIP of the cluster (.cache/cluster/env).
	Kubeconfig, NodeIP string
	// Out receives the narration.
	Out io.Writer
	// Pods of the first Job and of the rescaled one.
	Pods, RescaledPods int
	// Samples per stream.
	Samples int
	// StepTime is the trainers' time per step.
	StepTime time.Duration
}

// Report is what the run found.
type Report struct {
	Lineage
	// KilledSidecarAt, DeletedPodAt and RescaledAt are the committed steps
	// when each happened.
	KilledSidecarAt, DeletedPodAt, RescaledAt int64
	// SidecarRestarts of the pod whose sidecar was killed.
	SidecarRestarts int32
	// RejectedMissingDataset is the API server's message for a pod
	// labelled with a dataset that does not exist.
	RejectedMissingDataset string
	// InjectedSpecProblems lists what the live pods lack.
	InjectedSpecProblems []string
	// SidecarFirst: on every pod the sidecar started before the trainer.
	SidecarFirst bool
	// Ready is the dataset's Ready condition message; Totals its samples.
	Ready  string
	Totals int64
	// CleanedUp: deleting the dataset removed its plan, state, Role and
	// RoleBinding.
	CleanedUp bool
}

// run is one scenario's state.
type run struct {
	o      Options
	c      client.Client
	minio  *testenv.MinIO
	work   string
	ns     string
	start  time.Time
	stepNo int
}

const (
	namespace   = "e2e"
	operatorNS  = "shardfeed-system"
	datasetName = "web"
	jobName     = "train" // shardfeed.io/job of both Jobs
	secretName  = "minio"
	numSplits   = 4
	globalBatch = 16
	commitEvery = 5
)

// Run plays the scenario; the returned Report says what happened even
// with an error (as far as it got).
func Run(ctx context.Context, o Options) (*Report, error) {
	r := &run{o: o, ns: namespace, start: time.Now()}
	rep := &Report{}
	if o.Pods == 0 {
		r.o.Pods = 4
	}
	if o.RescaledPods == 0 {
		r.o.RescaledPods = 2
	}
	if o.Samples == 0 {
		r.o.Samples = 1200
	}
	if o.StepTime == 0 {
		r.o.StepTime = 40 * time.Millisecond
	}
	if o.Out == nil {
		r.o.Out = io.Discard
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return rep, fmt.Errorf("kubeconfig %s: %w", o.Kubeconfig, err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return rep, err
	}
	if err := datav1alpha1.AddToScheme(scheme); err != nil {
		return rep, err
	}
	if r.c, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return rep, err
	}
	if r.work, err = os.MkdirTemp(filepath.Join(o.Root, ".cache"), "e2e-"); err != nil {
		return rep, err
	}
	// The trainers (non-root) write their records and barrier here.
	if err := os.Chmod(r.work, 0o777); err != nil {
		return rep, err
	}
	defer func() { _ = os.RemoveAll(r.work) }()
	err = r.play(ctx, rep)
	if r.minio != nil {
		_ = r.minio.Stop()
	}
	return rep, err
}

// step narrates one step of the story.
func (r *run) step(format string, args ...any) {
	r.stepNo++
	_, _ = fmt.Fprintf(r.o.Out, "[%5.1fs] %2d. %s\n", time.Since(r.start).Seconds(), r.stepNo, fmt.Sprintf(format, args...))
}

// detail narrates an indented line.
func (r *run) detail(format string, args ...any) {
	_, _ = fmt.Fprintf(r.o.Out, "           %s\n", fmt.Sprintf(format, args...))
}

// cmd runs a tool from bin/ with the cluster's kubeconfig.
func (r *run) cmd(ctx context.Context, name string, args ...string) (string, error) {
	c := exec.CommandContext(ctx, filepath.Join(r.o.Bin, name), args...)
	c.Env = append(os.Environ(), "KUBECONFIG="+r.o.Kubeconfig,
		"AWS_ACCESS_KEY_ID="+r.minioKey(), "AWS_SECRET_ACCESS_KEY="+r.minioSecret(),
		"HELM_CACHE_HOME="+filepath.Join(r.work, "helm-cache"), "HELM_CONFIG_HOME="+filepath.Join(r.work, "helm-config"),
		"HELM_DATA_HOME="+filepath.Join(r.work, "helm-data"))
	out, err := c.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (r *run) minioKey() string {
	if r.minio == nil {
		return ""
	}
	return r.minio.AccessKey
}

func (r *run) minioSecret() string {
	if r.minio == nil {
		return ""
	}
	return r.minio.SecretKey
}

// upload puts every file of dir under bucket/prefix.
func (r *run) upload(ctx context.Context, dir, bucket, prefix string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		if _, err := r.minio.Client.FPutObject(ctx, bucket, prefix+e.Name(), filepath.Join(dir, e.Name()), minio.PutObjectOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// waitFor polls cond every 200 ms until it holds or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			if last != nil {
				return fmt.Errorf("waiting for %s: %w", what, last)
			}
			return fmt.Errorf("waiting for %s: not after %s", what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// streams of the dataset: the same samples count in two formats.
func (r *run) streams(bucket string) []testdata.Stream {
	ep := r.minio.URL()
	return []testdata.Stream{
		{Name: "tokens", URI: "s3://" + bucket + "/tokens/", Format: "mds", Endpoint: ep, Extra: `columns: ["id", "text"]`},
		{Name: "text", URI: "s3://" + bucket + "/text/", Format: "parquet", Endpoint: ep, Extra: `columns: ["id", "text"]`},
	}
}

func (r *run) spec() string {
	return fmt.Sprintf("  numSplits: %d\n  globalBatchSize: %d\n  shuffle: {seed: 7, blockSize: 256}\n", numSplits, globalBatch)
}

// podsOf lists the pods of a Job.
func (r *run) podsOf(ctx context.Context, job string) ([]corev1.Pod, error) {
	var list corev1.PodList
	err := r.c.List(ctx, &list, client.InNamespace(r.ns), client.MatchingLabels{"job-name": job})
	return list.Items, err
}

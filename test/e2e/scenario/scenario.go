// Package scenario is the end-to-end story on a real cluster (the local one
// of hack/cluster-up.sh), shared by the e2e test, which asserts its
// report, and `make demo`, which narrates it: the operator installed with
// Helm, a two-stream dataset in MinIO, a TrainingDataset applied, an
// Indexed Job of trainers that loses a sidecar and a pod mid-epoch, is
// rescaled to fewer pods, resumes from the committed step and finishes;
// then the committed lineage is checked against `shardfeed plan --ids`.
package scenario

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
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
	// CleanedUp: deleting the dataset removed its plan and state.
	CleanedUp bool
	// HostNetwork says what the hostNetwork pods showed.
	HostNetwork string
	// Packed is the packed story's lineage (a sample is a pack), of
	// PackedSamples packs.
	Packed        Lineage
	PackedSamples int64
	// LeRobot is the LeRobot story's lineage (a sample is a frame index),
	// of LeRobotSamples frames; LeRobotSidecarRestarts the restarts of
	// its killed sidecar.
	LeRobot                Lineage
	LeRobotSamples         int64
	LeRobotSidecarRestarts int32
}

// Cluster is the local cluster as a test drives it: a client, the tools
// of bin/, MinIO on the node's address, a work directory the trainers
// mount, and the narration. The e2e story and the chaos suite share it.
type Cluster struct {
	o      Options
	Client client.Client
	MinIO  *testenv.MinIO
	work   string
	start  time.Time
	stepNo int
}

// NewCluster connects to the cluster of o; Close releases what it made.
func NewCluster(o Options) (*Cluster, error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	c := &Cluster{o: o, start: time.Now()}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", o.Kubeconfig, err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := datav1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if c.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	if c.work, err = os.MkdirTemp(filepath.Join(o.Root, ".cache"), "e2e-"); err != nil {
		return nil, err
	}
	// The trainers (non-root) write their records and barrier here.
	if err := os.Chmod(c.work, 0o777); err != nil {
		return nil, err
	}
	return c, nil
}

// Close stops MinIO and removes the work directory.
func (c *Cluster) Close() {
	if c.MinIO != nil {
		_ = c.MinIO.Stop()
	}
	_ = os.RemoveAll(c.work)
}

// Run plays the scenario; the returned Report says what happened even
// with an error (as far as it got).
func Run(ctx context.Context, o Options) (*Report, error) {
	rep := &Report{}
	c, err := NewCluster(o.withDefaults())
	if err != nil {
		return rep, err
	}
	defer c.Close()
	return rep, c.play(ctx, rep)
}

// withDefaults fills the options left zero: 4 pods rescaled to 2, 1200
// samples a stream, 40 ms a step.
func (o Options) withDefaults() Options {
	o.Pods = cmp.Or(o.Pods, 4)
	o.RescaledPods = cmp.Or(o.RescaledPods, 2)
	o.Samples = cmp.Or(o.Samples, 1200)
	o.StepTime = cmp.Or(o.StepTime, 40*time.Millisecond)
	return o
}

// Step narrates one step of the story.
func (c *Cluster) Step(format string, args ...any) {
	c.stepNo++
	_, _ = fmt.Fprintf(c.o.Out, "[%5.1fs] %2d. %s\n", time.Since(c.start).Seconds(), c.stepNo, fmt.Sprintf(format, args...))
}

// Detail narrates an indented line.
func (c *Cluster) Detail(format string, args ...any) {
	_, _ = fmt.Fprintf(c.o.Out, "           %s\n", fmt.Sprintf(format, args...))
}

// Cmd runs a tool from bin/ with the cluster's kubeconfig and MinIO's
// credentials.
func (c *Cluster) Cmd(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.o.Bin, name), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.o.Kubeconfig,
		"AWS_ACCESS_KEY_ID="+c.minioKey(), "AWS_SECRET_ACCESS_KEY="+c.minioSecret(),
		"HELM_CACHE_HOME="+filepath.Join(c.work, "helm-cache"), "HELM_CONFIG_HOME="+filepath.Join(c.work, "helm-config"),
		"HELM_DATA_HOME="+filepath.Join(c.work, "helm-data"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (c *Cluster) minioKey() string {
	if c.MinIO == nil {
		return ""
	}
	return c.MinIO.AccessKey
}

func (c *Cluster) minioSecret() string {
	if c.MinIO == nil {
		return ""
	}
	return c.MinIO.SecretKey
}

// upload puts every file under dir at bucket/prefix, keeping the tree (an
// index under _shardfeed/ travels with the data it describes).
func (c *Cluster) upload(ctx context.Context, dir, bucket, prefix string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		_, err = c.MinIO.Client.FPutObject(ctx, bucket, prefix+filepath.ToSlash(rel), path, minio.PutObjectOptions{})
		return err
	})
}

// WaitFor polls cond every 200 ms until it holds or timeout passes.
func WaitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
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

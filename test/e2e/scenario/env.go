package scenario

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/inject"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/sampledata"
)

const (
	operatorNS  = "shardfeed-system"
	datasetName = "web"
	jobName     = "train" // shardfeed.io/job of every Job of a story
	secretName  = "minio"
	// indexWriterSecret holds the keys spec.index writes the index with.
	indexWriterSecret = "index-writer"
)

// The operator's image (the manager and the sidecar) and chart: make
// dist's release, when hack/e2e.sh passes its dist.env (make test does),
// else the image hack/images.sh builds and the chart of the source tree.
var (
	// OperatorRepository is the image's repository.
	OperatorRepository = cmp.Or(os.Getenv("DIST_IMAGE_REPOSITORY"), "registry.local/shardfeed")
	// OperatorImage is the reference the manager and its sidecars run:
	// the release's, pinned by digest.
	OperatorImage = cmp.Or(os.Getenv("DIST_IMAGE"), OperatorRepository+":e2e")
	// operatorImageName is the image's name in the node's containerd.
	operatorImageName = cmp.Or(os.Getenv("DIST_IMAGE_NAME"), OperatorImage)
	// operatorChart is the packaged chart of the release, or "" for the
	// source tree's.
	operatorChart = os.Getenv("DIST_CHART")
)

// chart is the chart to install: the release's, or the source tree's.
func (c *Cluster) chart() string {
	return cmp.Or(operatorChart, filepath.Join(c.o.Root, "charts", "shardfeed"))
}

// InstallOperator installs (or upgrades) the chart with the e2e image and
// the values of extra ("--set", "k=v", …), and waits for the manager.
func (c *Cluster) InstallOperator(ctx context.Context, extra ...string) error {
	args := []string{"upgrade", "--install", "shardfeed", c.chart(), "--namespace", operatorNS, "--create-namespace"}
	if operatorChart == "" { // the release's chart pins its image
		args = append(args, "--set", "image.repository="+OperatorRepository, "--set", "image.tag=e2e")
	}
	args = append(args, "--set", "image.pullPolicy=Never",
		// Six pods on two cores: the chart's default sidecar requests
		// (500m, 2Gi each) are for real training nodes.
		"--set", "sidecar.resources.requests.cpu=50m", "--set", "sidecar.resources.requests.memory=256Mi",
		// MinIO, and the chaos scenarios' slow proxy in front of it, run
		// on the node's address: the platform team's in-cluster store.
		"--set", "datasets.allowedEndpoints={"+c.o.NodeIP+"}")
	args = append(append(args, extra...), "--wait", "--timeout", "180s")
	_, err := c.Cmd(ctx, "helm", args...)
	return err
}

// StartMinIO starts MinIO on the node's address, where pods reach it.
func (c *Cluster) StartMinIO(ctx context.Context) (err error) {
	c.MinIO, err = testenv.StartMinIOAt(ctx, c.o.NodeIP)
	return err
}

// DatasetOptions shape one story's dataset.
type DatasetOptions struct {
	// PodSecurity is the level the namespace enforces (default restricted).
	PodSecurity string
	// Samples per stream (two streams: MDS and Parquet).
	Samples         int
	NumSplits       int
	GlobalBatchSize int
	BlockSize       int
	// Extra spec lines, e.g. "  onCorruptShard: skip\n".
	Extra string
	// TextFilter, if set, is the Parquet stream's row filter (its
	// selection is indexed with the data).
	TextFilter string
	// Endpoint the dataset reads from instead of MinIO's (a proxy).
	Endpoint string
	// PackLength, if set, packs both streams' token lists into sequences
	// of that many tokens (spec.packing); their packs are counted with the
	// data.
	PackLength int
	// CommitEvery is the trainers' commit interval in steps.
	CommitEvery int
	// StepTime is the trainers' time per step.
	StepTime time.Duration
	// LeRobot, if set, is a LeRobot dataset's folder (v3.0, written by
	// LeRobot's own writer): the dataset is that one stream, indexed here
	// and read with LeRobotWindows, its cameras decoded by the sidecar.
	LeRobot        string
	LeRobotWindows string
	// IndexInCluster, if set, makes the dataset's streams a Parquet and a
	// JSON Lines stream of one sample per object, with no index: the
	// operator indexes them (spec.index with these pods and concurrency),
	// and NewEnv does not wait for the dataset to be Ready.
	IndexInCluster *IndexInCluster
}

// IndexInCluster is spec.index of a story's dataset.
type IndexInCluster struct {
	Parallelism, Concurrency int
	// LinesFilter is the JSON Lines stream's row filter, if set: its
	// selection is measured by the Measure and Join Jobs.
	LinesFilter string
}

// Env is one story on the cluster: a namespace with the MinIO credentials,
// a dataset of two streams in its own bucket, and the trainers' directory
// (records and barrier) on the node.
type Env struct {
	*Cluster
	NS     string
	Bucket string
	ds     DatasetOptions
	// dir is mounted by the trainers at /e2e.
	dir string
	// manifest is the dataset's YAML, for `shardfeed plan`.
	manifest string
	obj      datav1alpha1.TrainingDataset
	// job is the shardfeed.io/job of the story's Jobs ("": jobName), and
	// sub the trainers' directory under dir ("": dir itself).
	job, sub string
}

// ForJob is the story's env for another job of its dataset: its Jobs are
// named after it, and its trainers record under their own directory.
func (e *Env) ForJob(name string) (*Env, error) {
	o := *e
	o.job, o.sub = name, name
	dir := filepath.Join(e.dir, name)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, err
	}
	return &o, os.Chmod(dir, 0o777)
}

// jobName is the env's shardfeed.io/job.
func (e *Env) jobName() string { return cmp.Or(e.job, jobName) }

// recordsDir is where the env's trainers write their records.
func (e *Env) recordsDir() string { return filepath.Join(e.dir, e.sub, "records") }

// NewEnv writes the data, (re)creates namespace ns with the credentials
// Secret and applies the TrainingDataset, and waits until it is Ready.
func (c *Cluster) NewEnv(ctx context.Context, ns string, o DatasetOptions) (*Env, error) {
	e := &Env{Cluster: c, NS: ns, Bucket: ns + "-data", ds: o, dir: filepath.Join(c.work, ns)}
	if err := os.MkdirAll(e.dir, 0o777); err != nil {
		return nil, err
	}
	if err := os.Chmod(e.dir, 0o777); err != nil {
		return nil, err
	}
	if err := c.MinIO.Client.MakeBucket(ctx, e.Bucket, minio.MakeBucketOptions{Region: c.MinIO.Region}); err != nil {
		return nil, err
	}
	if o.IndexInCluster != nil {
		if err := e.unindexedData(ctx); err != nil {
			return nil, err
		}
		return e, e.apply(ctx)
	}
	if o.LeRobot != "" {
		if err := e.lerobotData(ctx); err != nil {
			return nil, err
		}
		return e, e.applyAndWait(ctx)
	}
	mdsDir, pqDir := filepath.Join(e.dir, "data", "tokens"), filepath.Join(e.dir, "data", "text")
	if err := sampledata.MDS(mdsDir, "tokens", o.Samples, 4<<10, ""); err != nil {
		return nil, err
	}
	if err := sampledata.Parquet(ctx, pqDir, "text", o.Samples, max(o.Samples/4, 1), 50); err != nil {
		return nil, err
	}
	if o.TextFilter != "" {
		if out, err := c.Cmd(ctx, "shardfeed", "index", "file://"+pqDir+"/", "--format", "parquet", "--filter", o.TextFilter); err != nil {
			return nil, fmt.Errorf("indexing the text stream's filter: %w\n%s", err, out)
		}
	}
	if o.PackLength > 0 {
		for _, st := range [][2]string{{mdsDir, "mds"}, {pqDir, "parquet"}} {
			if out, err := c.Cmd(ctx, "shardfeed", "index", "file://"+st[0]+"/", "--format", st[1], "--selection-only",
				"--lengths", "tokens", "--pack-length", strconv.Itoa(o.PackLength)); err != nil {
				return nil, fmt.Errorf("counting the packs of %s: %w\n%s", st[0], err, out)
			}
		}
	}
	if err := c.upload(ctx, mdsDir, e.Bucket, "tokens/"); err != nil {
		return nil, err
	}
	if err := c.upload(ctx, pqDir, e.Bucket, "text/"); err != nil {
		return nil, err
	}
	return e, e.applyAndWait(ctx)
}

// applyAndWait applies the env's TrainingDataset and waits until it is
// Ready.
func (e *Env) applyAndWait(ctx context.Context) error {
	if err := e.apply(ctx); err != nil {
		return err
	}
	ds := &e.obj
	if err := WaitFor(ctx, 2*time.Minute, "the dataset to be Ready", func() (bool, error) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(ds), ds); err != nil {
			return false, err
		}
		cond := meta.FindStatusCondition(ds.Status.Conditions, "Ready")
		return cond != nil && cond.Status == metav1.ConditionTrue, nil
	}); err != nil {
		return fmt.Errorf("%w (status %+v)", err, ds.Status)
	}
	return nil
}

// lerobotData copies the LeRobot dataset into the env's folder, indexes
// it (shardfeed index --format lerobot) and uploads both to robot/.
func (e *Env) lerobotData(ctx context.Context) error {
	dir := filepath.Join(e.dir, "data", "robot")
	if err := os.CopyFS(dir, os.DirFS(e.ds.LeRobot)); err != nil {
		return err
	}
	if out, err := e.Cmd(ctx, "shardfeed", "index", "file://"+dir+"/", "--format", "lerobot"); err != nil {
		return fmt.Errorf("indexing the LeRobot dataset: %w\n%s", err, out)
	}
	return e.upload(ctx, dir, e.Bucket, "robot/")
}

// apply (re)creates the env's namespace with the credentials Secret and
// the records' volume, and applies the TrainingDataset.
func (e *Env) apply(ctx context.Context) error {
	c, ns, o := e.Cluster, e.NS, e.ds
	// A namespace left by an earlier run on a kept cluster goes first.
	if err := c.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err == nil {
		c.Detail("removing namespace %s of an earlier run", ns)
	}
	if err := WaitFor(ctx, 3*time.Minute, "namespace "+ns+" of an earlier run to go", func() (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}); err != nil {
		return err
	}
	// The "restricted" Pod Security level is enforced: the injected pods
	// must pass it (the hardening issue's acceptance).
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": cmp.Or(o.PodSecurity, "restricted"), "pod-security.kubernetes.io/enforce-version": "latest"}}}); err != nil {
		return err
	}
	if err := e.recordsVolume(ctx); err != nil {
		return err
	}
	if err := c.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: ns},
		StringData: map[string]string{"AWS_ACCESS_KEY_ID": c.MinIO.AccessKey, "AWS_SECRET_ACCESS_KEY": c.MinIO.SecretKey}}); err != nil {
		return err
	}
	if o.IndexInCluster != nil {
		// The index's writer: MinIO's one user here, a Secret of its own
		// all the same (the sidecars never mount it).
		if err := c.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: indexWriterSecret, Namespace: ns},
			StringData: map[string]string{"AWS_ACCESS_KEY_ID": c.MinIO.AccessKey, "AWS_SECRET_ACCESS_KEY": c.MinIO.SecretKey}}); err != nil {
			return err
		}
	}
	manifest := sampledata.Manifest(datasetName, e.streams(), e.spec())
	e.manifest = filepath.Join(e.dir, "dataset.yaml")
	if err := os.WriteFile(e.manifest, []byte(manifest), 0o600); err != nil {
		return err
	}
	ds := &e.obj
	if err := yaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096).Decode(ds); err != nil {
		return err
	}
	ds.Namespace = ns
	for i := range ds.Spec.Streams {
		ds.Spec.Streams[i].Source.CredentialsSecretRef = &datav1alpha1.SecretReference{Name: secretName}
	}
	return c.Client.Create(ctx, ds)
}

// Dataset returns the TrainingDataset as last read.
func (e *Env) Dataset(ctx context.Context) (*datav1alpha1.TrainingDataset, error) {
	err := e.Client.Get(ctx, client.ObjectKeyFromObject(&e.obj), &e.obj)
	return &e.obj, err
}

// streams of the dataset: the same sample count in two formats.
func (e *Env) streams() []sampledata.Stream {
	ep := e.ds.Endpoint
	if ep == "" {
		ep = e.MinIO.URL()
	}
	if x := e.ds.IndexInCluster; x != nil {
		linesFilter := ""
		if x.LinesFilter != "" {
			linesFilter = fmt.Sprintf("filter: %q", x.LinesFilter)
		}
		return []sampledata.Stream{
			{Name: "text", URI: "s3://" + e.Bucket + "/text/", Format: "parquet", Endpoint: ep, Extra: `columns: ["id", "text"]`},
			{Name: "lines", URI: "s3://" + e.Bucket + "/lines/", Format: "jsonl", Endpoint: ep, Extra: linesFilter},
		}
	}
	if e.ds.LeRobot != "" {
		return []sampledata.Stream{{Name: "robot", URI: "s3://" + e.Bucket + "/robot/", Format: "lerobot", Endpoint: ep, Extra: e.ds.LeRobotWindows}}
	}
	columns := `columns: ["id", "text"]`
	if e.ds.PackLength > 0 { // a packed dataset serves its packs' columns
		columns = ""
	}
	return []sampledata.Stream{
		{Name: "tokens", URI: "s3://" + e.Bucket + "/tokens/", Format: "mds", Endpoint: ep, Extra: columns},
		{Name: "text", URI: "s3://" + e.Bucket + "/text/", Format: "parquet", Endpoint: ep, Extra: columns + e.filterLine()},
	}
}

// filterLine is the text stream's filter as a manifest line, if it has one.
func (e *Env) filterLine() string {
	if e.ds.TextFilter == "" {
		return ""
	}
	return fmt.Sprintf("\n    filter: %q", e.ds.TextFilter)
}

func (e *Env) spec() string {
	packing := ""
	if e.ds.PackLength > 0 {
		packing = fmt.Sprintf("  packing: {column: tokens, sequenceLength: %d}\n", e.ds.PackLength)
	}
	if x := e.ds.IndexInCluster; x != nil {
		packing += fmt.Sprintf("  index: {writeCredentialsSecretRef: {name: %s}, parallelism: %d, concurrency: %d}\n", indexWriterSecret, x.Parallelism, x.Concurrency)
	}
	return fmt.Sprintf("  numSplits: %d\n  globalBatchSize: %d\n  shuffle: {seed: 7, blockSize: %d}\n%s%s",
		e.ds.NumSplits, e.ds.GlobalBatchSize, max(e.ds.BlockSize, 1), e.ds.Extra, packing)
}

// PodsOf lists the pods of a Job.
func (e *Env) PodsOf(ctx context.Context, job string) ([]corev1.Pod, error) {
	var list corev1.PodList
	err := e.Client.List(ctx, &list, client.InNamespace(e.NS), client.MatchingLabels{"job-name": job})
	return list.Items, err
}

// recordsVolume binds the claim the trainers mount at /e2e to the node
// directory e.dir: a hostPath volume in the pod itself is not allowed at
// the restricted level, a claim is (the volume is the admin's).
func (e *Env) recordsVolume(ctx context.Context) error {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "shardfeed-" + e.NS + "-records"}}
	if err := e.Client.Delete(ctx, pv); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err := WaitFor(ctx, time.Minute, "PersistentVolume "+pv.Name+" of an earlier run to go", func() (bool, error) {
		err := e.Client.Get(ctx, client.ObjectKeyFromObject(pv), &corev1.PersistentVolume{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}); err != nil {
		return err
	}
	capacity := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	pv.Spec = corev1.PersistentVolumeSpec{Capacity: capacity, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
		PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain, StorageClassName: "",
		PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: e.dir}},
		ClaimRef:               &corev1.ObjectReference{Namespace: e.NS, Name: recordsClaim}}
	if err := e.Client.Create(ctx, pv); err != nil {
		return err
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: recordsClaim, Namespace: e.NS}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, StorageClassName: ptr.To(""), VolumeName: pv.Name,
		Resources: corev1.VolumeResourceRequirements{Requests: capacity}}}
	return e.Client.Create(ctx, pvc)
}

// recordsClaim is the trainers' claim on the records directory.
const recordsClaim = "e2e-records"

// Dir is the story's directory on the node: the trainers' records and
// barrier, the dataset's files (data/) and manifest.
func (e *Env) Dir() string { return e.dir }

// PlannedIDs returns the ids of every global batch of epoch 0 for world
// pods: step → ids, rank by rank.
func (e *Env) PlannedIDs(ctx context.Context, world int) (map[int64][]int64, error) {
	plan, _, err := e.planIDs(ctx, world)
	if err != nil {
		return nil, err
	}
	steps := map[int64][]int64{}
	for k, line := range plan {
		steps[k[0]] = append(steps[k[0]], line.IDs...)
	}
	return steps, nil
}

// SidecarLogs returns the logs of the sidecars of job's pods, the current
// and the previous container of each.
func (e *Env) SidecarLogs(ctx context.Context, job *batchv1.Job) (string, error) {
	pods, err := e.PodsOf(ctx, job.Name)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, p := range pods {
		for _, prev := range []string{"--previous=false", "--previous=true"} {
			out, _ := e.Cmd(ctx, "kubectl", "logs", "-n", e.NS, p.Name, "-c", inject.SidecarName, prev)
			b.WriteString(out)
		}
	}
	return b.String(), nil
}

// unindexedData writes the samples of the in-cluster indexing story's
// streams, one object each, with no index: "text" as Parquet objects of
// one row, "lines" as JSON Lines objects of one line.
func (e *Env) unindexedData(ctx context.Context) error {
	pqDir, jsonlDir := filepath.Join(e.dir, "data", "text"), filepath.Join(e.dir, "data", "lines")
	if err := sampledata.Parquet(ctx, pqDir, "text", e.ds.Samples, 1, 1); err != nil {
		return err
	}
	// sampledata indexes what it writes: the operator is to.
	if err := os.RemoveAll(filepath.Join(pqDir, "_shardfeed")); err != nil {
		return err
	}
	if err := os.MkdirAll(jsonlDir, 0o755); err != nil {
		return err
	}
	for i := range int64(e.ds.Samples) {
		line, err := json.Marshal(map[string]any{"id": i, "text": sampledata.Text("lines", i)})
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(jsonlDir, fmt.Sprintf("part-%05d.jsonl", i)), append(line, '\n'), 0o644); err != nil {
			return err
		}
	}
	if err := e.upload(ctx, pqDir, e.Bucket, "text/"); err != nil {
		return err
	}
	return e.upload(ctx, jsonlDir, e.Bucket, "lines/")
}

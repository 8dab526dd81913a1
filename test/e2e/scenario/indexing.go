package scenario

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index/sidefile"
	"github.com/shardfeed/shardfeed/internal/indexjob"
	"github.com/shardfeed/shardfeed/internal/testenv"
)

// indexingNamespace is the in-cluster indexing story's namespace.
const indexingNamespace = "e2e-indexing"

// indexingDelay is the slow proxy's delay while the parts are indexed:
// enough for a part to report its progress before one of its pods is
// killed.
const indexingDelay = 50 * time.Millisecond

// linesFilter is the JSON Lines stream's filter: two samples in three.
const linesFilter = "id % 3 != 0"

// IndexingReport is what the in-cluster indexing story found.
type IndexingReport struct {
	Lineage
	// Objects is each stream's objects as the operator's listing found
	// them; Parts the pods that indexed them.
	Objects map[string]int64
	Parts   int32
	// KilledPod is the parts pod deleted midway, KilledAt its stream's
	// objects indexed then, Replaced whether the Job ran its part again.
	KilledPod string
	KilledAt  int64
	Replaced  bool
	// Progress are the status.indexing lines seen while it ran; Indexed
	// status.indexed once Ready.
	Progress []string
	Indexed  string
	// SameAsCLI says, per stream, whether the Jobs' index is byte for
	// byte the one `shardfeed index` writes of the same objects.
	SameAsCLI map[string]bool
	// Samples is the dataset's samples per epoch once Ready.
	Samples int64
	// Measured is the parts the lines' Measure Job completed.
	Measured int32
}

// RunIndexing plays the in-cluster indexing story: a dataset with
// spec.index over a bucket of Parquet and JSON Lines objects with no
// index (kubectl apply alone), indexed by the operator's Jobs through a
// slow store, a parts pod killed midway; then Ready, a job of 2 pods
// trains it exactly once, and the index equals the CLI's byte for byte.
func RunIndexing(ctx context.Context, o Options) (*IndexingReport, error) {
	c, err := NewCluster(o.withDefaults())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	rep := &IndexingReport{Objects: map[string]int64{}, SameAsCLI: map[string]bool{}}
	c.Step("Installing the operator with Helm (image %s); MinIO and a slow proxy in front of it", OperatorImage)
	if err := c.InstallOperator(ctx); err != nil {
		return rep, err
	}
	if err := c.StartMinIO(ctx); err != nil {
		return rep, err
	}
	proxy, err := testenv.NewSlowProxy(c.o.NodeIP, c.MinIO.Endpoint, indexingDelay)
	if err != nil {
		return rep, err
	}
	defer proxy.Close()
	return rep, c.indexingStory(ctx, proxy, rep)
}

func (c *Cluster) indexingStory(ctx context.Context, proxy *testenv.SlowProxy, rep *IndexingReport) error {
	const parts = 3
	c.Step("kubectl apply: TrainingDataset %q in %s with spec.index (%d pods, 1 object at a time each) over %d Parquet and %d JSON Lines objects with no index, through the proxy (%s a response)",
		datasetName, indexingNamespace, parts, c.o.Samples, c.o.Samples, indexingDelay)
	e, err := c.NewEnv(ctx, indexingNamespace, DatasetOptions{Samples: c.o.Samples, NumSplits: numSplits, GlobalBatchSize: globalBatch,
		BlockSize: 256, CommitEvery: commitEvery, StepTime: c.o.StepTime, Endpoint: "http://" + proxy.Addr,
		IndexInCluster: &IndexInCluster{Parallelism: parts, Concurrency: 1, LinesFilter: linesFilter}})
	if err != nil {
		return err
	}
	ds, err := e.Dataset(ctx)
	if err != nil {
		return err
	}
	// The parts of the Parquet stream running, one of its pods goes once
	// its stream reported progress.
	partsJob := indexjob.JobName(datasetName, "text", indexjob.Parts)
	var victim corev1.Pod
	if err := WaitFor(ctx, 4*time.Minute, "the text stream's parts to report progress", func() (bool, error) {
		if _, err := e.Dataset(ctx); err != nil {
			return false, err
		}
		rep.progress(ds)
		x := indexingOf(ds, "text")
		if x.Phase != datav1alpha1.IndexingParts || x.ObjectsRead == 0 {
			return false, nil
		}
		pods, err := e.PodsOf(ctx, partsJob)
		if err != nil {
			return false, err
		}
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				victim, rep.KilledAt = p, x.ObjectsRead
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		return fmt.Errorf("%w (status %+v)", err, ds.Status)
	}
	index := victim.Annotations[batchv1.JobCompletionIndexAnnotation]
	rep.KilledPod = victim.Name
	c.Step("Deleting indexing pod %s (part %s) at %d objects indexed of the text stream", victim.Name, index, rep.KilledAt)
	if err := e.Client.Delete(ctx, &victim, client.GracePeriodSeconds(0)); err != nil {
		return err
	}
	if err := WaitFor(ctx, 2*time.Minute, "another pod for part "+index, func() (bool, error) {
		pods, err := e.PodsOf(ctx, partsJob)
		for _, p := range pods {
			if p.UID != victim.UID && p.Annotations[batchv1.JobCompletionIndexAnnotation] == index {
				return true, err
			}
		}
		return false, err
	}); err != nil {
		return err
	}
	rep.Replaced = true
	c.Detail("the Job runs part %s again; it goes on from the objects indexed", index)
	proxy.SetDelay(0)
	if err := WaitFor(ctx, 5*time.Minute, "the dataset to be Ready", func() (bool, error) {
		if _, err := e.Dataset(ctx); err != nil {
			return false, err
		}
		rep.progress(ds)
		if c := meta.FindStatusCondition(ds.Status.Conditions, datav1alpha1.ConditionIndexResolved); c != nil && c.Reason == datav1alpha1.ReasonIndexingFailed {
			return false, errors.New(c.Message)
		}
		cond := meta.FindStatusCondition(ds.Status.Conditions, datav1alpha1.ConditionReady)
		return cond != nil && cond.Status == metav1.ConditionTrue, nil
	}); err != nil {
		return fmt.Errorf("%w (status %+v)", err, ds.Status)
	}
	rep.Indexed, rep.Samples = ds.Status.Indexed, ds.Status.Samples
	for _, line := range rep.Progress {
		c.Detail("%s", line)
	}
	table, _ := c.Cmd(ctx, "kubectl", "get", "tds", "-n", e.NS)
	for _, line := range strings.Split(strings.TrimSpace(table), "\n") {
		c.Detail("%s", line)
	}
	if err := c.sameAsCLI(ctx, e, rep); err != nil {
		return err
	}

	c.Step("A job of 2 pods trains the dataset the operator indexed")
	job, err := e.StartJob(ctx, 2)
	if err != nil {
		return err
	}
	if rep.Lineage, err = e.LineageOf(ctx, job, 5*time.Minute); err != nil {
		return err
	}
	c.Detail("%s", rep.Lineage.Summary())
	return nil
}

// progress keeps each new status.indexing line of ds.
func (r *IndexingReport) progress(ds *datav1alpha1.TrainingDataset) {
	for _, x := range ds.Status.Indexing {
		line := fmt.Sprintf("indexed %s: %s %s: %d/%d objects, %d/%d parts, %s, ETA %s", ds.Status.Indexed, x.Name, x.Phase, x.ObjectsRead, x.Objects,
			x.PartsDone, x.Parts, x.Rate, x.ETA)
		if !slices.Contains(r.Progress, line) {
			r.Progress = append(r.Progress, line)
		}
		if x.Objects > 0 {
			r.Objects[x.Name], r.Parts = x.Objects, x.Parts
		}
	}
}

// sameAsCLI indexes each stream again with `shardfeed index` on this
// machine, over the same objects, and compares its index with the one
// the Jobs wrote.
func (c *Cluster) sameAsCLI(ctx context.Context, e *Env, rep *IndexingReport) error {
	c.Step("Indexing both streams again with shardfeed index here (the lines' filter too): the same index and selection, byte for byte")
	for _, s := range []struct{ name, format, filter string }{{"text", "parquet", ""}, {"lines", "jsonl", linesFilter}} {
		keys := []string{s.name + "/_shardfeed/index.json"}
		args := []string{"index", "s3://" + e.Bucket + "/" + s.name + "/", "--format", s.format, "--endpoint", c.MinIO.URL(), "--insecure"}
		if s.filter != "" {
			index, runs := sidefile.FilterObjects(s.filter)
			keys = append(keys, s.name+"/"+index, s.name+"/"+runs)
			args = append(args, "--filter", s.filter)
		}
		jobs := map[string][]byte{}
		for _, key := range keys {
			b, err := c.object(ctx, e.Bucket, key)
			if err != nil {
				return fmt.Errorf("the Jobs' %s: %w", key, err)
			}
			jobs[key] = b
		}
		if out, err := c.Cmd(ctx, "shardfeed", args...); err != nil {
			return fmt.Errorf("%w\n%s", err, out)
		}
		rep.SameAsCLI[s.name] = true
		for _, key := range keys {
			one, err := c.object(ctx, e.Bucket, key)
			if err != nil {
				return err
			}
			same := bytes.Equal(jobs[key], one)
			rep.SameAsCLI[s.name] = rep.SameAsCLI[s.name] && same
			c.Detail("%s: %d bytes, the same: %v", key, len(jobs[key]), same)
		}
	}
	measure := &batchv1.Job{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: e.NS, Name: indexjob.JobName(datasetName, "lines", indexjob.Measure)}, measure); err != nil {
		return fmt.Errorf("the lines' Measure Job: %w", err)
	}
	rep.Measured = measure.Status.Succeeded
	c.Detail("the lines' selection was measured by Job %s in %d parts", measure.Name, measure.Status.Succeeded)
	return nil
}

// object reads an object of MinIO.
func (c *Cluster) object(ctx context.Context, bucket, key string) ([]byte, error) {
	obj, err := c.MinIO.Client.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, err
	}
	defer func() { _ = obj.Close() }()
	return io.ReadAll(obj)
}

// indexingOf is stream's entry in status.indexing (zero if none).
func indexingOf(ds *datav1alpha1.TrainingDataset, stream string) datav1alpha1.StreamIndexing {
	for _, x := range ds.Status.Indexing {
		if x.Name == stream {
			return x
		}
	}
	return datav1alpha1.StreamIndexing{}
}

// Summary says what the story found in a line.
func (r *IndexingReport) Summary() string {
	objects := make([]string, 0, len(r.Objects))
	for name, n := range r.Objects {
		objects = append(objects, name+" "+strconv.FormatInt(n, 10))
	}
	return fmt.Sprintf("objects %s in %d parts; killed %s at %d, replaced %v; indexed %s; the lines' selection measured in %d parts; same as the CLI %v; %s",
		strings.Join(objects, ", "), r.Parts, r.KilledPod, r.KilledAt, r.Replaced, r.Indexed, r.Measured, r.SameAsCLI, r.Lineage.Summary())
}

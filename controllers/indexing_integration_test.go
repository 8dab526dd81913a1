//go:build integration

package controllers_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/minio/minio-go/v7"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/controllers"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/indexjob"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/internal/testenv"
)

var (
	cliOnce sync.Once
	cli     string
	cliErr  error
)

// shardfeedCLI builds the shardfeed command the indexing pods run (the
// operator links no decoder, so its tests cannot run it in-process).
func shardfeedCLI(t *testing.T) string {
	t.Helper()
	cliOnce.Do(func() {
		root, err := testenv.RepoRoot()
		if err != nil {
			cliErr = err
			return
		}
		dir, err := os.MkdirTemp("", "shardfeed-cli-")
		if err != nil {
			cliErr = err
			return
		}
		cli = filepath.Join(dir, "shardfeed")
		cmd := exec.Command("go", "build", "-o", cli, "./cmd/shardfeed")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			cliErr = fmt.Errorf("building shardfeed: %w\n%s", err, out)
		}
	})
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	return cli
}

// runJobPods runs what each pod of job would (or those of indexes only):
// its container's command, with its mounts (the manifest's ConfigMap, the
// Secrets) as folders.
func runJobPods(t *testing.T, job *batchv1.Job, indexes ...int32) {
	t.Helper()
	if _, err := tryJobPods(t, job, indexes...); err != nil {
		t.Fatal(err)
	}
}

// tryJobPods is runJobPods, returning what the pods printed, and the
// first one's failure.
func tryJobPods(t *testing.T, job *batchv1.Job, indexes ...int32) (string, error) {
	t.Helper()
	var said strings.Builder
	ctx := context.Background()
	dir := t.TempDir()
	pod := job.Spec.Template.Spec
	mounts := map[string]string{} // container path → folder here
	for _, m := range pod.Containers[0].VolumeMounts {
		mounts[m.MountPath] = filepath.Join(dir, m.Name)
		for _, v := range pod.Volumes {
			if v.Name != m.Name {
				continue
			}
			data := map[string][]byte{}
			switch {
			case v.ConfigMap != nil:
				var cm corev1.ConfigMap
				if err := apiServer.Client.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: v.ConfigMap.Name}, &cm); err != nil {
					t.Fatal(err)
				}
				for k, s := range cm.Data {
					data[k] = []byte(s)
				}
			case v.Secret != nil:
				var s corev1.Secret
				if err := apiServer.Client.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: v.Secret.SecretName}, &s); err != nil {
					t.Fatal(err)
				}
				data = s.Data
			}
			if err := os.MkdirAll(mounts[m.MountPath], 0o700); err != nil {
				t.Fatal(err)
			}
			for k, b := range data {
				if err := os.WriteFile(filepath.Join(mounts[m.MountPath], k), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// The streams' Secrets are one folder each under the credentials dir.
	creds := filepath.Join(dir, "credentials-root")
	for path, folder := range mounts {
		if name, ok := strings.CutPrefix(path, sidecarconfig.CredentialsDir+"/"); ok {
			if err := os.MkdirAll(creds, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(folder, filepath.Join(creds, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(indexes) == 0 {
		for k := range *job.Spec.Completions {
			indexes = append(indexes, k)
		}
	}
	for _, k := range indexes {
		var args []string
		for _, a := range pod.Containers[0].Args {
			a = strings.ReplaceAll(a, "$(JOB_COMPLETION_INDEX)", strconv.Itoa(int(k)))
			if a == sidecarconfig.CredentialsDir {
				a = creds
			} else {
				for path, folder := range mounts {
					if rest, ok := strings.CutPrefix(a, path); ok && (rest == "" || rest[0] == '/') && path != "/tmp" {
						a = folder + rest
						break
					}
				}
			}
			args = append(args, a)
		}
		cmd := exec.Command(shardfeedCLI(t), args...)
		cmd.Env = os.Environ()
		for _, e := range pod.Containers[0].Env {
			cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
		}
		out, err := cmd.CombinedOutput()
		said.Write(out)
		if err != nil {
			return said.String(), fmt.Errorf("pod %d of %s: shardfeed %s: %w\n%s", k, job.Name, strings.Join(args, " "), err, out)
		}
	}
	return said.String(), nil
}

// finishJob sets the Job's status as the Job controller would when its
// pods ended (no kube-controller-manager runs here).
func finishJob(t *testing.T, job *batchv1.Job, failed bool) {
	t.Helper()
	now := metav1.Now()
	job.Status.StartTime = &now
	if failed {
		job.Status.Failed = 1
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded, LastTransitionTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded, LastTransitionTime: now},
		}
	} else {
		job.Status.Succeeded = *job.Spec.Completions
		job.Status.CompletionTime = &now
		job.Status.CompletedIndexes = fmt.Sprintf("0-%d", *job.Spec.Completions-1)
		if *job.Spec.Completions == 1 {
			job.Status.CompletedIndexes = "0"
		}
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonCompletionsReached, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonCompletionsReached, LastTransitionTime: now},
		}
	}
	if err := apiServer.Client.Status().Update(context.Background(), job); err != nil {
		t.Fatal(err)
	}
}

// waitJob waits for the Job of name in ns.
func waitJob(t *testing.T, ns, name string) *batchv1.Job {
	t.Helper()
	var job batchv1.Job
	for deadline := time.Now().Add(60 * time.Second); ; {
		err := apiServer.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &job)
		if err == nil {
			return &job
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Job %s: %v", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// indexingDataset is the dataset "web" in ns over bucket's JSON Lines
// objects under web/, indexed by the operator in parts.
func indexingDataset(t *testing.T, ns, bucket string, parts int32, change ...func(*datav1alpha1.TrainingDataset)) *datav1alpha1.TrainingDataset {
	t.Helper()
	credentialsSecret(t, ns, "minio", minioServer.AccessKey, minioServer.SecretKey)
	credentialsSecret(t, ns, "index-writer", minioServer.AccessKey, minioServer.SecretKey)
	ds := dataset(ns, "s3://"+bucket+"/web/", "minio", 2, 10)
	ds.Spec.Streams[0].Format = datav1alpha1.FormatJSONL
	ds.Spec.Index = &datav1alpha1.IndexJob{WriteCredentialsSecretRef: datav1alpha1.SecretReference{Name: "index-writer"}, Parallelism: ptr.To(parts)}
	for _, c := range change {
		c(ds)
	}
	if err := apiServer.Client.Create(context.Background(), ds); err != nil {
		t.Fatal(err)
	}
	return ds
}

// jsonlObject is the i-th JSON Lines object putJSONL writes: 30 + 17·i
// records.
func jsonlObject(i int) string {
	var b strings.Builder
	for j := range 30 + 17*i {
		fmt.Fprintf(&b, "{\"id\": %d, \"text\": %q}\n", i*1000+j, strings.Repeat("x", j%13))
	}
	return b.String()
}

func jsonlSize(i int) int { return len(jsonlObject(i)) }

// putJSONL writes objects JSON Lines objects under prefix/ of bucket.
func putJSONL(t *testing.T, bucket, prefix string, objects int) {
	t.Helper()
	for i := range objects {
		data := jsonlObject(i)
		if _, err := minioServer.Client.PutObject(context.Background(), bucket, fmt.Sprintf("%s/part-%02d.jsonl", prefix, i), strings.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// A dataset with spec.index over streams with no index indexes itself:
// the operator runs each stream's list, parts and merge Jobs in turn
// (the streams at once), each after the one before completed, saying
// where it is in the conditions and in status.indexing (the listing's
// totals, the parts' progress); a Job gone before the next phase's
// completed (ttlSecondsAfterFinished) is not run again; the index they
// write is the one a single shardfeed index writes, and the dataset is
// planned over it.
func TestIntegrationADatasetWithSpecIndexIsIndexedByItsJobs(t *testing.T) {
	// The platform lists MinIO's address: the operator's reads and the
	// pods' (given the policy in their environment) are checked against it.
	startManagerLogging(t, logr.Discard(), func(r *controllers.TrainingDatasetReconciler) {
		r.Policy.AllowedEndpoints = []string{minioServer.Endpoint}
	})
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	bucket := minioServer.Bucket(t)
	putJSONL(t, bucket, "web", 7)
	putJSONL(t, bucket, "more", 3)
	ds := indexingDataset(t, ns, bucket, 3, func(ds *datav1alpha1.TrainingDataset) {
		second := ds.Spec.Streams[0]
		second.Name, second.Source.URI = "n", "s3://"+bucket+"/more/"
		ds.Spec.Streams = append(ds.Spec.Streams, second)
	})
	key := client.ObjectKeyFromObject(ds)
	var listed datav1alpha1.StreamIndexing
	for _, phase := range []indexjob.Phase{indexjob.List, indexjob.Parts, indexjob.Merge} {
		job := waitJob(t, ns, indexjob.JobName(ds.Name, "m", phase))
		other := waitJob(t, ns, indexjob.JobName(ds.Name, "n", phase))
		got := waitFor(t, key, "indexing "+string(phase), func(d *datav1alpha1.TrainingDataset) bool {
			c := condition(d, datav1alpha1.ConditionIndexResolved)
			return c != nil && c.Reason == datav1alpha1.ReasonIndexing && strings.Contains(c.Message, job.Name) && strings.Contains(c.Message, other.Name)
		})
		if ready := condition(got, datav1alpha1.ConditionReady); ready == nil || ready.Status != metav1.ConditionFalse {
			t.Fatalf("%s: Ready is %+v while indexing", phase, ready)
		}
		if want := map[indexjob.Phase]int32{indexjob.List: 1, indexjob.Parts: 3, indexjob.Merge: 1}[phase]; *job.Spec.Completions != want {
			t.Fatalf("the %s Job runs %d pods, want %d", phase, *job.Spec.Completions, want)
		}
		if env := job.Spec.Template.Spec.Containers[0].Env; !slices.Contains(env, corev1.EnvVar{Name: sidecarconfig.EnvAllowedEndpoints, Value: minioServer.Endpoint}) {
			t.Fatalf("the %s Job's pods are not given the platform's endpoints: %v", phase, env)
		}
		switch phase {
		case indexjob.List:
			if got.Status.Indexed != "0/2" || len(got.Status.Indexing) != 2 || got.Status.Indexing[0].Phase != datav1alpha1.IndexingListing {
				t.Fatalf("listing: status.indexed %q, status.indexing %+v", got.Status.Indexed, got.Status.Indexing)
			}
			// A parallelism changed once the listing began changes
			// nothing: the parts are those it cuts.
			var now datav1alpha1.TrainingDataset
			if err := apiServer.Client.Get(ctx, key, &now); err != nil {
				t.Fatal(err)
			}
			now.Spec.Index.Parallelism = ptr.To(int32(5))
			if err := apiServer.Client.Update(ctx, &now); err != nil {
				t.Fatal(err)
			}
		case indexjob.Parts:
			listed = indexingOf(got, "m")
			var want int64
			for i := range 7 {
				want += int64(jsonlSize(i))
			}
			if listed.Phase != datav1alpha1.IndexingParts || listed.Objects != 7 || listed.Bytes != want || listed.Parts != 3 || listed.StartTime == nil {
				t.Fatalf("indexing the parts, the status says %+v: want 7 objects of %d bytes in 3 parts", listed, want)
			}
			if n := indexingOf(got, "n"); n.Objects != 3 || n.Phase != datav1alpha1.IndexingParts {
				t.Fatalf("the second stream's indexing says %+v: want its 3 objects, indexing at once", n)
			}
			// The listing Job gone (its ttlSecondsAfterFinished) is not
			// listed again: the parts need it no more.
			list := waitJob(t, ns, indexjob.JobName(ds.Name, "m", indexjob.List))
			if err := apiServer.Client.Delete(ctx, list, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
				t.Fatal(err)
			}
			// One part indexed: its progress reaches the status.
			runJobPods(t, job, 1)
			got = waitFor(t, key, "the progress of part 1", func(d *datav1alpha1.TrainingDataset) bool {
				return indexingOf(d, "m").ObjectsRead > 0
			})
			part := indexingOf(got, "m")
			if part.ObjectsRead >= 7 || part.BytesRead <= 0 || part.BytesRead >= listed.Bytes || got.Status.Indexed == "0/2" {
				t.Fatalf("one part of three indexed, the status says %+v (indexed %q)", part, got.Status.Indexed)
			}
			runJobPods(t, job, 0, 2)
			runJobPods(t, other)
			finishJob(t, job, false)
			finishJob(t, other, false)
			if j := (&batchv1.Job{}); apiServer.Client.Get(ctx, client.ObjectKeyFromObject(list), j) == nil && j.UID != list.UID {
				t.Fatal("the listing was created again after its Job went")
			}
			continue
		}
		runJobPods(t, job)
		runJobPods(t, other)
		finishJob(t, job, false)
		finishJob(t, other, false)
	}
	got := waitFor(t, key, "Ready", func(d *datav1alpha1.TrainingDataset) bool {
		c := condition(d, datav1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	var want int64
	for i := range 7 {
		want += int64(30 + 17*i)
	}
	for i := range 3 {
		want += int64(30 + 17*i)
	}
	if got.Status.Samples != want {
		t.Errorf("planned %d samples, want %d", got.Status.Samples, want)
	}
	if got.Status.Indexed != "2/2" || len(got.Status.Indexing) != 0 {
		t.Errorf("indexed, the status says %q and %+v", got.Status.Indexed, got.Status.Indexing)
	}
	waitEvent(t, ns, ds.Name, `stream "m" indexed by the operator: 7 objects`)
	for _, prefix := range []string{"web", "more"} {
		merged := indexBytes(t, bucket, prefix+"/_shardfeed/index.json")
		out, err := exec.Command(shardfeedCLI(t), "index", "s3://"+bucket+"/"+prefix+"/", "--format", "jsonl", "--endpoint", minioServer.URL(), "--insecure",
			"--credentials-dir", minioServer.CredentialsDir(t)).CombinedOutput()
		if err != nil {
			t.Fatalf("one run: %v\n%s", err, out)
		}
		if one := indexBytes(t, bucket, prefix+"/_shardfeed/index.json"); !bytes.Equal(merged, one) {
			t.Errorf("%s: the Jobs' index differs from one run's:\n jobs %.300s\n  one %.300s", prefix, merged, one)
		}
	}
	objs := minioServer.Client.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "web/_shardfeed/parts/", Recursive: true})
	for o := range objs {
		t.Errorf("the run's files stay after the merge: %s", o.Key)
	}
}

// indexingOf is stream's entry in status.indexing (zero if none).
func indexingOf(d *datav1alpha1.TrainingDataset, stream string) datav1alpha1.StreamIndexing {
	for _, x := range d.Status.Indexing {
		if x.Name == stream {
			return x
		}
	}
	return datav1alpha1.StreamIndexing{}
}

// A failed Job stops the indexing with a condition naming it and the fix;
// deleting it starts that step again. Suspended, no Job is created.
func TestIntegrationAFailedIndexingJobSaysSoAndASuspendedIndexWaits(t *testing.T) {
	startManager(t)
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	bucket := minioServer.Bucket(t)
	putJSONL(t, bucket, "web", 2)
	ds := indexingDataset(t, ns, bucket, 2)
	key := client.ObjectKeyFromObject(ds)
	job := waitJob(t, ns, indexjob.JobName(ds.Name, "m", indexjob.List))
	finishJob(t, job, true)
	got := waitFor(t, key, "IndexingFailed", func(d *datav1alpha1.TrainingDataset) bool {
		c := condition(d, datav1alpha1.ConditionIndexResolved)
		return c != nil && c.Reason == datav1alpha1.ReasonIndexingFailed
	})
	if msg := condition(got, datav1alpha1.ConditionIndexResolved).Message; !strings.Contains(msg, "kubectl logs -n "+ns+" job/"+job.Name) || !strings.Contains(msg, "delete the Job") {
		t.Errorf("the failure says %q: want the logs' command and the fix", msg)
	}
	if err := apiServer.Client.Get(ctx, key, ds); err != nil {
		t.Fatal(err)
	}
	ds.Spec.Index.Suspend = true
	if err := apiServer.Client.Update(ctx, ds); err != nil {
		t.Fatal(err)
	}
	if err := apiServer.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, key, "suspended", func(d *datav1alpha1.TrainingDataset) bool {
		c := condition(d, datav1alpha1.ConditionIndexResolved)
		return c != nil && strings.Contains(c.Message, "suspended")
	})
	var jobs batchv1.JobList
	if err := apiServer.Client.List(ctx, &jobs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if j.DeletionTimestamp == nil {
			t.Errorf("a suspended index has the Job %s", j.Name)
		}
	}
	if err := apiServer.Client.Get(ctx, key, ds); err != nil {
		t.Fatal(err)
	}
	ds.Spec.Index.Suspend = false
	if err := apiServer.Client.Update(ctx, ds); err != nil {
		t.Fatal(err)
	}
	if again := waitJob(t, ns, indexjob.JobName(ds.Name, "m", indexjob.List)); again.UID == job.UID {
		t.Error("the failed Job was kept, not created again")
	}
}

// indexBytes reads an object of bucket.
func indexBytes(t *testing.T, bucket, key string) []byte {
	t.Helper()
	obj, err := minioServer.Client.GetObject(context.Background(), bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = obj.Close() }()
	var b bytes.Buffer
	if _, err := b.ReadFrom(obj); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// waitEvent waits for an event of the dataset name in ns whose note holds
// note.
func waitEvent(t *testing.T, ns, name, note string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var events eventsv1.EventList
		if err := apiServer.Client.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, e := range events.Items {
			if e.Regarding.Name == name && strings.Contains(e.Note, note) {
				return
			}
		}
		if time.Now().After(deadline) {
			var notes []string
			for _, e := range events.Items {
				if e.Regarding.Name == name {
					notes = append(notes, e.Note)
				}
			}
			t.Fatalf("no event of %s saying %q; its events say %q", name, note, notes)
		}
	}
}

// The parts Job deleted midway is created again over the same run, and
// its parts done are not indexed again; an object changed since the
// listing fails its part, and the condition names the object and the fix.
func TestIntegrationADeletedPartsJobGoesOnAndAChangedObjectIsNamed(t *testing.T) {
	startManager(t)
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	bucket := minioServer.Bucket(t)
	putJSONL(t, bucket, "web", 6)
	ds := indexingDataset(t, ns, bucket, 3)
	key := client.ObjectKeyFromObject(ds)
	list := waitJob(t, ns, indexjob.JobName(ds.Name, "m", indexjob.List))
	runJobPods(t, list)
	finishJob(t, list, false)
	parts := waitJob(t, ns, indexjob.JobName(ds.Name, "m", indexjob.Parts))
	runJobPods(t, parts, 0)
	if err := apiServer.Client.Delete(ctx, parts, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	var again *batchv1.Job
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		again = waitJob(t, ns, parts.Name)
		if again.UID != parts.UID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the parts Job deleted was not created again")
		}
	}
	if indexjob.RunOf(again) != indexjob.RunOf(parts) {
		t.Fatalf("the parts Job made again indexes run %s, the listing's is %s", indexjob.RunOf(again), indexjob.RunOf(parts))
	}
	out, err := tryJobPods(t, again)
	if err != nil {
		t.Fatal(err)
	}
	// Part 0 was done before the Job went: skipped, not indexed again.
	if !strings.Contains(out, "part 0 of run "+indexjob.RunOf(again)+" is done already: skipped") {
		t.Fatalf("part 0, done before its Job went, ran again:\n%s", out)
	}
	finishJob(t, again, false)
	merge := waitJob(t, ns, indexjob.JobName(ds.Name, "m", indexjob.Merge))
	runJobPods(t, merge)
	finishJob(t, merge, false)
	waitFor(t, key, "Ready", func(d *datav1alpha1.TrainingDataset) bool {
		c := condition(d, datav1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue
	})

	// Another dataset's listing, then an object changed under its part.
	bucket2 := minioServer.Bucket(t)
	putJSONL(t, bucket2, "web", 4)
	ns2 := apiServer.Namespace(t)
	ds2 := indexingDataset(t, ns2, bucket2, 2)
	list2 := waitJob(t, ns2, indexjob.JobName(ds2.Name, "m", indexjob.List))
	runJobPods(t, list2)
	finishJob(t, list2, false)
	parts2 := waitJob(t, ns2, indexjob.JobName(ds2.Name, "m", indexjob.Parts))
	grown := jsonlObject(3) + jsonlObject(1)
	if _, err := minioServer.Client.PutObject(ctx, bucket2, "web/part-03.jsonl", strings.NewReader(grown), int64(len(grown)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := tryJobPods(t, parts2, 1); err == nil {
		t.Fatal("a part over an object changed since the listing was indexed")
	}
	finishJob(t, parts2, true)
	got := waitFor(t, client.ObjectKeyFromObject(ds2), "IndexingFailed naming the object", func(d *datav1alpha1.TrainingDataset) bool {
		c := condition(d, datav1alpha1.ConditionIndexResolved)
		return c != nil && c.Reason == datav1alpha1.ReasonIndexingFailed && strings.Contains(c.Message, "part-03.jsonl")
	})
	msg := condition(got, datav1alpha1.ConditionIndexResolved).Message
	for _, want := range []string{"part 1: ", "list the parts again", "delete the Job", "kubectl logs -n " + ns2} {
		if !strings.Contains(msg, want) {
			t.Errorf("the failure says %q: want %q in it", msg, want)
		}
	}
	if x := indexingOf(got, "m"); x.Phase != datav1alpha1.IndexingFailed {
		t.Errorf("status.indexing says %+v, want Failed", x)
	}
}

// runIndexing runs the Jobs of stream m's indexing of ds in turn, from
// the listing whose UID is not old's (a new one).
func runIndexing(t *testing.T, ds *datav1alpha1.TrainingDataset, old types.UID, phases ...indexjob.Phase) *batchv1.Job {
	t.Helper()
	var list *batchv1.Job
	for _, phase := range phases {
		var job *batchv1.Job
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			job = waitJob(t, ds.Namespace, indexjob.JobName(ds.Name, "m", phase))
			if phase != indexjob.List || job.UID != old && job.DeletionTimestamp == nil {
				break
			}
			if time.Now().After(deadline) {
				var now datav1alpha1.TrainingDataset
				_ = apiServer.Client.Get(context.Background(), client.ObjectKeyFromObject(ds), &now)
				t.Fatalf("no new %s Job (the one there: %s, deleted %v); the dataset's status: %+v", phase, job.UID, job.DeletionTimestamp, now.Status)
			}
		}
		if phase == indexjob.List {
			list = job
		}
		runJobPods(t, job)
		finishJob(t, job, false)
	}
	return list
}

// With spec.index.recheckEvery, an indexed stream is listed again by a
// check Job: unchanged, it is only recorded as checked; changed, it is
// indexed again while the dataset stays Ready on its index, then planned
// on the new one; changed while a job holds committed progress, it is
// held, said with a Warning event, and no Job indexes it.
func TestIntegrationAnIndexedStreamIsCheckedAgainAndIndexedAgainOnlyWhenItChanged(t *testing.T) {
	startManager(t)
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	bucket := minioServer.Bucket(t)
	putJSONL(t, bucket, "web", 3)
	ds := indexingDataset(t, ns, bucket, 2, func(ds *datav1alpha1.TrainingDataset) {
		ds.Spec.Index.RecheckEvery = &metav1.Duration{Duration: 2 * time.Second}
	})
	key := client.ObjectKeyFromObject(ds)
	first := runIndexing(t, ds, "", indexjob.List, indexjob.Parts, indexjob.Merge)
	ready := func(samples int64) *datav1alpha1.TrainingDataset {
		t.Helper()
		return waitFor(t, key, fmt.Sprintf("Ready with %d samples", samples), func(d *datav1alpha1.TrainingDataset) bool {
			c := condition(d, datav1alpha1.ConditionReady)
			return c != nil && c.Status == metav1.ConditionTrue && d.Status.Samples == samples
		})
	}
	samples := func(objects int) (n int64) {
		for i := range objects {
			n += int64(30 + 17*i)
		}
		return n
	}
	got := ready(samples(3))
	checkedBefore := got.Status.Streams[0].IndexChecked

	// Unchanged: a check, recorded, and nothing indexed.
	check := runIndexing(t, ds, first.UID, indexjob.List)
	if !indexjob.IsCheck(check) {
		t.Fatalf("the listing after recheckEvery is not a check: %v", check.Spec.Template.Spec.Containers[0].Args)
	}
	got = waitFor(t, key, "the check recorded", func(d *datav1alpha1.TrainingDataset) bool {
		c := d.Status.Streams[0].IndexChecked
		return len(d.Status.Indexing) == 0 && c != nil && checkedBefore != nil && c.After(checkedBefore.Time)
	})
	var parts batchv1.Job
	if err := apiServer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: indexjob.JobName(ds.Name, "m", indexjob.Parts)}, &parts); err == nil && parts.DeletionTimestamp == nil {
		t.Fatalf("an unchanged source has a parts Job %s", parts.Name)
	}
	if got.Status.Samples != samples(3) {
		t.Fatalf("%d samples after an unchanged check", got.Status.Samples)
	}

	// Changed: indexed again, Ready throughout on the old index.
	putJSONL(t, bucket, "web", 4)
	runIndexing(t, ds, check.UID, indexjob.List)
	got = waitFor(t, key, "the changed stream indexed again", func(d *datav1alpha1.TrainingDataset) bool {
		return indexingOf(d, "m").Phase == datav1alpha1.IndexingParts
	})
	if c := condition(got, datav1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue || got.Status.Samples != samples(3) {
		t.Fatalf("while indexing again, Ready %+v with %d samples: want Ready on the old index", c, got.Status.Samples)
	}
	second := waitJob(t, ns, indexjob.JobName(ds.Name, "m", indexjob.List))
	runIndexing(t, ds, "", indexjob.Parts, indexjob.Merge)
	ready(samples(4))
	waitEvent(t, ns, ds.Name, `stream "m" indexed by the operator: 4 objects`)

	// Changed while a job holds committed progress: held.
	now := time.Now().UTC().Truncate(time.Second)
	data, _ := configmaps.StateData(&configmaps.State{Dataset: ds.Name, Job: "train", Epoch: 0, Step: 3, Committed: &now})
	if err := apiServer.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: configmaps.StateName(ds.Name, "train"), Namespace: ns,
		Labels: configmaps.JobLabels(ds.Name, "train"), OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(got, datav1alpha1.GroupVersion.WithKind("TrainingDataset"))}},
		Data: data}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, key, "the job's progress", func(d *datav1alpha1.TrainingDataset) bool { return len(d.Status.Jobs) == 1 })
	putJSONL(t, bucket, "web", 5)
	runIndexing(t, ds, second.UID, indexjob.List)
	got = waitFor(t, key, "the changed stream held", func(d *datav1alpha1.TrainingDataset) bool {
		return indexingOf(d, "m").Phase == datav1alpha1.IndexingHeld
	})
	if got.Status.Samples != samples(4) {
		t.Fatalf("held, the dataset plans %d samples: want the index's %d", got.Status.Samples, samples(4))
	}
	waitEvent(t, ns, ds.Name, "1 job(s) hold committed progress")
	time.Sleep(3 * time.Second) // past recheckEvery: still held, no parts
	if err := apiServer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: indexjob.JobName(ds.Name, "m", indexjob.Parts)}, &parts); err == nil && parts.DeletionTimestamp == nil {
		t.Fatalf("a stream held has a parts Job %s", parts.Name)
	}
}

// besideIndexOf reads the objects written beside the index under
// prefix/_shardfeed/ (selections, lengths, packs): not the index, nor the
// runs' files.
func besideIndexOf(t *testing.T, bucket, prefix string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for o := range minioServer.Client.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Prefix: prefix + "/_shardfeed/", Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		name := strings.TrimPrefix(o.Key, prefix+"/_shardfeed/")
		if strings.HasPrefix(name, "parts/") || strings.HasPrefix(name, "index") {
			continue
		}
		out[name] = indexBytes(t, bucket, o.Key)
	}
	return out
}

// A filtered, packed stream spec.index covers is indexed (its merge
// writing the index alone), then measured in parts by a Measure Job (a
// range of its shards a pod) and joined by a Join Job; the dataset is
// Ready on it, and what the Jobs wrote beside the index is byte for byte
// what one run of index -f over the same manifest writes. A filter changed
// later has the earlier measuring's Jobs removed and the stream measured
// again, with no new listing.
func TestIntegrationAFilteredPackedStreamIsMeasuredInPartsByItsJobs(t *testing.T) {
	startManager(t)
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	bucket := minioServer.Bucket(t)
	for i := range 5 {
		var b strings.Builder
		for j := range 20 + 9*i {
			fmt.Fprintf(&b, "{\"id\": %d, \"tokens\": [%s]}\n", i*1000+j, strings.TrimSuffix(strings.Repeat("7,", 1+(i*7+j*5)%23), ","))
		}
		data := b.String()
		if _, err := minioServer.Client.PutObject(ctx, bucket, fmt.Sprintf("web/part-%02d.jsonl", i), strings.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ds := indexingDataset(t, ns, bucket, 3, func(ds *datav1alpha1.TrainingDataset) {
		ds.Spec.Streams[0].Filter = "id % 3 != 0"
		ds.Spec.Packing = &datav1alpha1.Packing{Column: "tokens", SequenceLength: 32}
	})
	key := client.ObjectKeyFromObject(ds)
	runIndexing(t, ds, "", indexjob.List, indexjob.Parts)
	merge := waitJob(t, ns, indexjob.JobName(ds.Name, "m", indexjob.Merge))
	if !slices.Contains(merge.Spec.Template.Spec.Containers[0].Args, "--index-only") {
		t.Fatalf("the merge Job measures too: %q", merge.Spec.Template.Spec.Containers[0].Args)
	}
	runJobPods(t, merge)
	finishJob(t, merge, false)
	if got := besideIndexOf(t, bucket, "web"); len(got) != 0 {
		t.Fatalf("the merge wrote %d objects beside the index", len(got))
	}
	measure := waitJob(t, ns, indexjob.JobName(ds.Name, "m", indexjob.Measure))
	got := waitFor(t, key, "measuring", func(d *datav1alpha1.TrainingDataset) bool {
		x := indexingOf(d, "m")
		return x.Phase == datav1alpha1.IndexingMeasuring && x.Job == measure.Name
	})
	if x := indexingOf(got, "m"); *measure.Spec.Completions != 3 || x.Parts != 3 || indexjob.MeasuringOf(measure) == "" {
		t.Fatalf("the Measure Job runs %d pods (measuring %q); the status says %+v", *measure.Spec.Completions, indexjob.MeasuringOf(measure), x)
	}
	if c := condition(got, datav1alpha1.ConditionIndexResolved); c == nil || !strings.Contains(c.Message, "has its index, and not yet what is measured beside it") {
		t.Fatalf("measuring, the condition says %+v", c)
	}
	runJobPods(t, measure)
	finishJob(t, measure, false)
	join := waitJob(t, ns, indexjob.JobName(ds.Name, "m", indexjob.Join))
	runJobPods(t, join)
	finishJob(t, join, false)
	ready := waitFor(t, key, "Ready", func(d *datav1alpha1.TrainingDataset) bool {
		c := condition(d, datav1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	if ready.Status.Indexed != "1/1" || len(ready.Status.Indexing) != 0 || ready.Status.Samples == 0 {
		t.Fatalf("measured, the status says indexed %q, %+v, %d samples", ready.Status.Indexed, ready.Status.Indexing, ready.Status.Samples)
	}
	waitEvent(t, ns, ds.Name, `stream "m" indexed: 5 objects`)
	waitEvent(t, ns, ds.Name, `measured by the operator in 3 parts`)
	jobs := besideIndexOf(t, bucket, "web")
	if len(jobs) != 5 { // the selection and the lengths (an index and an object each), the packs
		t.Fatalf("the Jobs wrote %d objects beside the index, want 5: %v", len(jobs), slices.Sorted(maps.Keys(jobs)))
	}
	for o := range minioServer.Client.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "web/_shardfeed/parts/", Recursive: true}) {
		t.Errorf("the measuring's files stay after the join: %s", o.Key)
	}
	// One run of index -f over the same manifest and credentials: the
	// Join's pod, measuring in this one process.
	one := join.DeepCopy()
	args := one.Spec.Template.Spec.Containers[0].Args
	at := slices.Index(args, "--measure-parts")
	one.Spec.Template.Spec.Containers[0].Args = append(slices.Clone(args[:at]), "--selection-only")
	for _, o := range slices.Collect(maps.Keys(jobs)) {
		if err := minioServer.Client.RemoveObject(ctx, bucket, "web/_shardfeed/"+o, minio.RemoveObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	runJobPods(t, one)
	single := besideIndexOf(t, bucket, "web")
	if !maps.EqualFunc(jobs, single, bytes.Equal) {
		for k := range single {
			if !bytes.Equal(jobs[k], single[k]) {
				t.Errorf("%s: the Jobs' (%d bytes) differs from one run's (%d bytes)", k, len(jobs[k]), len(single[k]))
			}
		}
		t.Fatalf("the Jobs wrote %v, one run %v", slices.Sorted(maps.Keys(jobs)), slices.Sorted(maps.Keys(single)))
	}

	// What the Jobs wrote lost: the Join, complete, is not run again by
	// itself (it would measure again and again); the condition says to
	// delete it, and then the stream is measured again over its index.
	for o := range single {
		if err := minioServer.Client.RemoveObject(ctx, bucket, "web/_shardfeed/"+o, minio.RemoveObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var now datav1alpha1.TrainingDataset
	if err := apiServer.Client.Get(ctx, key, &now); err != nil {
		t.Fatal(err)
	}
	now.Spec.Index.Concurrency = ptr.To(int32(8)) // a change, for a reconcile now
	if err := apiServer.Client.Update(ctx, &now); err != nil {
		t.Fatal(err)
	}
	waitFor(t, key, "the lost selection said", func(d *datav1alpha1.TrainingDataset) bool {
		c := condition(d, datav1alpha1.ConditionIndexResolved)
		return c != nil && c.Reason == datav1alpha1.ReasonIndexingFailed && strings.Contains(c.Message, "still lacks what is measured beside its index") &&
			strings.Contains(c.Message, "delete the Job "+measure.Name+" to measure again")
	})
	if err := apiServer.Client.Delete(ctx, waitJob(t, ns, measure.Name), client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var job batchv1.Job
		err := apiServer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: measure.Name}, &job)
		if err == nil && job.UID != measure.UID && job.DeletionTimestamp == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new Measure Job after the Measure Job was deleted (%v)", err)
		}
	}
	if err := apiServer.Client.Get(ctx, client.ObjectKeyFromObject(join), &batchv1.Job{}); err == nil {
		var j batchv1.Job
		_ = apiServer.Client.Get(ctx, client.ObjectKeyFromObject(join), &j)
		if j.UID == join.UID {
			t.Error("the Join of the earlier measuring stays beside the new Measure Job")
		}
	}
	var list batchv1.Job
	if err := apiServer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: indexjob.JobName(ds.Name, "m", indexjob.List)}, &list); err != nil || list.CreationTimestamp.After(measure.CreationTimestamp.Time) {
		t.Errorf("the stream was listed again for a new filter: %v", err)
	}
}

// putTar writes a WebDataset shard of samples samples (a .txt and a .cls
// each) as key in bucket.
func putTar(t *testing.T, bucket, key string, shard, samples int) {
	t.Helper()
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	for i := range samples {
		for _, m := range [][2]string{{"txt", fmt.Sprintf("sample %d of shard %d", i, shard)}, {"cls", strconv.Itoa(i % 3)}} {
			if err := w.WriteHeader(&tar.Header{Name: fmt.Sprintf("%02d%04d.%s", shard, i, m[0]), Mode: 0o644, Size: int64(len(m[1]))}); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write([]byte(m[1])); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := minioServer.Client.PutObject(context.Background(), bucket, key, bytes.NewReader(b.Bytes()), int64(b.Len()), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A stream whose format is not indexed in parts (here WebDataset, whose
// tars are indexed together) is indexed by one Whole Job, one pod running
// index in one run, then Ready on the index the CLI writes; a failure of
// that pod is quoted in the condition.
func TestIntegrationAStreamNotIndexedInPartsIsIndexedInOnePod(t *testing.T) {
	startManager(t)
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	bucket := minioServer.Bucket(t)
	for k := range 3 {
		putTar(t, bucket, fmt.Sprintf("web/shard-%02d.tar", k), k, 4+k)
	}
	ds := indexingDataset(t, ns, bucket, 3, func(ds *datav1alpha1.TrainingDataset) {
		ds.Spec.Streams[0].Format = datav1alpha1.FormatWebDataset
	})
	key := client.ObjectKeyFromObject(ds)
	whole := waitJob(t, ns, indexjob.JobName(ds.Name, "m", indexjob.Whole))
	got := waitFor(t, key, "indexing in one pod", func(d *datav1alpha1.TrainingDataset) bool {
		x := indexingOf(d, "m")
		return x.Phase == datav1alpha1.IndexingParts && x.Job == whole.Name
	})
	if c := condition(got, datav1alpha1.ConditionIndexResolved); c == nil || !strings.Contains(c.Message, "indexing it in one pod") || *whole.Spec.Completions != 1 {
		t.Fatalf("the condition says %+v; the Job runs %d pods", c, *whole.Spec.Completions)
	}
	if err := apiServer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: indexjob.JobName(ds.Name, "m", indexjob.List)}, &batchv1.Job{}); err == nil {
		t.Fatal("a hive stream was listed in parts")
	}
	// An object that is not a tar: the pod fails, and says which.
	bad := strings.Repeat("not a tar ", 100)
	if _, err := minioServer.Client.PutObject(ctx, bucket, "web/shard-09.tar", strings.NewReader(bad), int64(len(bad)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := tryJobPods(t, whole); err == nil {
		t.Fatal("a stream with an object that is not a tar was indexed")
	}
	finishJob(t, whole, true)
	waitFor(t, key, "the failure quoted", func(d *datav1alpha1.TrainingDataset) bool {
		c := condition(d, datav1alpha1.ConditionIndexResolved)
		return c != nil && c.Reason == datav1alpha1.ReasonIndexingFailed && strings.Contains(c.Message, "shard-09.tar: corrupt tar")
	})
	if err := minioServer.Client.RemoveObject(ctx, bucket, "web/shard-09.tar", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := apiServer.Client.Delete(ctx, whole, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	var again *batchv1.Job
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if again = waitJob(t, ns, whole.Name); again.UID != whole.UID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the Whole Job deleted was not made again")
		}
	}
	runJobPods(t, again)
	finishJob(t, again, false)
	waitFor(t, key, "Ready", func(d *datav1alpha1.TrainingDataset) bool {
		c := condition(d, datav1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	jobs := indexBytes(t, bucket, "web/_shardfeed/index.json")
	out, err := exec.Command(shardfeedCLI(t), "index", "s3://"+bucket+"/web/", "--format", "webdataset", "--endpoint", minioServer.URL(), "--insecure",
		"--credentials-dir", minioServer.CredentialsDir(t)).CombinedOutput()
	if err != nil {
		t.Fatalf("one run: %v\n%s", err, out)
	}
	if one := indexBytes(t, bucket, "web/_shardfeed/index.json"); !bytes.Equal(jobs, one) {
		t.Errorf("the Whole Job's index differs from one run's:\n jobs %.300s\n  one %.300s", jobs, one)
	}
}

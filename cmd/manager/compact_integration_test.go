//go:build integration

package main_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index/compact"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
)

// TestIntegrationTheManagerPlansACompactIndexFromItsHeader: a stream of
// 400 000 shards, indexed compact (8 MiB), planned by a manager that reads
// at most 1 MiB of an index: it reads the header alone, and its status and
// fingerprint are those of the whole index.
func TestIntegrationTheManagerPlansACompactIndexFromItsHeader(t *testing.T) {
	ctx := context.Background()
	c := apiServer.Client
	operatorNS := "shardfeed-compact"
	mio := operatorWithMinIO(t, operatorNS)
	bucket := mio.Bucket(t)
	const shards = 400_000
	f := &indexfile.File{Shardfeed: indexfile.Version, Format: datav1alpha1.FormatParquet}
	for i := range shards {
		obj := fmt.Sprintf("part-%07d.parquet", i/4)
		f.Shards = append(f.Shards, indexfile.Entry{Name: fmt.Sprintf("%s#%d", obj, i%4), Object: obj, Part: i % 4, Offset: 4 + int64(i%4)*5000,
			Length: 5000, Samples: 900 + int64(i%200), Hash: fmt.Sprintf("xxh64:%016x", uint64(i)*0x9e3779b97f4a7c15), ObjectSize: 20200, FooterOffset: 20004, FooterLength: 196})
	}
	body, err := compact.Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mio.Client.PutObject(ctx, bucket, "web/"+compact.Key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	installWebhooks(t, port, operatorNS)
	startManagerProcess(t, operatorNS, port, "--max-index-bytes=1048576", "--allowed-endpoints="+mio.Endpoint)
	ns := apiServer.Namespace(t)
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "minio", Namespace: ns},
		Data: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte(mio.AccessKey), "AWS_SECRET_ACCESS_KEY": []byte(mio.SecretKey)}}); err != nil {
		t.Fatal(err)
	}
	spec := datav1alpha1.TrainingDatasetSpec{NumSplits: 8, GlobalBatchSize: 64, Streams: []datav1alpha1.Stream{{Name: "web", Format: datav1alpha1.FormatParquet,
		Source: datav1alpha1.Source{URI: "s3://" + bucket + "/web/", Endpoint: mio.URL(), Insecure: true, Region: "us-east-1",
			CredentialsSecretRef: &datav1alpha1.SecretReference{Name: "minio"}}}}}
	if err := c.Create(ctx, &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: ns}, Spec: spec}); err != nil {
		t.Fatal(err)
	}
	var ds datav1alpha1.TrainingDataset
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "big"}, &ds); err != nil {
			t.Fatal(err)
		}
		if meta.IsStatusConditionTrue(ds.Status.Conditions, datav1alpha1.ConditionReady) {
			break
		}
		if cond := meta.FindStatusCondition(ds.Status.Conditions, datav1alpha1.ConditionIndexResolved); cond != nil && cond.Status == metav1.ConditionFalse {
			t.Fatalf("index not resolved: %s: %s", cond.Reason, cond.Message)
		}
		if time.Now().After(deadline) {
			t.Fatalf("not Ready within 60 s: %+v", ds.Status.Conditions)
		}
	}
	x := f.StreamIndex()
	if len(ds.Status.Streams) != 1 || ds.Status.Streams[0].Shards != shards || ds.Status.Streams[0].Samples != x.Samples() || ds.Status.Samples != x.Samples() {
		t.Fatalf("status: %+v, samples %d; want %d shards of %d samples", ds.Status.Streams, ds.Status.Samples, shards, x.Samples())
	}
	if !strings.HasPrefix(ds.Status.PlanFingerprint, "v1-") {
		t.Fatalf("fingerprint %q", ds.Status.PlanFingerprint)
	}
	t.Logf("a compact index of %d shards (%d bytes) planned from its header, under a cap of 1 MiB a read", shards, len(body))
}

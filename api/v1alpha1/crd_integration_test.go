//go:build integration

package v1alpha1_test

import (
	"context"
	"log"
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/testenv"
)

var apiServer *testenv.APIServer

func TestMain(m *testing.M) {
	var err error
	if apiServer, err = testenv.StartAPIServer(); err != nil {
		log.Fatal(err)
	}
	code := m.Run()
	if err := apiServer.Stop(); err != nil {
		log.Print(err)
	}
	os.Exit(code)
}

func validDataset(ns string) *datav1alpha1.TrainingDataset {
	return &datav1alpha1.TrainingDataset{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: datav1alpha1.TrainingDatasetSpec{
			Streams: []datav1alpha1.Stream{{
				Name:       "web",
				Source:     datav1alpha1.Source{URI: "s3://data/web/"},
				Proportion: "0.75",
			}},
			NumSplits:       8,
			GlobalBatchSize: 64,
		},
	}
}

func TestIntegrationTrainingDatasetRoundTripsWithDefaults(t *testing.T) {
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	if err := apiServer.Client.Create(ctx, validDataset(ns)); err != nil {
		t.Fatalf("creating a valid TrainingDataset: %v", err)
	}
	var got datav1alpha1.TrainingDataset
	if err := apiServer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &got); err != nil {
		t.Fatalf("reading it back: %v", err)
	}
	s := got.Spec
	if s.Streams[0].Proportion != "0.75" || s.NumSplits != 8 || s.GlobalBatchSize != 64 {
		t.Errorf("spec changed on the way: %+v", s)
	}
	// Defaults come from the CRD schema, applied by the API server.
	if s.Streams[0].Format != datav1alpha1.FormatMDS {
		t.Errorf("format = %q, want the default %q", s.Streams[0].Format, datav1alpha1.FormatMDS)
	}
	if !ptr.Deref(s.Shuffle.Enabled, false) || ptr.Deref(s.Shuffle.BlockSize, 0) != 262144 {
		t.Errorf("shuffle = %+v, want enabled with block size 262144", s.Shuffle)
	}
	if !ptr.Deref(s.DropLast, false) || s.OnCorruptShard != datav1alpha1.CorruptShardFail {
		t.Errorf("dropLast = %v, onCorruptShard = %q; want true and fail", s.DropLast, s.OnCorruptShard)
	}

	// The status subresource is writable on its own.
	got.Status.Samples = 1000
	got.Status.ObservedGeneration = got.Generation
	if err := apiServer.Client.Status().Update(ctx, &got); err != nil {
		t.Fatalf("updating status: %v", err)
	}
	var again datav1alpha1.TrainingDataset
	if err := apiServer.Client.Get(ctx, client.ObjectKeyFromObject(&got), &again); err != nil {
		t.Fatal(err)
	}
	if again.Status.Samples != 1000 || again.Generation != got.Generation {
		t.Errorf("status = %+v, generation %d -> %d; want samples 1000 and no new generation",
			again.Status, got.Generation, again.Generation)
	}
}

func TestIntegrationTrainingDatasetSchemaRejectsInvalidSpecs(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*datav1alpha1.TrainingDataset)
		wantMsg string
	}{
		{"no streams", func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams = nil }, "spec.streams"},
		{"zero splits", func(d *datav1alpha1.TrainingDataset) { d.Spec.NumSplits = 0 }, "spec.numSplits"},
		{"zero batch", func(d *datav1alpha1.TrainingDataset) { d.Spec.GlobalBatchSize = 0 }, "spec.globalBatchSize"},
		{"unknown format", func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams[0].Format = "tfrecord" }, "spec.streams[0].format"},
		{"float proportion", func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams[0].Proportion = "1e-3" }, "spec.streams[0].proportion"},
		{"bad stream name", func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams[0].Name = "Web_1" }, "spec.streams[0].name"},
		{"unknown policy", func(d *datav1alpha1.TrainingDataset) { d.Spec.OnCorruptShard = "ignore" }, "spec.onCorruptShard"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := validDataset(apiServer.Namespace(t))
			tt.mutate(d)
			err := apiServer.Client.Create(context.Background(), d)
			if err == nil {
				t.Fatalf("the API server accepted an invalid TrainingDataset")
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error = %v, want it to name %s", err, tt.wantMsg)
			}
		})
	}
}

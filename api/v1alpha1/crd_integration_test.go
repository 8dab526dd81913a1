//go:build integration

package v1alpha1_test

import (
	"context"
	"log"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
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
	if !ptr.Deref(s.Shuffle.Enabled, false) || ptr.Deref(s.Shuffle.BlockSize, 0) != 262144 || ptr.Deref(s.Shuffle.RunLength, 0) != 1 {
		t.Errorf("shuffle = %+v, want enabled with block size 262144 and runs of 1", s.Shuffle)
	}
	if !ptr.Deref(s.DropLast, false) || s.OnCorruptShard != datav1alpha1.CorruptShardFail || s.MissingColumns != datav1alpha1.MissingColumnsRefuse {
		t.Errorf("dropLast = %v, onCorruptShard = %q, missingColumns = %q; want true, fail and refuse", s.DropLast, s.OnCorruptShard, s.MissingColumns)
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
	second := func(d *datav1alpha1.TrainingDataset) *datav1alpha1.Stream {
		d.Spec.Streams = append(d.Spec.Streams, datav1alpha1.Stream{Name: "code", Source: datav1alpha1.Source{URI: "s3://data/code/"}, Proportion: "0.25"})
		return &d.Spec.Streams[1]
	}
	tests := []struct {
		name    string
		mutate  func(*datav1alpha1.TrainingDataset)
		wantMsg string
	}{
		{"no streams", func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams = nil }, "spec.streams"},
		{"zero splits", func(d *datav1alpha1.TrainingDataset) { d.Spec.NumSplits = 0 }, "spec.numSplits"},
		{"zero batch", func(d *datav1alpha1.TrainingDataset) { d.Spec.GlobalBatchSize = 0 }, "spec.globalBatchSize"},
		{"batch not a multiple of the splits", func(d *datav1alpha1.TrainingDataset) { d.Spec.GlobalBatchSize = 60 }, "globalBatchSize must be a multiple of numSplits"},
		{"unknown format", func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams[0].Format = "tfrecord" }, "spec.streams[0].format"},
		{"float proportion", func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams[0].Proportion = "1e-3" }, "spec.streams[0].proportion"},
		{"zero proportion", func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams[0].Proportion = "0.000" }, "proportion must be above 0"},
		{"negative repeat", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Proportion, d.Spec.Streams[0].Repeat = "", "-1"
		}, "spec.streams[0].repeat"},
		{"zero repeat", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Proportion, d.Spec.Streams[0].Repeat = "", "0"
		}, "repeat must be above 0"},
		{"zero choose", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Proportion, d.Spec.Streams[0].Choose = "", ptr.To(int64(0))
		}, "spec.streams[0].choose"},
		{"two weights on a stream", func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams[0].Repeat = "2" }, "at most one weight: proportion, repeat or choose"},
		{"relative and absolute weights mixed", func(d *datav1alpha1.TrainingDataset) {
			s := second(d)
			s.Proportion, s.Choose = "", ptr.To(int64(100))
		}, "the two kinds do not mix"},
		{"epochSize with repeat", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Proportion, d.Spec.Streams[0].Repeat = "", "2"
			d.Spec.EpochSize = ptr.To(int64(1000))
		}, "epochSize goes with proportions"},
		{"zero epochSize", func(d *datav1alpha1.TrainingDataset) { d.Spec.EpochSize = ptr.To(int64(0)) }, "spec.epochSize"},
		{"duplicate stream names", func(d *datav1alpha1.TrainingDataset) { second(d).Name = "web" }, "spec.streams[1]"},
		{"bad stream name", func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams[0].Name = "Web_1" }, "spec.streams[0].name"},
		{"empty URI", func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams[0].Source.URI = "" }, "spec.streams[0].source.uri"},
		{"http URI", func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams[0].Source.URI = "https://data.example.com/web/" }, "source.uri must be s3://"},
		{"gs URI without a bucket", func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams[0].Source.URI = "gs:///web/" }, "source.uri must be s3://"},
		{"az URI without a container", func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams[0].Source.URI = "az://account" }, "az://<account>/<container>/<prefix>/"},
		{"az URI with an upper-case account", func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams[0].Source.URI = "az://Account/data/web/" }, "valid bucket, account and container names"},
		{"abfss URI of another host", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Source.URI = "abfss://data@account.blob.example.com/web/"
		}, "abfss://<container>@<account>.dfs.core.windows.net"},
		{"region on gs", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Source.URI, d.Spec.Streams[0].Source.Region = "gs://data/web/", "us-east1"
		}, "source.region applies to s3:// only"},
		{"a Secret and a workload identity", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Source.CredentialsSecretRef = &datav1alpha1.SecretReference{Name: "data"}
			d.Spec.Streams[0].Source.WorkloadIdentity = &datav1alpha1.WorkloadIdentity{ServiceAccountName: "trainer", RoleARN: "arn:aws:iam::123456789012:role/data"}
		}, "credentialsSecretRef or workloadIdentity, not both"},
		{"workload identity on gs without an audience", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Source.URI = "gs://data/web/"
			d.Spec.Streams[0].Source.WorkloadIdentity = &datav1alpha1.WorkloadIdentity{ServiceAccountName: "trainer"}
		}, "needs audience"},
		{"workload identity on file", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Source.URI = "file:///data/web/"
			d.Spec.Streams[0].Source.WorkloadIdentity = &datav1alpha1.WorkloadIdentity{ServiceAccountName: "trainer"}
		}, "workloadIdentity applies to object stores"},
		{"bad role ARN", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Source.WorkloadIdentity = &datav1alpha1.WorkloadIdentity{ServiceAccountName: "trainer", RoleARN: "data-reader"}
		}, "workloadIdentity.roleARN"},
		{"s3 URI without a bucket", func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams[0].Source.URI = "s3:///web/" }, "valid bucket, account and container names"},
		{"relative file URI", func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams[0].Source.URI = "file://data/web" }, "file:///<absolute path>/"},
		{"endpoint with a path", func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams[0].Source.Endpoint = "http://minio:9000/bucket" }, "source.endpoint is host[:port]"},
		{"insecure without an endpoint", func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams[0].Source.Insecure = true }, "insecure (plain HTTP) applies to an endpoint"},
		// A region goes into host names (sts.<region>.amazonaws.com).
		{"a region that ends a host name", func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams[0].Source.Region = "attacker.example#" }, "spec.streams[0].source.region"},
		{"a region with a user part", func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams[0].Source.Region = "x@127.0.0.1:9/?" }, "spec.streams[0].source.region"},
		{"bad secret name", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Source.CredentialsSecretRef = &datav1alpha1.SecretReference{Name: "My Secret"}
		}, "credentialsSecretRef.name"},
		{"reserved column name", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Columns = []string{"tokens", "_shardfeed_step"}
		}, "are the ones shardfeed adds"},
		{"duplicate columns", func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams[0].Columns = []string{"tokens", "tokens"} }, "spec.streams[0].columns"},
		{"zero block size", func(d *datav1alpha1.TrainingDataset) { d.Spec.Shuffle.BlockSize = ptr.To(int64(0)) }, "spec.shuffle.blockSize"},
		{"zero run length", func(d *datav1alpha1.TrainingDataset) { d.Spec.Shuffle.RunLength = ptr.To(int64(0)) }, "spec.shuffle.runLength"},
		{"runs longer than the block", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Shuffle.BlockSize, d.Spec.Shuffle.RunLength = ptr.To(int64(64)), ptr.To(int64(128))
		}, "shuffle.runLength must be at most shuffle.blockSize"},
		{"runs longer than the default block", func(d *datav1alpha1.TrainingDataset) { d.Spec.Shuffle.RunLength = ptr.To(int64(1 << 19)) }, "runLength must be at most shuffle.blockSize"},
		{"runs above the bound", func(d *datav1alpha1.TrainingDataset) { d.Spec.Shuffle.RunLength = ptr.To(int64(1<<20 + 1)) }, "spec.shuffle.runLength"},
		{"unknown policy", func(d *datav1alpha1.TrainingDataset) { d.Spec.OnCorruptShard = "ignore" }, "spec.onCorruptShard"},
		{"unknown missing columns policy", func(d *datav1alpha1.TrainingDataset) { d.Spec.MissingColumns = "zero" }, "spec.missingColumns"},
		{"webdataset section of another format", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].WebDataset = &datav1alpha1.WebDatasetStream{Shards: "a-{0..9}.tar"}
		}, "a webdataset section needs format: webdataset"},
		{"webdataset column of another type", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Format = datav1alpha1.FormatWebDataset
			d.Spec.Streams[0].WebDataset = &datav1alpha1.WebDatasetStream{Columns: []datav1alpha1.WebDatasetColumn{{Name: "jpg", Type: "float64"}}}
		}, "spec.streams[0].webdataset.columns[0].type"},
		{"megatron section of another format", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Megatron = &datav1alpha1.MegatronStream{Unit: "sequence"}
		}, "a megatron section needs format: megatron"},
		{"unknown megatron unit", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Format = datav1alpha1.FormatMegatron
			d.Spec.Streams[0].Megatron = &datav1alpha1.MegatronStream{Unit: "page"}
		}, "spec.streams[0].megatron.unit"},
		{"a tokenizer's hash not sha256 hex", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Tokenize = &datav1alpha1.Tokenize{Tokenizer: datav1alpha1.TokenizerFile{URI: "s3://b/tokenizer.json", SHA256: "ABC"}, Column: "text"}
		}, "spec.tokenize.tokenizer.sha256"},
		{"a tokenizer of a uri and a ConfigMap", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Tokenize = &datav1alpha1.Tokenize{Tokenizer: datav1alpha1.TokenizerFile{URI: "s3://b/tokenizer.json", SHA256: strings.Repeat("0", 64),
				ConfigMapRef: &datav1alpha1.ConfigMapKey{Name: "tok", Key: "tokenizer.json"}}, Column: "text"}
		}, "give the tokenizer's uri or its configMapRef, one of them"},
		{"a tokenizer of neither", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Tokenize = &datav1alpha1.Tokenize{Tokenizer: datav1alpha1.TokenizerFile{SHA256: strings.Repeat("0", 64)}, Column: "text"}
		}, "give the tokenizer's uri or its configMapRef, one of them"},
		{"a ConfigMap key with a slash", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Tokenize = &datav1alpha1.Tokenize{Tokenizer: datav1alpha1.TokenizerFile{SHA256: strings.Repeat("0", 64),
				ConfigMapRef: &datav1alpha1.ConfigMapKey{Name: "tok", Key: "../tokenizer.json"}}, Column: "text"}
		}, "spec.tokenize.tokenizer.configMapRef.key"},
		{"a stream's tokenization without its column", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Tokenize = &datav1alpha1.Tokenize{Tokenizer: datav1alpha1.TokenizerFile{URI: "s3://b/t.json", SHA256: strings.Repeat("0", 64)}}
		}, "spec.streams[0].tokenize.column"},
		{"litdata section of another format", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].LitData = &datav1alpha1.LitDataStream{BlockSize: 2048}
		}, "a litdata section needs format: litdata"},
		{"zero litdata block size", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Format = datav1alpha1.FormatLitData
			d.Spec.Streams[0].LitData = &datav1alpha1.LitDataStream{BlockSize: -1}
		}, "spec.streams[0].litdata.blockSize"},
		{"negative prefetch", func(d *datav1alpha1.TrainingDataset) { d.Spec.Sidecar.Prefetch = ptr.To(int32(-1)) }, "spec.sidecar.prefetch"},
		{"metrics port out of range", func(d *datav1alpha1.TrainingDataset) { d.Spec.Sidecar.MetricsPort = ptr.To(int32(70000)) }, "spec.sidecar.metricsPort"},
		{"zero cache limit", func(d *datav1alpha1.TrainingDataset) { d.Spec.Sidecar.CacheLimit = ptr.To(resource.MustParse("0")) }, "sidecar.cacheLimit must be above 0"},
		{"negative hand-off memory", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Sidecar.HandoffMemory = ptr.To(resource.MustParse("-1Mi"))
		},
			"sidecar.handoffMemory must be 0 or more"},
		{"image with a space", func(d *datav1alpha1.TrainingDataset) { d.Spec.Sidecar.Image = "shardfeed latest" }, "sidecar.image is an image reference"},
		{"decoded crop above the resize", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Decode = []datav1alpha1.ColumnDecode{{Column: "jpg", Image: datav1alpha1.ImageDecode{Height: 224, Width: 224, Resize: ptr.To(int32(200))}}}
		}, "image.resize is the shorter side before the centre crop"},
		{"a lerobot stream's frames in draft", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Format = datav1alpha1.FormatLeRobot
			d.Spec.Streams[0].LeRobot = &datav1alpha1.LeRobotStream{Frames: &datav1alpha1.ImageDecode{Height: 224, Width: 224, Draft: true}}
		}, "lerobot.frames.draft: draft decodes JPEGs smaller"},
		{"a lerobot stream's frames sized where the trainer decodes clips", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Format = datav1alpha1.FormatLeRobot
			d.Spec.Streams[0].LeRobot = &datav1alpha1.LeRobotStream{Cameras: datav1alpha1.CamerasClips, Frames: &datav1alpha1.ImageDecode{Height: 224, Width: 224}}
		}, "with cameras: Clips the trainer decodes them"},
		{"a lerobot stream's cameras of no known kind", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Format = datav1alpha1.FormatLeRobot
			d.Spec.Streams[0].LeRobot = &datav1alpha1.LeRobotStream{Cameras: "Packets"}
		}, "spec.streams[0].lerobot.cameras"},
		{"a lerobot stream's frames cropped above the resize", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Format = datav1alpha1.FormatLeRobot
			d.Spec.Streams[0].LeRobot = &datav1alpha1.LeRobotStream{Frames: &datav1alpha1.ImageDecode{Height: 224, Width: 96, Resize: ptr.To(int32(128))}}
		}, "image.resize is the shorter side before the centre crop"},
		{"decoded image of no height", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Decode = []datav1alpha1.ColumnDecode{{Column: "jpg", Image: datav1alpha1.ImageDecode{Height: 0, Width: 224}}}
		}, "spec.decode[0].image.height"},
		{"a column decoded twice", func(d *datav1alpha1.TrainingDataset) {
			im := datav1alpha1.ImageDecode{Height: 8, Width: 8}
			d.Spec.Decode = []datav1alpha1.ColumnDecode{{Column: "jpg", Image: im}, {Column: "jpg", Image: im}}
		}, "spec.decode[1]"},
		{"packing and decoding", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Packing = &datav1alpha1.Packing{Column: "tokens", SequenceLength: 64}
			d.Spec.Decode = []datav1alpha1.ColumnDecode{{Column: "jpg", Image: datav1alpha1.ImageDecode{Height: 8, Width: 8}}}
		}, "spec.packing serves only its column's tokens"},
		{"packing and a stream's columns", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Packing = &datav1alpha1.Packing{Column: "tokens", SequenceLength: 64}
			d.Spec.Streams[0].Columns = []string{"tokens"}
		}, "drop spec.streams[].columns"},
		{"packing into sequences above the bound", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Packing = &datav1alpha1.Packing{Column: "tokens", SequenceLength: 1<<20 + 1}
		}, "spec.packing.sequenceLength"},
		{"an unknown packing method", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Packing = &datav1alpha1.Packing{Column: "tokens", SequenceLength: 64, Method: "worstFit"}
		}, "spec.packing.method"},
		{"bucketing by lengths and by aspect ratios", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Bucketing = &datav1alpha1.Bucketing{Column: "image", Boundaries: []int64{4096}, AspectRatios: []string{"4/3"}}
		}, "give spec.bucketing boundaries (lengths) or aspectRatios (images), one of them"},
		{"bucketing by neither", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Bucketing = &datav1alpha1.Bucketing{Column: "image"}
		}, "give spec.bucketing boundaries (lengths) or aspectRatios (images), one of them"},
		{"bucket boundaries out of order", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Bucketing = &datav1alpha1.Bucketing{Column: "tokens", Boundaries: []int64{512, 128}}
		}, "spec.bucketing.boundaries are lengths above 0 in ascending order, each once"},
		{"a bucket boundary twice", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Bucketing = &datav1alpha1.Bucketing{Column: "tokens", Boundaries: []int64{128, 128}}
		}, "spec.bucketing.boundaries are lengths above 0 in ascending order, each once"},
		{"an aspect ratio that is no number", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Bucketing = &datav1alpha1.Bucketing{Column: "image", AspectRatios: []string{"wide"}}
		}, "spec.bucketing.aspectRatios[0]"},
		{"bucketing and packing", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Packing = &datav1alpha1.Packing{Column: "tokens", SequenceLength: 64}
			d.Spec.Bucketing = &datav1alpha1.Bucketing{Column: "tokens", Boundaries: []int64{32}}
		}, "pack or bucket, not both"},
		{"bucket batch sizes and a schedule", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Schedule = &datav1alpha1.Schedule{Phases: []datav1alpha1.SchedulePhase{{StartStep: 5, GlobalBatchSize: 16}}}
			d.Spec.Bucketing = &datav1alpha1.Bucketing{Column: "tokens", Boundaries: []int64{32}, BatchSizes: []int64{16, 8}}
		}, "a schedule's phases set the global batch size"},
		{"a bucket batch size that is no multiple of numSplits", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Bucketing = &datav1alpha1.Bucketing{Column: "tokens", Boundaries: []int64{32}, BatchSizes: []int64{int64(d.Spec.NumSplits) * 2, int64(d.Spec.NumSplits) + 1}}
		}, "spec.bucketing.batchSizes must be multiples of numSplits"},
		{"a batch size short of a bucket", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Bucketing = &datav1alpha1.Bucketing{Column: "tokens", Boundaries: []int64{32, 64}, BatchSizes: []int64{int64(d.Spec.NumSplits), int64(d.Spec.NumSplits)}}
		}, "spec.bucketing.batchSizes has one batch size a bucket"},
		{"batch sizes and a budget", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Bucketing = &datav1alpha1.Bucketing{Column: "tokens", Boundaries: []int64{32}, BatchSizes: []int64{int64(d.Spec.NumSplits), int64(d.Spec.NumSplits)}, Budget: ptr.To(int64(1 << 20))}
		}, "give spec.bucketing batchSizes or a budget, not both"},
		{"a budget over aspect ratios", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Bucketing = &datav1alpha1.Bucketing{Column: "image", AspectRatios: []string{"1"}, Budget: ptr.To(int64(1 << 20))}
		}, "spec.bucketing.budget sizes each bucket's batches by its longest sample"},
		{"a budget short of the longest bucket", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Bucketing = &datav1alpha1.Bucketing{Column: "tokens", Boundaries: []int64{32, 4096}, Budget: ptr.To(int64(4096))}
		}, "spec.bucketing.budget holds numSplits samples of the longest bounded bucket"},
		{"an index in another store", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Source.IndexURI = "gs://team-indexes/web/"
		}, "source.indexURI must use the same store as source.uri"},
		{"an index URI that is no store URI", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Source.IndexURI = "http://example.com/x/"
		}, "source.indexURI must be s3://"},
		{"partitions of an mds stream", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Partitions = &datav1alpha1.Partitions{Select: "a == 1"}
		}, "partitions apply to a tree of parquet or orc files"},
		{"a partition column with a slash", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Format = datav1alpha1.FormatORC
			d.Spec.Streams[0].Partitions = &datav1alpha1.Partitions{Columns: []datav1alpha1.PartitionColumn{{Name: "a/b", Type: "utf8"}}}
		}, "a partition column name has no / or ="},
		{"a partition type", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Format = datav1alpha1.FormatParquet
			d.Spec.Streams[0].Partitions = &datav1alpha1.Partitions{Columns: []datav1alpha1.PartitionColumn{{Name: "a", Type: "date"}}}
		}, "partitions.columns[0].type"},
		{"iceberg format without a table", func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams[0].Format = datav1alpha1.FormatIceberg }, "format: iceberg needs an iceberg section"},
		{"a lance pin on a parquet stream", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Format = datav1alpha1.FormatParquet
			d.Spec.Streams[0].Lance = &datav1alpha1.LanceTable{Tag: "train"}
		}, "a lance section needs format: lance"},
		{"a lance version and tag", func(d *datav1alpha1.TrainingDataset) {
			v := int64(3)
			d.Spec.Streams[0].Format = datav1alpha1.FormatLance
			d.Spec.Streams[0].Lance = &datav1alpha1.LanceTable{Version: &v, Tag: "train"}
		}, "pin the dataset with version or tag, not both"},
		{"a lance version 0", func(d *datav1alpha1.TrainingDataset) {
			v := int64(0)
			d.Spec.Streams[0].Format = datav1alpha1.FormatLance
			d.Spec.Streams[0].Lance = &datav1alpha1.LanceTable{Version: &v}
		}, "lance.version"},
		{"a lance tag with a slash", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Format = datav1alpha1.FormatLance
			d.Spec.Streams[0].Lance = &datav1alpha1.LanceTable{Tag: "../x"}
		}, "lance.tag"},
		{"a table on a parquet stream", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Streams[0].Format = datav1alpha1.FormatParquet
			d.Spec.Streams[0].Iceberg = restTable()
		}, "an iceberg section needs format: iceberg"},
		{"table without a namespace", func(d *datav1alpha1.TrainingDataset) { icebergStream(d).Table = "events" }, "iceberg.table is namespace.table"},
		{"snapshot and ref", func(d *datav1alpha1.TrainingDataset) {
			t := icebergStream(d)
			t.SnapshotID, t.Ref = ptr.To(int64(42)), "main"
		}, "snapshotID or ref, not both"},
		{"rest catalog without a uri", func(d *datav1alpha1.TrainingDataset) { icebergStream(d).Catalog.URI = "" }, "a rest or sql catalog needs uri"},
		{"rest catalog uri with a password", func(d *datav1alpha1.TrainingDataset) {
			icebergStream(d).Catalog.URI = "https://me:secret@catalog.example.com/api"
		}, "with no user or password"},
		{"sql catalog uri with a password", func(d *datav1alpha1.TrainingDataset) {
			icebergStream(d).Catalog = datav1alpha1.IcebergCatalog{Type: datav1alpha1.IcebergCatalogSQL, URI: "postgresql://me:secret@db/iceberg"}
		}, "with no user or password"},
		{"unknown catalog", func(d *datav1alpha1.TrainingDataset) { icebergStream(d).Catalog.Type = "hive" }, "iceberg.catalog.type"},
		{"glue catalog with a uri", func(d *datav1alpha1.TrainingDataset) {
			icebergStream(d).Catalog = datav1alpha1.IcebergCatalog{Type: datav1alpha1.IcebergCatalogGlue, URI: "https://glue.example.com"}
		}, "a glue catalog has no uri"},
		{"region on a rest catalog", func(d *datav1alpha1.TrainingDataset) { icebergStream(d).Catalog.Region = "eu-west-1" }, "region and catalogID apply to a glue catalog only"},
		{"a phase that skips and ramps", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Schedule = &datav1alpha1.Schedule{Phases: []datav1alpha1.SchedulePhase{{StartStep: 5, SkipSteps: 2, GlobalBatchSize: 16}}}
		}, "one of the three"},
		{"a phase that changes nothing", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Schedule = &datav1alpha1.Schedule{Phases: []datav1alpha1.SchedulePhase{{StartStep: 5}}}
		}, "one of the three"},
		{"phases out of order", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Schedule = &datav1alpha1.Schedule{Phases: []datav1alpha1.SchedulePhase{{StartStep: 9, SkipSteps: 1}, {StartStep: 5, SkipSteps: 1}}}
		}, "in the order of their startStep"},
		{"a proportion that is not a decimal", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Schedule = &datav1alpha1.Schedule{Phases: []datav1alpha1.SchedulePhase{{StartStep: 5, Proportions: []datav1alpha1.PhaseProportion{{Stream: "web", Proportion: "1e3"}}}}}
		}, "proportion in body should match"},
		{"a schedule with per_stream batching", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Batching, d.Spec.Schedule = datav1alpha1.BatchingPerStream, &datav1alpha1.Schedule{}
		}, "drop batching: per_stream"},
	}
	if len(tests) < 25 {
		t.Fatalf("the table has %d invalid manifests, the issue asks for at least 25", len(tests))
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
				t.Errorf("error = %v, want it to say %q", err, tt.wantMsg)
			}
		})
	}
}

func restTable() *datav1alpha1.IcebergTable {
	return &datav1alpha1.IcebergTable{
		Catalog: datav1alpha1.IcebergCatalog{Type: datav1alpha1.IcebergCatalogREST, URI: "http://iceberg-rest.data:8181"},
		Table:   "analytics.events",
	}
}

// icebergStream makes the dataset's stream an Iceberg table and returns it.
func icebergStream(d *datav1alpha1.TrainingDataset) *datav1alpha1.IcebergTable {
	d.Spec.Streams[0].Format = datav1alpha1.FormatIceberg
	d.Spec.Streams[0].Iceberg = restTable()
	return d.Spec.Streams[0].Iceberg
}

// Each catalog kind, as docs/formats.md writes it, is accepted.
func TestIntegrationEveryIcebergCatalogIsAccepted(t *testing.T) {
	tests := []struct {
		name  string
		table datav1alpha1.IcebergTable
	}{
		{"rest at the current snapshot", *restTable()},
		{"rest at a ref, with a warehouse", datav1alpha1.IcebergTable{Table: "ml.corpus.web", Ref: "train-2026-11",
			Catalog: datav1alpha1.IcebergCatalog{Type: datav1alpha1.IcebergCatalogREST, URI: "https://polaris.example.com/api/catalog", Warehouse: "lake"}}},
		{"sql on sqlite at a snapshot", datav1alpha1.IcebergTable{Table: "ml.web", SnapshotID: ptr.To(int64(3051729675574597004)),
			Catalog: datav1alpha1.IcebergCatalog{Type: datav1alpha1.IcebergCatalogSQL, Name: "lake", URI: "sqlite:///var/lib/iceberg/catalog.db"}}},
		{"sql on postgresql", datav1alpha1.IcebergTable{Table: "ml.web",
			Catalog: datav1alpha1.IcebergCatalog{Type: datav1alpha1.IcebergCatalogSQL, URI: "postgresql://pg.data:5432/iceberg"}}},
		{"glue", datav1alpha1.IcebergTable{Table: "ml.web",
			Catalog: datav1alpha1.IcebergCatalog{Type: datav1alpha1.IcebergCatalogGlue, Region: "eu-west-1", CatalogID: "123456789012"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := validDataset(apiServer.Namespace(t))
			d.Spec.Streams[0].Format = datav1alpha1.FormatIceberg
			d.Spec.Streams[0].Iceberg = &tt.table
			if err := apiServer.Client.Create(context.Background(), d); err != nil {
				t.Fatalf("the API server refused a valid table: %v", err)
			}
		})
	}
}

// A partitioned ORC and a partitioned Parquet stream, as docs/formats.md
// writes them, are accepted.
func TestIntegrationPartitionedStreamsAreAccepted(t *testing.T) {
	for _, f := range []datav1alpha1.ShardFormat{datav1alpha1.FormatORC, datav1alpha1.FormatParquet} {
		t.Run(string(f), func(t *testing.T) {
			d := validDataset(apiServer.Namespace(t))
			d.Spec.Streams[0].Format = f
			d.Spec.Streams[0].Partitions = &datav1alpha1.Partitions{Select: "region == 'eu' && date >= '2024-01-02'",
				Columns: []datav1alpha1.PartitionColumn{{Name: "date", Type: "utf8"}, {Name: "region", Type: "utf8"}, {Name: "bucket", Type: "int32"}}}
			if err := apiServer.Client.Create(context.Background(), d); err != nil {
				t.Fatalf("the API server refused a partitioned stream: %v", err)
			}
		})
	}
}

// Every store has the same source shape: each of these is accepted as it
// is written in docs/stores.md.
func TestIntegrationEveryStoreSourceIsAccepted(t *testing.T) {
	tests := []struct {
		name string
		src  datav1alpha1.Source
	}{
		{"s3 with a Secret", datav1alpha1.Source{URI: "s3://data/web/", Region: "eu-west-1", CredentialsSecretRef: &datav1alpha1.SecretReference{Name: "s3-data"}}},
		{"s3-compatible", datav1alpha1.Source{URI: "s3://data/web/", Endpoint: "http://minio.storage:9000", Insecure: true}},
		{"s3 with a workload identity", datav1alpha1.Source{URI: "s3://data/web/",
			WorkloadIdentity: &datav1alpha1.WorkloadIdentity{ServiceAccountName: "trainer", RoleARN: "arn:aws:iam::123456789012:role/data-reader"}}},
		{"gs with a key", datav1alpha1.Source{URI: "gs://my-data.example/web/", CredentialsSecretRef: &datav1alpha1.SecretReference{Name: "gcs-key"}}},
		{"gs emulator", datav1alpha1.Source{URI: "gs://data/web/", Endpoint: "http://fake-gcs.storage:4443", Insecure: true}},
		{"gs with a workload identity", datav1alpha1.Source{URI: "gs://data/web/", WorkloadIdentity: &datav1alpha1.WorkloadIdentity{
			ServiceAccountName: "trainer", ServiceAccountEmail: "reader@project.iam.gserviceaccount.com",
			Audience: "//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/k8s/providers/cluster"}}},
		{"az with a key", datav1alpha1.Source{URI: "az://account1/data/web/", CredentialsSecretRef: &datav1alpha1.SecretReference{Name: "azure-key"}}},
		{"abfss", datav1alpha1.Source{URI: "abfss://data@account1.dfs.core.windows.net/web/", CredentialsSecretRef: &datav1alpha1.SecretReference{Name: "azure-sas"}}},
		{"az emulator", datav1alpha1.Source{URI: "az://devstoreaccount1/data/web/", Endpoint: "http://azurite.storage:10000", Insecure: true}},
		{"az with a workload identity", datav1alpha1.Source{URI: "az://account1/data/web/", WorkloadIdentity: &datav1alpha1.WorkloadIdentity{
			ServiceAccountName: "trainer", ClientID: "00000000-1111-2222-3333-444444444444", TenantID: "contoso.onmicrosoft.com"}}},
		// The role and application are the ServiceAccount's annotations:
		// the dataset names only the ServiceAccount.
		{"s3 with a workload identity its ServiceAccount names", datav1alpha1.Source{URI: "s3://data/web/",
			WorkloadIdentity: &datav1alpha1.WorkloadIdentity{ServiceAccountName: "trainer"}}},
		{"az with a workload identity its ServiceAccount names", datav1alpha1.Source{URI: "az://account1/data/web/",
			WorkloadIdentity: &datav1alpha1.WorkloadIdentity{ServiceAccountName: "trainer"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := validDataset(apiServer.Namespace(t))
			d.Spec.Streams[0].Source = tt.src
			if err := apiServer.Client.Create(context.Background(), d); err != nil {
				t.Fatalf("the API server refused a valid source: %v", err)
			}
		})
	}
}

func TestIntegrationFieldsThatShapeThePlanAreImmutable(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*datav1alpha1.TrainingDataset)
		wantMsg string // "" : the update is allowed
	}{
		{"numSplits", func(d *datav1alpha1.TrainingDataset) { d.Spec.NumSplits, d.Spec.GlobalBatchSize = 4, 64 }, "spec.numSplits is immutable"},
		{"globalBatchSize", func(d *datav1alpha1.TrainingDataset) { d.Spec.GlobalBatchSize = 128 }, "spec.globalBatchSize is immutable"},
		{"a stream's weight", func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams[0].Proportion = "0.5" }, "spec.streams is immutable"},
		{"a stream's source", func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams[0].Source.URI = "s3://data/web2/" }, "spec.streams is immutable"},
		{"shuffle seed", func(d *datav1alpha1.TrainingDataset) { d.Spec.Shuffle.Seed = ptr.To(int64(9)) }, "spec.shuffle is immutable"},
		{"epochSize set later", func(d *datav1alpha1.TrainingDataset) { d.Spec.EpochSize = ptr.To(int64(100)) }, "spec.epochSize is immutable"},
		{"dropLast", func(d *datav1alpha1.TrainingDataset) { d.Spec.DropLast = ptr.To(false) }, "spec.dropLast is immutable"},
		{"batching", func(d *datav1alpha1.TrainingDataset) { d.Spec.Batching = datav1alpha1.BatchingStratified }, "spec.batching is immutable"},
		{"decode added", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Decode = []datav1alpha1.ColumnDecode{{Column: "jpg", Image: datav1alpha1.ImageDecode{Height: 8, Width: 8}}}
		}, "spec.decode is immutable"},
		{"packing added", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Packing = &datav1alpha1.Packing{Column: "tokens", SequenceLength: 64}
		}, "spec.packing is immutable"},
		{"bucketing added", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Bucketing = &datav1alpha1.Bucketing{Column: "image", AspectRatios: []string{"3/4", "4/3"}}
		}, "spec.bucketing is immutable"},
		{"a schedule added later", func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Schedule = &datav1alpha1.Schedule{Phases: []datav1alpha1.SchedulePhase{{StartStep: 5, GlobalBatchSize: 16}}}
		}, "spec.schedule cannot be added to or removed"},
		{"the sidecar's prefetch (does not shape the plan)", func(d *datav1alpha1.TrainingDataset) { d.Spec.Sidecar.Prefetch = ptr.To(int32(8)) }, ""},
		{"the corrupt-shard policy (does not shape the plan)", func(d *datav1alpha1.TrainingDataset) { d.Spec.OnCorruptShard = datav1alpha1.CorruptShardSkip }, ""},
	}
	// A scheduled dataset: its phases may only grow at the end.
	phases := func(steps ...int64) *datav1alpha1.Schedule {
		sc := &datav1alpha1.Schedule{}
		for _, k := range steps {
			sc.Phases = append(sc.Phases, datav1alpha1.SchedulePhase{StartStep: k, GlobalBatchSize: 16 * (k + 1)})
		}
		return sc
	}
	scheduled := []struct {
		name    string
		mutate  func(*datav1alpha1.TrainingDataset)
		wantMsg string
	}{
		{"a phase appended", func(d *datav1alpha1.TrainingDataset) { d.Spec.Schedule = phases(10, 20, 30) }, ""},
		{"a phase changed", func(d *datav1alpha1.TrainingDataset) { d.Spec.Schedule = phases(10, 21) }, "append-only"},
		{"a phase inserted", func(d *datav1alpha1.TrainingDataset) { d.Spec.Schedule = phases(10, 15, 20) }, "append-only"},
		{"a phase removed", func(d *datav1alpha1.TrainingDataset) { d.Spec.Schedule = phases(10) }, "append-only"},
		{"the schedule removed", func(d *datav1alpha1.TrainingDataset) { d.Spec.Schedule = nil }, "spec.schedule cannot be added to or removed"},
	}
	for _, tt := range scheduled {
		tests = append(tests, struct {
			name    string
			mutate  func(*datav1alpha1.TrainingDataset)
			wantMsg string
		}{"scheduled: " + tt.name, tt.mutate, tt.wantMsg})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			d := validDataset(apiServer.Namespace(t))
			if strings.HasPrefix(tt.name, "scheduled: ") {
				d.Spec.Schedule = phases(10, 20)
			}
			if err := apiServer.Client.Create(ctx, d); err != nil {
				t.Fatal(err)
			}
			tt.mutate(d)
			err := apiServer.Client.Update(ctx, d)
			switch {
			case tt.wantMsg == "" && err != nil:
				t.Fatalf("the update was refused: %v", err)
			case tt.wantMsg != "" && err == nil:
				t.Fatalf("the API server took a change of a field that shapes the plan")
			case tt.wantMsg != "" && !strings.Contains(err.Error(), tt.wantMsg):
				t.Errorf("error = %v, want it to say %q", err, tt.wantMsg)
			}
		})
	}
}

// Bucketing by lengths and by aspect ratios, as docs/planner.md writes it,
// is accepted.
func TestIntegrationBucketedDatasetsAreAccepted(t *testing.T) {
	for name, b := range map[string]*datav1alpha1.Bucketing{
		"lengths":       {Column: "tokens", Boundaries: []int64{512, 1024, 2048}},
		"aspect ratios": {Column: "image", AspectRatios: []string{"0.75", "1", "4/3"}},
		"a budget":      {Column: "tokens", Boundaries: []int64{512, 2048}, Budget: ptr.To(int64(1 << 20))},
		"batch sizes":   {Column: "image", AspectRatios: []string{"1"}, BatchSizes: []int64{64, 16}},
		"scheduled":     {Column: "tokens", Boundaries: []int64{512}},
	} {
		t.Run(name, func(t *testing.T) {
			d := validDataset(apiServer.Namespace(t))
			d.Spec.Bucketing = b
			if name == "scheduled" { // a ramp-up, a curriculum, a skip and a repeat
				d.Spec.Schedule = &datav1alpha1.Schedule{Phases: []datav1alpha1.SchedulePhase{{StartStep: 5, GlobalBatchSize: 16},
					{StartStep: 9, Proportions: []datav1alpha1.PhaseProportion{{Stream: d.Spec.Streams[0].Name, Proportion: "1"}}},
					{StartStep: 12, SkipSteps: 3}, {StartStep: 20, RepeatSteps: 2}}}
			}
			if err := apiServer.Client.Create(context.Background(), d); err != nil {
				t.Fatalf("the API server refused a bucketed dataset: %v", err)
			}
		})
	}
}

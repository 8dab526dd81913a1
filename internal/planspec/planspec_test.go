package planspec

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/planner"
)

func idx(samples ...int64) planner.StreamIndex {
	var x planner.StreamIndex
	for _, n := range samples {
		x.Shards = append(x.Shards, planner.Shard{Name: "s", Samples: n, Bytes: n})
	}
	return x
}

func TestParamsDefaultsLikeTheAPIServer(t *testing.T) {
	spec := &datav1alpha1.TrainingDatasetSpec{
		Streams:         []datav1alpha1.Stream{{Name: "a", Proportion: "2"}, {Name: "b", Proportion: "1"}},
		NumSplits:       4,
		GlobalBatchSize: 8,
	}
	p, err := Params(spec, []planner.StreamIndex{idx(100), idx(50)})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Shuffle || p.Seed != 0 || p.BlockSize != 262144 || !p.DropLast || p.EpochSize != 0 || p.Batching != planner.BatchingRandom {
		t.Errorf("defaults = shuffle %v seed %d block %d dropLast %v epochSize %d", p.Shuffle, p.Seed, p.BlockSize, p.DropLast, p.EpochSize)
	}
	if p.Streams[0].Proportion != "2" || p.Streams[1].Index.Samples() != 50 {
		t.Errorf("streams = %+v", p.Streams)
	}
}

func TestParamsCarriesEverySetField(t *testing.T) {
	spec := &datav1alpha1.TrainingDatasetSpec{
		Streams: []datav1alpha1.Stream{
			{Name: "a", Repeat: "1.5"},
			{Name: "b", Choose: ptr.To[int64](7)},
		},
		Shuffle:         datav1alpha1.Shuffle{Enabled: ptr.To(false), Seed: ptr.To[int64](-1), BlockSize: ptr.To[int64](8)},
		NumSplits:       2,
		GlobalBatchSize: 2,
		DropLast:        ptr.To(false),
		Batching:        datav1alpha1.BatchingPerStream,
	}
	p, err := Params(spec, []planner.StreamIndex{idx(10), idx(10)})
	if err != nil {
		t.Fatal(err)
	}
	if p.Shuffle || p.Seed != ^uint64(0) || p.BlockSize != 8 || p.DropLast || p.NumSplits != 2 || p.GlobalBatchSize != 2 || p.Batching != planner.BatchingPerStream {
		t.Errorf("params = %+v", p)
	}
	if p.Streams[0].Repeat != "1.5" || p.Streams[1].Choose != 7 {
		t.Errorf("weights = %+v", p.Streams)
	}
}

func TestParamsRejectsWithTheSpecField(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*datav1alpha1.TrainingDatasetSpec)
		field  string
	}{
		{"choose zero", func(s *datav1alpha1.TrainingDatasetSpec) { s.Streams[0].Choose = ptr.To[int64](0) }, "spec.streams[0].choose"},
		{"epoch size zero", func(s *datav1alpha1.TrainingDatasetSpec) { s.EpochSize = ptr.To[int64](0) }, "spec.epochSize"},
		{"batch not multiple", func(s *datav1alpha1.TrainingDatasetSpec) { s.GlobalBatchSize = 3 }, "spec.globalBatchSize"},
		{"packing and a stream's columns", func(s *datav1alpha1.TrainingDatasetSpec) {
			s.Packing = &datav1alpha1.Packing{Column: "tokens", SequenceLength: 8}
			s.Streams[0].Columns = []string{"tokens", "id"}
		}, "spec.streams[0].columns"},
		{"packing and decoding", func(s *datav1alpha1.TrainingDatasetSpec) {
			s.Packing = &datav1alpha1.Packing{Column: "tokens", SequenceLength: 8}
			s.Decode = []datav1alpha1.ColumnDecode{{Column: "image"}}
		}, "spec.decode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &datav1alpha1.TrainingDatasetSpec{Streams: []datav1alpha1.Stream{{Name: "a"}}, NumSplits: 2, GlobalBatchSize: 2}
			tt.mutate(spec)
			_, err := Params(spec, []planner.StreamIndex{idx(10)})
			var fe *planner.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Fatalf("Params = %v, want an error on %s", err, tt.field)
			}
		})
	}
	if _, err := Params(&datav1alpha1.TrainingDatasetSpec{Streams: []datav1alpha1.Stream{{Name: "a"}}}, nil); err == nil || !strings.Contains(err.Error(), "0 indexes for 1 streams") {
		t.Errorf("missing index: %v", err)
	}
}

// The Go defaults must be the CRD's, or a manifest planned from a file and
// the same manifest applied to a cluster would get different plans.
func TestDefaultsMatchTheCRDSchema(t *testing.T) {
	// go test runs in the package's directory (runtime.Caller's path is
	// not a file's under -trimpath, which make exports).
	crdPath := filepath.Join("..", "..", "config", "crd", "bases", "data.shardfeed.io_trainingdatasets.yaml")
	data, err := os.ReadFile(crdPath)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	shuffle := spec.Properties["shuffle"]
	tests := []struct {
		name   string
		schema apiextensionsv1.JSONSchemaProps
		goVal  any
	}{
		{"shuffle.enabled", shuffle.Properties["enabled"], datav1alpha1.DefaultShuffleEnabled},
		{"shuffle.seed", shuffle.Properties["seed"], datav1alpha1.DefaultShuffleSeed},
		{"shuffle.blockSize", shuffle.Properties["blockSize"], datav1alpha1.DefaultBlockSize},
		{"dropLast", spec.Properties["dropLast"], datav1alpha1.DefaultDropLast},
		{"batching", spec.Properties["batching"], datav1alpha1.DefaultBatching},
		{"streams[].format", spec.Properties["streams"].Items.Schema.Properties["format"], datav1alpha1.DefaultFormat},
		{"sidecar.prefetch", spec.Properties["sidecar"].Properties["prefetch"], datav1alpha1.DefaultPrefetch},
		{"packing.method", spec.Properties["packing"].Properties["method"], datav1alpha1.DefaultPackingMethod},
		{"packing.window", spec.Properties["packing"].Properties["window"], datav1alpha1.DefaultPackingWindow},
		{"packing.overlong", spec.Properties["packing"].Properties["overlong"], datav1alpha1.DefaultOverlong},
	}
	for _, tt := range tests {
		want, _ := json.Marshal(tt.goVal)
		if tt.schema.Default == nil || string(tt.schema.Default.Raw) != string(want) {
			t.Errorf("%s: CRD default %v, Go default %s", tt.name, tt.schema.Default, want)
		}
	}
}

// A bucketed spec plans each stream's buckets as lanes, stream-major,
// with the stream's weight, and its labels say what each bucket holds;
// what the CRD's rules cannot check of aspect ratios is refused here.
func TestParamsPlansEachStreamsBucketsAsLanes(t *testing.T) {
	withBuckets := func(x planner.StreamIndex, lanes ...planner.StreamIndex) planner.StreamIndex {
		x.Buckets = lanes
		return x
	}
	spec := &datav1alpha1.TrainingDatasetSpec{
		Streams:         []datav1alpha1.Stream{{Name: "a", Proportion: "2"}, {Name: "b", Proportion: "1"}},
		NumSplits:       2,
		GlobalBatchSize: 4,
		Bucketing:       &datav1alpha1.Bucketing{Column: "image", AspectRatios: []string{"3/4", "4/3"}},
	}
	p, err := Params(spec, []planner.StreamIndex{withBuckets(idx(90), idx(30), idx(40), idx(20)), withBuckets(idx(30), idx(10), idx(10), idx(10))})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range p.Streams {
		names = append(names, s.Name+":"+s.Proportion)
	}
	if got := strings.Join(names, " "); got != "a[0]:2 a[1]:2 a[2]:2 b[0]:1 b[1]:1 b[2]:1" {
		t.Errorf("lanes %s", got)
	}
	if b := p.Bucketing; b == nil || b.Buckets != 3 || strings.Join(b.Streams, ",") != "a,b" ||
		strings.Join(b.Labels, "; ") != "aspect ratio below 3/4; aspect ratio from 3/4 below 4/3; aspect ratio from 4/3" {
		t.Errorf("bucketing %+v", p.Bucketing)
	}
	for _, tc := range []struct {
		b    datav1alpha1.Bucketing
		want string
	}{
		{datav1alpha1.Bucketing{Column: "image", AspectRatios: []string{"4/3", "1.0"}}, "spec.bucketing.aspectRatios: \"4/3, 1.0\": widths over heights above 0"},
		{datav1alpha1.Bucketing{Column: "image", AspectRatios: []string{"0/1"}}, "spec.bucketing.aspectRatios"},
		{datav1alpha1.Bucketing{Column: "tokens", Boundaries: []int64{10, 10}}, "spec.bucketing.boundaries: [10 10]: lengths above 0 in ascending order"},
		{datav1alpha1.Bucketing{Column: "tokens"}, "spec.bucketing: give boundaries (lengths) or aspectRatios (images)"},
	} {
		spec.Bucketing = &tc.b
		if _, err := Params(spec, []planner.StreamIndex{idx(1), idx(1)}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %q", tc.b, err, tc.want)
		}
	}
	labels, err := BucketLabels(&datav1alpha1.Bucketing{Column: "tokens", Boundaries: []int64{512, 2048}})
	if err != nil || strings.Join(labels, "; ") != "length below 512; length from 512 below 2048; length from 2048" {
		t.Errorf("labels %q, %v", labels, err)
	}
}

// Each bucket's batch size comes from batchSizes, or from a budget over
// the bucket's longest possible sample (the last takes globalBatchSize).
func TestBucketBatchSizesFromSizesOrABudget(t *testing.T) {
	spec := &datav1alpha1.TrainingDatasetSpec{NumSplits: 4, GlobalBatchSize: 8}
	for _, tc := range []struct {
		b    datav1alpha1.Bucketing
		want string
	}{
		{datav1alpha1.Bucketing{Boundaries: []int64{128, 512}}, "[]"},
		{datav1alpha1.Bucketing{Boundaries: []int64{128, 512}, BatchSizes: []int64{32, 16, 8}}, "[32 16 8]"},
		// 8192 tokens: 64 of at most 127, 16 of at most 511 (a multiple of 4), then 8.
		{datav1alpha1.Bucketing{Boundaries: []int64{128, 512}, Budget: ptr.To(int64(8192))}, "[64 16 8]"},
		{datav1alpha1.Bucketing{Boundaries: []int64{1, 3000}, Budget: ptr.To(int64(8192))}, "spec.bucketing.budget: 8192 holds fewer than numSplits (4) samples of bucket 1 (lengths below 3000)"},
		{datav1alpha1.Bucketing{AspectRatios: []string{"1"}, Budget: ptr.To(int64(8192))}, "spec.bucketing.budget: sizes each bucket's batches by its longest sample"},
		{datav1alpha1.Bucketing{Boundaries: []int64{8}, Budget: ptr.To(int64(64)), BatchSizes: []int64{8, 8}}, "give batchSizes or a budget, not both"},
	} {
		spec.Bucketing = &tc.b
		got, err := BucketBatchSizes(spec)
		if s := fmt.Sprint(got); err != nil && !strings.Contains(err.Error(), tc.want) || err == nil && s != tc.want {
			t.Errorf("%+v: got %s, %v; want %s", tc.b, s, err, tc.want)
		}
	}
}

// A tokenized stream's tokenizer (its pinned hash) and options enter the
// fingerprint, the stream's own over the dataset's; a dataset that does
// not tokenize keeps the fingerprint it had.
func TestTokenizationEntersTheFingerprint(t *testing.T) {
	sum := func(c byte) string { return strings.Repeat(string(c), 64) }
	base := func() *datav1alpha1.TrainingDatasetSpec {
		return &datav1alpha1.TrainingDatasetSpec{Streams: []datav1alpha1.Stream{{Name: "a"}, {Name: "b"}}, NumSplits: 2, GlobalBatchSize: 2}
	}
	fingerprint := func(spec *datav1alpha1.TrainingDatasetSpec) string {
		p, err := Params(spec, []planner.StreamIndex{idx(10), idx(10)})
		if err != nil {
			t.Fatal(err)
		}
		pl, err := planner.New(p)
		if err != nil {
			t.Fatal(err)
		}
		return pl.Fingerprint().Sum
	}
	plain := fingerprint(base())
	tok := func(c byte, column string) *datav1alpha1.Tokenize {
		return &datav1alpha1.Tokenize{Tokenizer: datav1alpha1.TokenizerFile{URI: "s3://b/tokenizer.json", SHA256: sum(c)}, Column: column}
	}
	withDefault := base()
	withDefault.Tokenize = tok('a', "text")
	otherFile := base()
	otherFile.Tokenize = tok('b', "text")
	otherColumn := base()
	otherColumn.Tokenize = tok('a', "body")
	noSpecial := base()
	noSpecial.Tokenize = tok('a', "text")
	noSpecial.Tokenize.AddSpecialTokens = ptr.To(false)
	ownOverDefault := base()
	ownOverDefault.Tokenize = tok('a', "text")
	ownOverDefault.Streams[1].Tokenize = tok('b', "text")
	chat := func(template, eos string) *datav1alpha1.TrainingDatasetSpec {
		s := base()
		s.Tokenize = tok('a', "text")
		s.Tokenize.Chat = &datav1alpha1.ChatTemplate{Template: template, EOSToken: eos}
		return s
	}
	seen := map[string]string{"plain": plain}
	for name, spec := range map[string]*datav1alpha1.TrainingDatasetSpec{"default": withDefault, "other file": otherFile, "other column": otherColumn,
		"no special tokens": noSpecial, "a stream's own": ownOverDefault, "chat": chat("{{ x }}", "</s>"),
		"another chat template": chat("{{ y }}", "</s>"), "another eos token": chat("{{ x }}", "<eos>")} {
		f := fingerprint(spec)
		for other, g := range seen {
			if f == g {
				t.Errorf("%s has the fingerprint of %s", name, other)
			}
		}
		seen[name] = f
	}
	if TokenizeOf(ownOverDefault, 1).Tokenizer.SHA256 != sum('b') || TokenizeOf(ownOverDefault, 0).Tokenizer.SHA256 != sum('a') || TokenizeOf(base(), 0) != nil {
		t.Error("TokenizeOf: a stream's own, else the dataset's, else none")
	}
}

package controllers

import (
	"strings"
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
)

// The index a tokenized stream's counts are of is read from the head of
// their index, token by token, before its shards; anything else reads as
// not found.
func TestTheIndexOfTokenCountsIsReadFromTheirHead(t *testing.T) {
	long := strings.Repeat("x", 70<<10)
	for _, tc := range []struct {
		name, data, want string
		ok               bool
	}{
		{"as index writes it", `{"shardfeed": 1, "column": "input_ids", "measure": "elements", "filter": "id > 2", "index": "xxh64:ab", "tokenize": "t", "shards": [{"samples": 1}]}`, "xxh64:ab", true},
		{"its shards never read", `{"index": "xxh64:ab", "shards": [` + long, "xxh64:ab", true},
		{"past the head", `{"filter": "` + long + `", "index": "xxh64:ab"}`, "", false},
		{"no index", `{"shardfeed": 1, "shards": []}`, "", false},
		{"not a string", `{"index": 7}`, "", false},
		{"not an object", `["index", "xxh64:ab"]`, "", false},
		{"nothing", ``, "", false},
	} {
		got, ok := jsonField(strings.NewReader(tc.data[:min(len(tc.data), lengthsHeadBytes)]), "index")
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// What a stream's Measure and Join Jobs measure is named by its filter,
// packing, bucketing and tokenize: another of any is another measuring.
func TestAMeasuringIsNamedByWhatItMeasures(t *testing.T) {
	base := func() *datav1alpha1.TrainingDataset {
		return &datav1alpha1.TrainingDataset{Spec: datav1alpha1.TrainingDatasetSpec{
			Streams: []datav1alpha1.Stream{{Name: "a", Filter: "x > 1"}, {Name: "b"}},
			Packing: &datav1alpha1.Packing{Column: "tokens", SequenceLength: 64}}}
	}
	seen := map[string]string{measuringKey(base(), 0): "base"}
	for name, change := range map[string]func(*datav1alpha1.TrainingDataset){
		"another filter":  func(d *datav1alpha1.TrainingDataset) { d.Spec.Streams[0].Filter = "x > 2" },
		"another packing": func(d *datav1alpha1.TrainingDataset) { d.Spec.Packing.SequenceLength = 128 },
		"bucketing": func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Packing, d.Spec.Bucketing = nil, &datav1alpha1.Bucketing{Column: "tokens"}
		},
		"the dataset's tokenize": func(d *datav1alpha1.TrainingDataset) {
			d.Spec.Tokenize = &datav1alpha1.Tokenize{Column: "text", Tokenizer: datav1alpha1.TokenizerFile{URI: "s3://b/tok.json"}}
		},
	} {
		d := base()
		change(d)
		key := measuringKey(d, 0)
		if other, ok := seen[key]; ok {
			t.Errorf("%s measures as %s does", name, other)
		}
		seen[key] = name
	}
	a, again := base(), base()
	if measuringKey(a, 0) != measuringKey(again, 0) || measuringKey(a, 0) == measuringKey(a, 1) {
		t.Error("a measuring's name is not its stream's alone, or not the same for the same spec")
	}
}

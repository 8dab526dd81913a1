package planspec

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/utils/ptr"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/compact"
	"github.com/shardfeed/shardfeed/planner"
)

// TestGoldenIndexesAndFingerprints pins, for index files of every form as
// shardfeed and MDS wrote them (testdata/), the content hash the planner
// sees and the fingerprint of plans made from them through Params. Both are
// in the state of running jobs: a refactor that changes how an index is
// read, or how a spec becomes parameters, would make their resume refused.
func TestGoldenIndexesAndFingerprints(t *testing.T) {
	content := map[string]string{
		"web.mds.json":      "86ba69ab760790e14963cd418832e224ee06cf227d21b8fb038a52dc1dc0f782",
		"code.parquet.json": "3b8d853d16c5d0a2f01050cb158a7a298228e8e88d0b8044985367b8610cd52d",
		"chat.jsonl.json":   "36997603f327d95c158497a36ede31a7478ac1125ab18164315b57f0c9287686",
		"notes.list.json":   "d90359b14f78a529a6fc2f9590035eafa06d9a584edf7c5e2ed6dbfa55b28214",
	}
	indexes := map[string]planner.StreamIndex{}
	compacted := 0
	for file, want := range content {
		x, err := index.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		indexes[file] = x
		if got := x.ContentHash(); got != want {
			t.Errorf("%s: content hash %s, want %s: reading this index changed", file, got, want)
		}
		// A shardfeed index written compact has the same content hash:
		// the fingerprint is of the content, not of the form.
		data, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		l, err := index.ReadLayout(bytes.NewReader(data))
		if err != nil {
			continue // not shardfeed's own form
		}
		f := l.File
		if f == nil {
			continue
		}
		compact, err := compact.Encode(f)
		if err != nil {
			t.Fatal(err)
		}
		if cx, err := index.Read(bytes.NewReader(compact)); err != nil || cx.ContentHash() != want {
			t.Errorf("%s written compact: content hash %s (%v), want %s", file, cx.ContentHash(), err, want)
		}
		compacted++
	}
	if compacted != 2 {
		t.Errorf("%d golden indexes were shardfeed's own, want 2 (code, chat)", compacted)
	}
	streams := []datav1alpha1.Stream{
		{Name: "web", Format: datav1alpha1.FormatMDS},
		{Name: "code", Format: datav1alpha1.FormatParquet},
		{Name: "chat", Format: datav1alpha1.FormatJSONL},
		{Name: "notes"},
	}
	files := []string{"web.mds.json", "code.parquet.json", "chat.jsonl.json", "notes.list.json"}
	tests := []struct {
		name string
		spec datav1alpha1.TrainingDatasetSpec
		want string
	}{
		{name: "defaults", spec: datav1alpha1.TrainingDatasetSpec{NumSplits: 2, GlobalBatchSize: 4}, want: "v1-cae73878f80237286191d977027cbe48"},
		{name: "proportions", spec: datav1alpha1.TrainingDatasetSpec{NumSplits: 6, GlobalBatchSize: 12, EpochSize: ptr.To[int64](120),
			Shuffle: datav1alpha1.Shuffle{Seed: ptr.To[int64](7), BlockSize: ptr.To[int64](16)}, DropLast: ptr.To(false)}, want: "v1-fbaa93e9e97af0ad5b591aeafe9057a3"},
		{name: "repeat-choose-ordered", spec: datav1alpha1.TrainingDatasetSpec{NumSplits: 3, GlobalBatchSize: 3,
			Shuffle: datav1alpha1.Shuffle{Enabled: ptr.To(false)}}, want: "v1-057b5bf75d60a29b039a7a538f02fa37"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := tt.spec
			var xs []planner.StreamIndex
			for i, s := range streams {
				switch tt.name {
				case "proportions":
					s.Proportion = []string{"0.4", "0.3", "0.2", "0.1"}[i]
				case "repeat-choose-ordered":
					if i%2 == 0 {
						s.Repeat = "1.5"
					} else {
						s.Choose = ptr.To[int64](9)
					}
				}
				spec.Streams = append(spec.Streams, s)
				xs = append(xs, indexes[files[i]])
			}
			p, err := Params(&spec, xs)
			if err != nil {
				t.Fatal(err)
			}
			pl, err := planner.New(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := pl.Fingerprint().Sum; got != tt.want {
				t.Errorf("fingerprint %s, want %s: a running job's resume would be refused", got, tt.want)
			}
		})
	}
}

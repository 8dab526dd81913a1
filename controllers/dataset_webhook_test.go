package controllers

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
)

func TestValidateSpec(t *testing.T) {
	q := resource.MustParse
	tests := []struct {
		name    string
		sidecar datav1alpha1.SidecarSpec
		says    []string // empty: valid
	}{
		{name: "defaults"},
		{name: "a tagged image", sidecar: datav1alpha1.SidecarSpec{Image: "ghcr.io/shardfeed/shardfeed:v0.1.0"}},
		{name: "a digest", sidecar: datav1alpha1.SidecarSpec{Image: "registry.local:5000/shardfeed@sha256:" + strings.Repeat("a", 64)}},
		{name: "upper case", sidecar: datav1alpha1.SidecarSpec{Image: "GHCR.io/Shardfeed"}, says: []string{"spec.sidecar.image", "not an image reference"}},
		{name: "a bad digest", sidecar: datav1alpha1.SidecarSpec{Image: "shardfeed@sha256:abc"}, says: []string{"spec.sidecar.image"}},
		{name: "two tags", sidecar: datav1alpha1.SidecarSpec{Image: "shardfeed:a:b"}, says: []string{"spec.sidecar.image"}},
		{name: "requests within limits", sidecar: datav1alpha1.SidecarSpec{Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"cpu": q("500m"), "memory": q("1Gi")}, Limits: corev1.ResourceList{"memory": q("1Gi")}}}},
		{name: "a request above its limit", sidecar: datav1alpha1.SidecarSpec{Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"memory": q("2Gi")}, Limits: corev1.ResourceList{"memory": q("1Gi")}}},
			says: []string{"requests.memory (2Gi) is above its limit (1Gi)"}},
		{name: "an unknown resource", sidecar: datav1alpha1.SidecarSpec{Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{"gpu": q("1")}}}, says: []string{"limits.gpu is not a container resource"}},
		{name: "hugepages", sidecar: datav1alpha1.SidecarSpec{Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{"hugepages-2Mi": q("1Gi")}}}},
		{name: "claims", sidecar: datav1alpha1.SidecarSpec{Resources: corev1.ResourceRequirements{
			Claims: []corev1.ResourceClaim{{Name: "x"}}}}, says: []string{"claims is not supported"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := strings.Join(Validate(&datav1alpha1.TrainingDatasetSpec{Sidecar: tt.sidecar}), "; ")
			if len(tt.says) == 0 && got != "" {
				t.Fatalf("rejected: %s", got)
			}
			for _, s := range tt.says {
				if !strings.Contains(got, s) {
					t.Errorf("got %q, want it to say %q", got, s)
				}
			}
		})
	}
}

// A partition selection's syntax is checked at apply time; its columns,
// which only the tree names, when shardfeed index reads it.
func TestValidatePartitions(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    *datav1alpha1.Partitions
		says []string
	}{
		{"none", nil, nil},
		{"a selection", &datav1alpha1.Partitions{Select: "region == 'eu' && date >= '2024-01-02'"}, nil},
		{"any column name", &datav1alpha1.Partitions{Select: "zone == 'a'"}, nil},
		{"a syntax error", &datav1alpha1.Partitions{Select: "region = 'eu'"}, []string{"spec.streams[0].partitions.select: not a CEL expression"}},
		{"a column twice", &datav1alpha1.Partitions{Columns: []datav1alpha1.PartitionColumn{{Name: "a", Type: "utf8"}, {Name: "a", Type: "int32"}}},
			[]string{`spec.streams[0].partitions.columns names "a" twice`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &datav1alpha1.TrainingDatasetSpec{Streams: []datav1alpha1.Stream{{Name: "s", Format: datav1alpha1.FormatParquet, Partitions: tc.p}}}
			got := strings.Join(Validate(spec), "; ")
			if len(tc.says) == 0 && got != "" {
				t.Fatalf("rejected: %s", got)
			}
			for _, s := range tc.says {
				if !strings.Contains(got, s) {
					t.Errorf("got %q, want it to say %q", got, s)
				}
			}
		})
	}
}

// A row filter's syntax is checked at apply time; its columns, which only
// the stream's shards name, when shardfeed index --filter reads them.
func TestValidateFilter(t *testing.T) {
	for _, tc := range []struct {
		name, filter string
		says         string
	}{
		{"none", "", ""},
		{"a filter", "lang == 'en' && score >= 0.5", ""},
		{"any column name", "no_such_column > 3", ""},
		{"a syntax error", "lang = 'en'", "spec.streams[0].filter: not a CEL expression"},
		{"unbalanced", "(score > 1", "spec.streams[0].filter: not a CEL expression"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &datav1alpha1.TrainingDatasetSpec{Streams: []datav1alpha1.Stream{{Name: "s", Filter: tc.filter}}}
			got := strings.Join(Validate(spec), "; ")
			if tc.says == "" && got != "" {
				t.Fatalf("rejected: %s", got)
			}
			if !strings.Contains(got, tc.says) {
				t.Errorf("got %q, want it to say %q", got, tc.says)
			}
		})
	}
}

// spec.index names streams of the dataset's.
func TestValidateIndex(t *testing.T) {
	streams := []datav1alpha1.Stream{{Name: "pages"}}
	for _, tc := range []struct {
		name  string
		index *datav1alpha1.IndexJob
		says  []string
	}{
		{name: "none"},
		{name: "every stream", index: &datav1alpha1.IndexJob{}},
		{name: "a stream", index: &datav1alpha1.IndexJob{Streams: []string{"pages"}}},
		{name: "a stream not there", index: &datav1alpha1.IndexJob{Streams: []string{"pages", "chat"}},
			says: []string{`spec.index.streams names "chat", which is no stream`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(Validate(&datav1alpha1.TrainingDatasetSpec{Streams: streams, Index: tc.index}), "; ")
			if len(tc.says) == 0 && got != "" {
				t.Fatalf("rejected: %s", got)
			}
			for _, s := range tc.says {
				if !strings.Contains(got, s) {
					t.Errorf("got %q, want it to say %q", got, s)
				}
			}
		})
	}
}

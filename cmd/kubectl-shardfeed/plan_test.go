package main

import (
	"bytes"
	"strings"
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
)

func TestPlanShowsTheOperatorsIndexing(t *testing.T) {
	var out bytes.Buffer
	s := &planSummary{Dataset: "web", Namespace: "team-a", Indexed: "1/2, 41%", Indexing: []datav1alpha1.StreamIndexing{
		{Name: "pages", Phase: datav1alpha1.IndexingParts, Job: "web-pages-x-index-parts", Parts: 8, PartsDone: 3, Objects: 41000, Bytes: 50 << 30,
			ObjectsRead: 17210, BytesRead: 20 << 30, Rate: "286 objects/s, 349.5 MiB/s", ETA: "1m30s"},
		{Name: "code", Phase: datav1alpha1.IndexingListing},
	}}
	if err := writePlan(&out, s); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Indexing in the cluster (streams indexed 1/2, 41%)", "pages", "Indexing", "17210/41000", "20.0 GiB/50.0 GiB", "3/8",
		"286 objects/s, 349.5 MiB/s", "1m30s", "web-pages-x-index-parts", "code"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the summary lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := writePlan(&out, &planSummary{Dataset: "web", Namespace: "team-a"}); err != nil || strings.Contains(out.String(), "Indexing") {
		t.Errorf("a dataset not indexing shows indexing (%v):\n%s", err, out.String())
	}
}

package server_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestWaitsFillThePerRankHistogramAndRefuseWhatIsNotAReport: a trainer's
// report lands in its rank's data-wait histogram; a report from a rank of
// another pod, with a wait out of bounds, too many waits or no rank is
// refused naming the field, and leaves the histogram as it was.
func TestWaitsFillThePerRankHistogramAndRefuseWhatIsNotAReport(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := testServer(t, reg) // pod 0 of 2, 2 processes per pod: ranks 0 and 1
	many := "[" + strings.TrimSuffix(strings.Repeat("0.1,", 4097), ",") + "]"
	for _, tc := range []struct {
		name, body string
		code       int
		says       string
	}{
		{"a report", `{"rank": 1, "seconds": [0.0002, 0.03, 2]}`, http.StatusNoContent, ""},
		{"another of the same rank", `{"rank": 1, "seconds": [0.5]}`, http.StatusNoContent, ""},
		{"rank 0", `{"rank": 0, "seconds": []}`, http.StatusNoContent, ""},
		{"another pod's rank", `{"rank": 2, "seconds": [0.1]}`, http.StatusBadRequest, "rank 2 is not one this sidecar serves (0 to 1)"},
		{"a negative wait", `{"rank": 1, "seconds": [0.1, -3]}`, http.StatusBadRequest, "wait 1 is -3 seconds"},
		{"a wait of a year", `{"rank": 1, "seconds": [3.2e7]}`, http.StatusBadRequest, "a wait is between 0 and 86400"},
		{"too many", `{"rank": 1, "seconds": ` + many + `}`, http.StatusBadRequest, "4097 waits in one report, at most 4096"},
		{"no rank", `{"seconds": [0.1]}`, http.StatusBadRequest, "names no rank"},
		{"not JSON", `rank=1`, http.StatusBadRequest, "not a report of waits"},
		{"too large", `{"rank": 1, "seconds": [` + strings.Repeat(" ", 70<<10) + `]}`, http.StatusBadRequest, "at most 65536 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/waits", strings.NewReader(tc.body)))
			if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.says) {
				t.Errorf("%d %q, want %d saying %q", rec.Code, rec.Body.String(), tc.code, tc.says)
			}
		})
	}
	got := map[string]*dto.Histogram{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "shardfeed_sidecar_data_wait_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetHistogram()
		}
	}
	if len(got) != 2 || got["1"].GetSampleCount() != 4 || got["1"].GetSampleSum() != 2.5302 || got["0"].GetSampleCount() != 0 {
		t.Errorf("histograms per rank: %v, want rank 1 with 4 waits summing to 2.5302 and rank 0 with none", got)
	}
}

// TestACommitSetsTheCommittedGaugesAndBuildInfoIsOne: the committed epoch
// and step of the job, labelled with the dataset and job, follow the last
// commit; a refused commit leaves them; build_info is 1.
func TestACommitSetsTheCommittedGaugesAndBuildInfoIsOne(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := testServer(t, reg)
	for _, body := range []string{`{"epoch": 0, "step": 2}`, `{"epoch": 0, "step": 1}`} { // the second goes back: refused
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/commit", strings.NewReader(body)))
	}
	want := map[string]float64{"shardfeed_sidecar_committed_epoch": 0, "shardfeed_sidecar_committed_step": 2, "shardfeed_sidecar_build_info": 1}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		w, ok := want[f.GetName()]
		if !ok {
			continue
		}
		m := f.GetMetric()[0]
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if m.GetGauge().GetValue() != w {
			t.Errorf("%s = %v, want %v", f.GetName(), m.GetGauge().GetValue(), w)
		}
		if f.GetName() != "shardfeed_sidecar_build_info" && (labels["dataset"] != "ds" || labels["job"] != "fuzz") {
			t.Errorf("%s labels %v, want dataset ds and job fuzz", f.GetName(), labels)
		}
		if f.GetName() == "shardfeed_sidecar_build_info" && labels["version"] == "" {
			t.Errorf("build_info has no version: %v", labels)
		}
		delete(want, f.GetName())
	}
	if len(want) > 0 {
		t.Errorf("not scraped: %v", want)
	}
}

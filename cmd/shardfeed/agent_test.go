package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/shardfeed/shardfeed/internal/budget"
)

// The red team's: random tokens at the agent's metrics port were each a
// TokenReview, without bound. One address gets its budget, and another
// address is still served.
func TestTheMetricsPortBoundsEachAddresssReviews(t *testing.T) {
	reviewed := 0
	h := budgetReviews(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reviewed++ }), budget.New(1, 5, 4096).WithTotal(10, 20))
	status := map[int]int{}
	for range 30 {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		r.RemoteAddr = "10.0.0.7:40000"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		status[w.Code]++
	}
	if reviewed != 5 || status[http.StatusTooManyRequests] != 25 {
		t.Errorf("30 scrapes from one address: %d reached the review, answers %v; want 5 and 25 refused", reviewed, status)
	}
	r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	r.RemoteAddr = "10.0.0.8:40000"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK || reviewed != 6 {
		t.Errorf("another address after the first's flood: %d", w.Code)
	}
}

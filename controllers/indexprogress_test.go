package controllers

import (
	"testing"
	"time"
)

func TestRateAndETA(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		objects, bytes, total int64
		elapsed               time.Duration
		rate, eta             string
	}{
		{"nothing read yet", 0, 0, 1 << 30, time.Minute, "", ""},
		{"under a second", 10, 100, 1000, 500 * time.Millisecond, "", ""},
		{"a quarter in a minute", 1500, 256 << 20, 1 << 30, time.Minute, "25 objects/s, 4.3 MiB/s", "3m0s"},
		{"thousands a second", 120_000, 1 << 30, 4 << 30, 10 * time.Second, "12.0k objects/s, 102.4 MiB/s", "30s"},
		{"done", 7, 700, 700, 2 * time.Second, "3.5 objects/s, 350 B/s", "0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rate, eta := rateAndETA(tc.objects, tc.bytes, tc.total, tc.elapsed)
			if rate != tc.rate || eta != tc.eta {
				t.Errorf("rateAndETA = %q, %q; want %q, %q", rate, eta, tc.rate, tc.eta)
			}
		})
	}
}

package testenv

import (
	"regexp"
	"strings"
	"testing"
)

func TestBucketNameIsValidForAnyTestName(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$`)
	tests := []struct {
		name     string
		testName string
		n        int64
		want     string
	}{
		{name: "plain", testName: "TestPutGet", n: 1, want: "testputget-1"},
		{name: "subtest", testName: "TestRead/zstd_level_3", n: 2, want: "testread-zstd-level-3-2"},
		{name: "symbols only", testName: "/_/", n: 3, want: "test-3"},
		{name: "long", testName: "Test" + strings.Repeat("X", 100), n: 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := bucketName(tt.testName, tt.n)
			if !valid.MatchString(got) {
				t.Fatalf("bucketName(%q) = %q, not a valid S3 bucket name", tt.testName, got)
			}
			if tt.want != "" && got != tt.want {
				t.Errorf("bucketName(%q) = %q, want %q", tt.testName, got, tt.want)
			}
		})
	}
}

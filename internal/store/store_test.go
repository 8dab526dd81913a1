package store

import (
	"strings"
	"testing"
)

func TestCleanPrefix(t *testing.T) {
	for in, want := range map[string]string{"": "", "/": "", "/a": "a/", "/a/b/": "a/b/", "//a//b": "a/b/"} {
		if got := CleanPrefix(in); got != want {
			t.Errorf("CleanPrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRoot(t *testing.T) {
	tests := []struct{ uri, want, wantErr string }{
		{"s3://wh/shardfeed/events/", "s3://wh/", ""},
		{"gs://wh", "gs://wh/", ""},
		{"az://acct/data/idx/", "az://acct/data/", ""},
		{"abfss://data@acct.dfs.core.windows.net/idx/", "abfss://data@acct.dfs.core.windows.net/", ""},
		{"file:///tmp/x/", "file:///", ""},
		{"az://acct", "", "names no account and container"},
		{"s3:///x/", "", "names no bucket"},
		{"wh/x", "", "not a store URI"},
	}
	for _, tt := range tests {
		got, err := Root(tt.uri)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Root(%q) = %q, %v; want an error with %q", tt.uri, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Root(%q) = %q, %v; want %q", tt.uri, got, err, tt.want)
		}
	}
}

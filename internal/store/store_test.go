package store

import (
	"testing"
)

func TestCleanPrefix(t *testing.T) {
	for in, want := range map[string]string{"": "", "/": "", "/a": "a/", "/a/b/": "a/b/", "//a//b": "a/b/"} {
		if got := CleanPrefix(in); got != want {
			t.Errorf("CleanPrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

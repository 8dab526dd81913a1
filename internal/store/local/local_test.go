package local

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestDir(t *testing.T) {
	tests := []struct {
		uri, want, wantErr string
	}{
		{uri: "file:///data/web/", want: "/data/web"},
		{uri: "file://localhost/data/web", want: "/data/web"},
		{uri: "s3://bucket/web/", wantErr: "not a file:// URI"},
		{uri: "file://host/data", wantErr: "names host"},
		{uri: "file://", wantErr: "no path"},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			got, err := Dir(tt.uri)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Dir = %q, %v; want error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || filepath.Clean(got) != tt.want {
				t.Fatalf("Dir = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	if _, err := Dir("s3://b/p"); !errors.Is(err, ErrNotLocal) {
		t.Errorf("error for s3:// is not ErrNotLocal: %v", err)
	}
}

// A store's URI ends in one "/", the filesystem root's too: file:///, the
// root store.Root names (an Iceberg table in a local warehouse is read
// from there).
func TestURIEndsInOneSlash(t *testing.T) {
	for dir, want := range map[string]string{"/": "file:///", "/data/web": "file:///data/web/"} {
		if got := newFileStore(dir).URI(); got != want {
			t.Errorf("URI of %s = %q, want %q", dir, got, want)
		}
	}
}

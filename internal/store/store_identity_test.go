package store

import (
	"context"
	"os"
	"strings"
	"testing"
)

func TestTokenFileIsReadAtEachExchange(t *testing.T) {
	path := t.TempDir() + "/web"
	token := TokenFile(path)
	if _, err := token(context.Background()); err == nil || !strings.Contains(err.Error(), "workload identity token") {
		t.Fatalf("a missing token file: %v", err)
	}
	for _, want := range []string{"first", "rotated"} {
		if err := os.WriteFile(path, []byte(want+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := token(context.Background()); err != nil || got != want {
			t.Fatalf("token = %q, %v; want %q", got, err, want)
		}
	}
}

func TestEndpointURL(t *testing.T) {
	tests := []struct {
		endpoint string
		insecure bool
		want     string // "" : refused
	}{
		{"storage.example.com", false, "https://storage.example.com"},
		{"127.0.0.1:4443", true, "http://127.0.0.1:4443"},
		{"https://storage.example.com:443/", false, "https://storage.example.com:443"},
		{"http://127.0.0.1:10000", true, "http://127.0.0.1:10000"},
		{"http://127.0.0.1:10000", false, ""},
		{"http://host/bucket", true, ""},
		{"ftp://host", true, ""},
	}
	for _, tt := range tests {
		u, err := EndpointURL(tt.endpoint, tt.insecure)
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("%q accepted as %s", tt.endpoint, u)
		case tt.want != "" && (err != nil || u.String() != tt.want):
			t.Errorf("%q = %v, %v; want %s", tt.endpoint, u, err, tt.want)
		}
	}
}

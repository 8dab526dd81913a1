package store

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// An object's body is capped as an error's while held and read whole once
// released; ObjectBody's is never capped, any other 2xx body always is.
func TestObjectBodiesAreCappedOnlyWhileHeld(t *testing.T) {
	const size = MaxErrorBody * 3
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("x", size))
	}))
	defer srv.Close()
	client := HTTPClient(nil)
	read := func(ctx context.Context, release func()) (int64, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer func() { _ = resp.Body.Close() }()
		if release != nil {
			release()
		}
		return io.Copy(io.Discard, resp.Body)
	}
	held, release := HeldObjectBody(context.Background())
	stillHeld, _ := HeldObjectBody(context.Background())
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		release func()
		want    int64 // -1: refused at the cap
	}{
		{"released", held, release, size},
		{"held", stillHeld, nil, -1},
		{"an object's", ObjectBody(context.Background()), nil, size},
		{"an answer's", context.Background(), nil, MaxErrorBody * 3},
	} {
		n, err := read(tc.ctx, tc.release)
		switch {
		case tc.want < 0 && !errors.Is(err, ErrBodyTooLarge):
			t.Errorf("%s: read %d bytes, %v; want %v at %d bytes", tc.name, n, err, ErrBodyTooLarge, MaxErrorBody)
		case tc.want < 0 && n != MaxErrorBody:
			t.Errorf("%s: read %d bytes before the cap, want %d", tc.name, n, MaxErrorBody)
		case tc.want >= 0 && (err != nil || n != tc.want):
			t.Errorf("%s: read %d bytes, %v; want %d", tc.name, n, err, tc.want)
		}
	}
}

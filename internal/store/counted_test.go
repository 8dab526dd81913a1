package store_test

import (
	"bytes"
	"context"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/local"
)

// Every request a counted store makes is counted by kind, with the bytes
// its reads returned, and a retried attempt counts again.
func TestCountedStoreCountsEveryRequest(t *testing.T) {
	ctx := context.Background()
	var c store.Counts
	reg := store.Registry{local.Scheme: local.Open}
	st, err := reg.Open(ctx, store.Source{URI: "file://" + t.TempDir() + "/", Counts: &c})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "a/x", strings.NewReader("hello world"), 11); err != nil {
		t.Fatal(err)
	}
	r, err := st.Get(ctx, "a/x", 6, 5)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(r); err != nil || string(b) != "world" {
		t.Fatalf("read %q, %v", b, err)
	}
	_ = r.Close()
	if _, err := st.Get(ctx, "missing", 0, -1); err == nil {
		t.Fatal("a missing object was read")
	}
	if _, err := st.Stat(ctx, "a/x"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.List(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ListDir(ctx, "a/"); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, "a/x"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		got, want int64
	}{
		{"gets (the missing object's too)", c.Gets.Load(), 2},
		{"stats", c.Stats.Load(), 1},
		{"lists", c.Lists.Load(), 2},
		{"puts", c.Puts.Load(), 1},
		{"deletes", c.Deletes.Load(), 1},
		{"retries", c.Retries.Load(), 0},
		{"read bytes", c.ReadBytes.Load(), 5},
		{"requests", c.Requests(), 7},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}

// flaky is a store whose first n reads fail with a 503, retried by its
// source's policy as every real store does.
type flaky struct {
	store.Store
	retry store.Retry
	fails int
}

func (f *flaky) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	var out io.ReadCloser
	err := f.retry.Do(ctx, func(context.Context, context.CancelFunc) error {
		if f.fails > 0 {
			f.fails--
			return &store.StatusError{Status: 503, Code: "SlowDown"}
		}
		out = io.NopCloser(bytes.NewReader([]byte("ok")))
		return nil
	})
	return out, err
}

func TestCountedStoreCountsRetriesAndKeepsTheCallersHook(t *testing.T) {
	var c store.Counts
	heard := 0
	reg := store.Registry{"flaky": func(_ context.Context, src store.Source, _ *url.URL) (store.Store, error) {
		return &flaky{retry: src.Retry, fails: 2}, nil
	}}
	st, err := reg.Open(context.Background(), store.Source{URI: "flaky://b/", Counts: &c, Retry: store.Retry{BaseDelay: time.Millisecond,
		MaxDelay: time.Millisecond, MaxElapsed: time.Minute, OnRetry: func(error, int, time.Duration) { heard++ }}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.Get(context.Background(), "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, r)
	if c.Gets.Load() != 1 || c.Retries.Load() != 2 || c.Requests() != 3 || heard != 2 || c.ReadBytes.Load() != 2 {
		t.Fatalf("gets %d, retries %d, requests %d, the caller's hook heard %d, bytes %d; want 1, 2, 3, 2, 2",
			c.Gets.Load(), c.Retries.Load(), c.Requests(), heard, c.ReadBytes.Load())
	}
}

// Package storetest is the conformance test every store.Store passes.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/store"
)

// Conformance runs the behaviour every Store must have against st, an
// empty prefix, opened as d describes: a new store passes it against a
// real server of its protocol.
func Conformance(t *testing.T, d store.Descriptor, st store.Store) {
	t.Helper()
	CheckDescriptor(t, d)
	if u, err := url.Parse(st.URI()); err != nil || u.Scheme != d.Scheme {
		t.Fatalf("the store's URI %q is not one of the descriptor's scheme %s://", st.URI(), d.Scheme)
	}
	ctx := context.Background()
	payload := bytes.Repeat([]byte("0123456789"), 50_000) // 500 kB
	for _, key := range []string{"index.json", "shards/shard.00000.mds", "shards/shard.00001.mds"} {
		if err := st.Put(ctx, key, bytes.NewReader(payload), int64(len(payload))); err != nil {
			t.Fatalf("Put %s: %v", key, err)
		}
	}
	t.Run("list", func(t *testing.T) {
		objs, err := st.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, o := range objs {
			keys = append(keys, o.Key)
			if o.Size != int64(len(payload)) {
				t.Errorf("%s: size %d, want %d", o.Key, o.Size, len(payload))
			}
		}
		if got := strings.Join(keys, ","); got != "index.json,shards/shard.00000.mds,shards/shard.00001.mds" {
			t.Errorf("List keys = %s", got)
		}
	})
	t.Run("list a directory", func(t *testing.T) {
		for _, tc := range []struct{ dir, want string }{
			{"", "dirs [shards/], objects [index.json]"},
			{"shards/", "dirs [], objects [shards/shard.00000.mds shards/shard.00001.mds]"},
			{"missing/", "dirs [], objects []"},
		} {
			l, err := st.ListDir(ctx, tc.dir)
			if err != nil {
				t.Fatalf("ListDir(%q): %v", tc.dir, err)
			}
			var keys []string
			for _, o := range l.Objects {
				keys = append(keys, o.Key)
				if o.Size != int64(len(payload)) {
					t.Errorf("%s: size %d, want %d", o.Key, o.Size, len(payload))
				}
			}
			if got := fmt.Sprintf("dirs %v, objects %v", append([]string{}, l.Dirs...), append([]string{}, keys...)); got != tc.want {
				t.Errorf("ListDir(%q) = %s, want %s", tc.dir, got, tc.want)
			}
		}
		for _, dir := range []string{"shards", "../", "/shards/", "a//"} {
			if _, err := st.ListDir(ctx, dir); err == nil || !strings.Contains(err.Error(), "not a plain relative path") {
				t.Errorf("ListDir(%q) = %v, want a refusal", dir, err)
			}
		}
	})
	t.Run("list the tree in parallel", func(t *testing.T) {
		// A deeper tree, and List's keys, sorted, from ListTree at once.
		nested := []string{"tree/a/1.bin", "tree/a/b/2.bin", "tree/c/3.bin", "tree/c/d/e/4.bin", "tree/5.bin"}
		for _, key := range nested {
			if err := st.Put(ctx, key, strings.NewReader("x"), 1); err != nil {
				t.Fatal(err)
			}
		}
		defer func() {
			for _, key := range nested {
				_ = st.Delete(ctx, key)
			}
		}()
		want, err := st.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, parallel := range []int{1, 3, 16} {
			var seen int64
			got, err := store.ListTree(ctx, st, parallel, func(n int64) { seen = max(seen, n) })
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) || seen != int64(len(want)) {
				t.Errorf("ListTree(%d) = %v (progress %d), List = %v", parallel, got, seen, want)
			}
		}
	})
	t.Run("stat", func(t *testing.T) {
		o, err := st.Stat(ctx, "shards/shard.00001.mds")
		if err != nil || o.Size != int64(len(payload)) {
			t.Fatalf("Stat = %+v, %v", o, err)
		}
		_, err = st.Stat(ctx, "shards/missing.mds")
		if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "shards/missing.mds") {
			t.Errorf("Stat of a missing object = %v, want store.ErrNotFound naming the key", err)
		}
	})
	tests := []struct {
		name   string
		off, n int64
		want   []byte
	}{
		{"whole", 0, -1, payload},
		{"range", 12, 7, payload[12:19]},
		{"tail", int64(len(payload)) - 3, -1, payload[len(payload)-3:]},
		{"empty range", 5, 0, nil},
	}
	for _, tt := range tests {
		t.Run("get "+tt.name, func(t *testing.T) {
			r, err := st.Get(ctx, "shards/shard.00000.mds", tt.off, tt.n)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			_ = r.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tt.want) {
				t.Errorf("Get(%d, %d) = %d bytes, want %d", tt.off, tt.n, len(got), len(tt.want))
			}
		})
	}
	t.Run("get missing", func(t *testing.T) {
		_, err := st.Get(ctx, "nope", 0, -1)
		if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "nope") {
			t.Errorf("Get of a missing object = %v, want store.ErrNotFound naming the key", err)
		}
	})
	t.Run("keys that leave the prefix", func(t *testing.T) {
		for _, key := range []string{"../x", "/etc/passwd", "a/../../b", ""} {
			if _, err := st.Get(ctx, key, 0, -1); err == nil || !strings.Contains(err.Error(), "not a plain relative path") {
				t.Errorf("Get(%q) = %v, want a refusal", key, err)
			}
		}
	})
	t.Run("delete", func(t *testing.T) {
		if err := st.Put(ctx, "gone/x.bin", strings.NewReader("x"), 1); err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second time the object is missing: no error
			if err := st.Delete(ctx, "gone/x.bin"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := st.Stat(ctx, "gone/x.bin"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Stat after Delete = %v, want store.ErrNotFound", err)
		}
		if err := st.Delete(ctx, "../x"); err == nil || !strings.Contains(err.Error(), "not a plain relative path") {
			t.Errorf("Delete(../x) = %v, want a refusal", err)
		}
	})
	t.Run("put replaces", func(t *testing.T) {
		if err := st.Put(ctx, "index.json", strings.NewReader("v2"), 2); err != nil {
			t.Fatal(err)
		}
		r, err := st.Get(ctx, "index.json", 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = r.Close() }()
		if b, _ := io.ReadAll(r); string(b) != "v2" {
			t.Errorf("after Put, Get = %q", b)
		}
	})
}

// CheckDescriptor checks the facts a store's descriptor gives: a scheme,
// an opener and a root; secret keys that say what they are; a default host (and
// one the store reaches) for every store but the local one; and the
// descriptor is the one stores look its scheme up by.
func CheckDescriptor(t *testing.T, d store.Descriptor) {
	t.Helper()
	if d.Scheme == "" || d.Open == nil || d.Root == nil {
		t.Fatalf("descriptor %+v has no scheme, no opener or no root", d)
	}
	if d.SecretKeys.Complete != nil && d.SecretKeys.Describe == "" {
		t.Errorf("%s://: its secret keys do not say what they are", d.Scheme)
	}
	if d.SecretKeys.Complete != nil && d.SecretKeys.Complete(map[string][]byte{}) {
		t.Errorf("%s://: an empty Secret has every key it needs", d.Scheme)
	}
	if d.DefaultHost != nil {
		uri := d.Scheme + "://acct.dfs.core.windows.net/c/p/" // a bucket, or abfss://'s account
		if strings.HasPrefix(d.Scheme, "az") {
			uri = d.Scheme + "://acct/c/p/"
		}
		u, _ := url.Parse(uri)
		h, err := d.DefaultHost(u, "")
		if err != nil || h == "" || h != strings.ToLower(h) || strings.Contains(h, "/") {
			t.Errorf("%s://: default host %q (%v) is not a lower-case host", d.Scheme, h, err)
		}
		// The host a source reaches without an endpoint is its own
		// cloud's storage host, for the URI's account.
		policy := &store.Endpoints{Cloud: d.CloudHosts, CloudAllowed: true, Domains: d.CloudDomains}
		account := ""
		if d.Account != nil {
			account = d.Account(u)
		}
		if err := policy.Gate(d.Cloud, store.UseStorage, account).Check("https", h); err != nil {
			t.Errorf("%s://: default host %q is not one of its cloud's storage hosts: %v", d.Scheme, h, err)
		}
		if d.AudienceAllowed == nil || d.Audience != "" && !d.AudienceAllowed(d.Audience) {
			t.Errorf("%s://: its default audience %q is not one it allows", d.Scheme, d.Audience)
		}
	}
}

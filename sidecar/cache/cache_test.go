package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
)

// fixture is a file store holding shards of the given sizes, and their
// Shard descriptions with xxh64 hashes.
func fixture(t *testing.T, sizes ...int) (store.Store, []Shard, [][]byte) {
	t.Helper()
	ctx := context.Background()
	st, err := stores.Open(ctx, store.Source{URI: "file://" + t.TempDir() + "/"})
	if err != nil {
		t.Fatal(err)
	}
	var shards []Shard
	var data [][]byte
	for i, n := range sizes {
		b := bytes.Repeat([]byte{byte('a' + i)}, n)
		key := fmt.Sprintf("shard.%05d.mds", i)
		if err := st.Put(ctx, key, bytes.NewReader(b), int64(n)); err != nil {
			t.Fatal(err)
		}
		sum, _ := checksum.Of("xxh64", b)
		shards = append(shards, Shard{Stream: "web", Key: key, Size: int64(n), Hash: sum.String()})
		data = append(data, b)
	}
	return st, shards, data
}

func newCache(t *testing.T, dir string, st store.Store, opts Options) *Cache {
	t.Helper()
	opts.Dir = dir
	c, err := New(opts, map[string]store.Store{"web": st})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAcquireDownloadsVerifiesAndShares(t *testing.T) {
	st, shards, data := fixture(t, 1000, 2000)
	c := newCache(t, t.TempDir(), st, Options{})
	ctx := context.Background()

	var wg sync.WaitGroup
	paths := make([]string, 16)
	errs := make([]error, 16)
	for i := range paths {
		wg.Go(func() { paths[i], errs[i] = c.Acquire(ctx, shards[0]) })
	}
	wg.Wait()
	for i := range paths {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		got, err := os.ReadFile(paths[i])
		if err != nil || !bytes.Equal(got, data[0]) {
			t.Fatalf("reader %d got %d bytes, %v", i, len(got), err)
		}
	}
	if s := c.Stats(); s.Downloads != 1 || s.FetchedBytes != 1000 || s.Hits != 15 || s.HeldBytes != 1000 {
		t.Errorf("stats after 16 concurrent acquires = %+v, want 1 download, 15 hits, 1000 bytes held", s)
	}
	for range 16 {
		c.Release(shards[0])
	}
	if s := c.Stats(); s.HeldBytes != 0 || s.UsedBytes != 1000 {
		t.Errorf("stats after release = %+v", s)
	}
	if entries, _ := os.ReadDir(filepath.Join(c.opts.Dir, ".tmp")); len(entries) != 0 {
		t.Errorf("temporary files left: %v", entries)
	}
}

func TestCorruptShardFailsWithItsNameAndHashes(t *testing.T) {
	st, shards, _ := fixture(t, 1000)
	ctx := context.Background()
	tests := []struct {
		name  string
		mod   func(s Shard) Shard
		store func()
		want  []string
	}{
		{"flipped byte", func(s Shard) Shard { return s }, func() {
			b := bytes.Repeat([]byte{'a'}, 1000)
			b[500] ^= 1
			_ = st.Put(ctx, shards[0].Key, bytes.NewReader(b), 1000)
		}, []string{`stream "web": shard.00000.mds: xxh64 mismatch (index `, "in 3 downloads", "re-run shardfeed index"}},
		{"truncated", func(s Shard) Shard { return s }, func() {
			_ = st.Put(ctx, shards[0].Key, strings.NewReader("short"), 5)
		}, []string{"shard.00000.mds: size 5 bytes, want 1000"}},
		{"grown", func(s Shard) Shard { return s }, func() {
			_ = st.Put(ctx, shards[0].Key, bytes.NewReader(make([]byte, 1001)), 1001)
		}, []string{"size 1001 bytes, want 1000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.store()
			dir := t.TempDir()
			c := newCache(t, dir, st, Options{})
			_, err := c.Acquire(ctx, tt.mod(shards[0]))
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("Acquire = %v, want a CorruptError", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if _, err := os.Stat(c.path(shards[0])); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a corrupt shard is in the cache: %v", err)
			}
			if s := c.Stats(); s.UsedBytes != 0 || s.Downloads != 0 {
				t.Errorf("stats after a corrupt shard = %+v", s)
			}
		})
	}
}

// A shard whose object was deleted after the index was written (Lance's
// cleanup of an untagged old version, a lifecycle rule) fails naming it
// and what to do.
func TestDeletedShardSaysReRunIndex(t *testing.T) {
	for _, inPlace := range []bool{false, true} { // copied into the cache, or read in place
		t.Run(fmt.Sprintf("in place %t", inPlace), func(t *testing.T) {
			st, shards, _ := fixture(t, 1000)
			ctx := context.Background()
			if err := os.Remove(strings.TrimPrefix(st.URI(), "file://") + shards[0].Key); err != nil {
				t.Fatal(err)
			}
			c := newCache(t, t.TempDir(), st, Options{InPlace: inPlace})
			_, err := c.Acquire(ctx, shards[0])
			if err == nil {
				t.Fatal("a deleted shard was acquired")
			}
			for _, w := range []string{`stream "web": shard.00000.mds`, "deleted after the index was written", "re-run shardfeed index", "pin a Lance version by tag"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestLimitEvictsReleasedShardsNeverHeldOnes(t *testing.T) {
	st, shards, _ := fixture(t, 400, 400, 400, 400)
	ctx := context.Background()
	c := newCache(t, t.TempDir(), st, Options{LimitBytes: 1000, FullTimeout: 300 * time.Millisecond})
	for _, s := range shards[:2] {
		if _, err := c.Acquire(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	c.Release(shards[0]) // consumed; shards[1] still held
	if _, err := c.Acquire(ctx, shards[2]); err != nil {
		t.Fatalf("a third shard did not fit after releasing the first: %v", err)
	}
	if _, err := os.Stat(c.path(shards[0])); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the released shard was not evicted")
	}
	if _, err := os.Stat(c.path(shards[1])); err != nil {
		t.Errorf("the held shard was evicted: %v", err)
	}
	// Two shards are held (800 bytes): a fourth cannot fit.
	_, err := c.Acquire(ctx, shards[3])
	var fe *FullError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "raise cacheLimit to at least 1200") {
		t.Fatalf("Acquire over the limit = %v, want a FullError asking for 1200 bytes", err)
	}
	// Released in time, it fits.
	go func() { time.Sleep(100 * time.Millisecond); c.Release(shards[1]) }()
	if _, err := c.Acquire(ctx, shards[3]); err != nil {
		t.Fatalf("Acquire after a release during the wait: %v", err)
	}
	if s := c.Stats(); s.UsedBytes > 1000 || s.Evictions != 2 {
		t.Errorf("stats = %+v, want at most 1000 bytes used and 2 evictions", s)
	}
	big := Shard{Stream: "web", Key: shards[0].Key, Size: 5000}
	if _, err := c.Acquire(ctx, big); !errors.As(err, &fe) {
		t.Errorf("a shard larger than the limit: %v, want a FullError", err)
	}
}

func TestRestartReusesVerifiedFilesAndReplacesBadOnes(t *testing.T) {
	st, shards, data := fixture(t, 300, 300)
	ctx := context.Background()
	dir := t.TempDir()
	c := newCache(t, dir, st, Options{})
	for _, s := range shards {
		if _, err := c.Acquire(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// The process dies: a download was cut short and a file rotted.
	if err := os.WriteFile(filepath.Join(dir, ".tmp", "shard-123"), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.path(shards[1]), bytes.Repeat([]byte{'x'}, 300), 0o600); err != nil {
		t.Fatal(err)
	}
	c2 := newCache(t, dir, st, Options{})
	if s := c2.Stats(); s.UsedBytes != 600 {
		t.Errorf("restarted cache counts %d bytes, want 600", s.UsedBytes)
	}
	for i, s := range shards {
		p, err := c2.Acquire(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(p); !bytes.Equal(got, data[i]) {
			t.Errorf("shard %d has the wrong bytes after restart", i)
		}
	}
	if s := c2.Stats(); s.Reused != 1 || s.Downloads != 1 || s.UsedBytes != 600 {
		t.Errorf("stats = %+v, want 1 reused, 1 downloaded again, 600 bytes", s)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, ".tmp")); len(entries) != 0 {
		t.Errorf("unfinished download kept: %v", entries)
	}
}

func TestAcquireRejectsBadShards(t *testing.T) {
	st, shards, _ := fixture(t, 10)
	c := newCache(t, t.TempDir(), st, Options{})
	ctx := context.Background()
	tests := []struct {
		shard Shard
		want  string
	}{
		{Shard{Stream: "code", Key: "a"}, `no store for stream "code"`},
		{Shard{Stream: "../x", Key: "a"}, "cannot name a directory"},
		{Shard{Stream: "web", Key: "../a"}, "not a plain relative path"},
		{Shard{Stream: "web", Key: shards[0].Key, Size: 10, Hash: "crc:00"}, "not supported"},
		{Shard{Stream: "web", Key: "missing.mds", Size: 10}, "missing.mds"},
	}
	for _, tt := range tests {
		if _, err := c.Acquire(ctx, tt.shard); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Acquire(%+v) = %v, want %q", tt.shard, err, tt.want)
		}
	}
	if _, err := c.Acquire(ctx, Shard{Stream: "web", Key: "missing.mds", Size: 10}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing object: %v, want ErrNotFound", err)
	}
}

// A large shard comes in ranged GETs of PartBytes, in parallel, each
// written at its place; a smaller one in one GET. An object that grew or
// shrank since its index is corrupt, part by part.
func TestLargeShardsComeInParallelRangedParts(t *testing.T) {
	ctx := context.Background()
	data := make([]byte, 10_000)
	for i := range data {
		data[i] = byte(i * 7 % 251)
	}
	for _, tc := range []struct {
		name       string
		stored     int   // bytes of the object in the store
		offset     int64 // the shard's range (-1: the whole object)
		size       int64
		gets       int64
		corruption string
	}{
		{"a whole object in 10 parts", 10_000, -1, 10_000, 10, ""},
		{"a range in 3 parts", 10_000, 300, 2_500, 3, ""},
		{"a last part of half a part", 9_500, -1, 9_500, 10, ""},
		{"below two parts: one GET", 10_000, 100, 1_999, 1, ""},
		{"an object that grew", 10_000, -1, 9_999, 10, "1000 bytes, want 999"},
		{"an object that shrank", 9_500, -1, 10_000, 10, "500 bytes, want 1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, err := stores.Open(ctx, store.Source{URI: "file://" + t.TempDir() + "/"})
			if err != nil {
				t.Fatal(err)
			}
			if err := root.Put(ctx, "big.parquet", bytes.NewReader(data[:tc.stored]), int64(tc.stored)); err != nil {
				t.Fatal(err)
			}
			var counts store.Counts
			s := Shard{Stream: "web", Key: "big.parquet", Size: tc.size}
			want := data[:min(int(tc.size), tc.stored)]
			if tc.offset >= 0 {
				s.Range, s.Offset = true, tc.offset
				want = data[tc.offset : tc.offset+tc.size]
			}
			if tc.corruption == "" {
				sum, _ := checksum.Of("xxh64", want)
				s.Hash = sum.String()
			}
			c := newCache(t, t.TempDir(), store.Counted(root, &counts), Options{PartBytes: 1000, CorruptAttempts: 1})
			path, err := c.Acquire(ctx, s)
			if tc.corruption != "" {
				var ce *CorruptError
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.corruption) {
					t.Fatalf("%v, want a corrupt shard: %q", err, tc.corruption)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("cached %d bytes (%v), not the shard's %d", len(got), err, len(want))
			}
			if g := counts.Gets.Load(); g != tc.gets {
				t.Errorf("%d GETs, want %d", g, tc.gets)
			}
			if st := c.Stats(); st.FetchedBytes != tc.size || st.Downloads != 1 {
				t.Errorf("stats %+v, want %d bytes in 1 download", st, tc.size)
			}
		})
	}
}

// gatedStore holds its first Get until the caller's context ends, and
// says when that Get has started.
type gatedStore struct {
	store.Store
	once    sync.Once
	started chan struct{}
}

func (g *gatedStore) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.started)
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}
	return g.Store.Get(ctx, key, off, n)
}

// A reader waiting on another's download of a shard gets the shard when
// that other reader goes away mid-download (its context cancelled): the
// download is done again for the reader still there, never failed with
// the other's leaving (a stream once ended when another stream's client
// closed its connection).
func TestAReaderGoneMidDownloadFailsNoOtherReader(t *testing.T) {
	st, shards, data := fixture(t, 1000)
	g := &gatedStore{Store: st, started: make(chan struct{})}
	c := newCache(t, t.TempDir(), g, Options{})
	gone, leave := context.WithCancelCause(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := c.Acquire(gone, shards[0])
		first <- err
	}()
	<-g.started
	second := make(chan error, 1)
	var path string
	go func() {
		var err error
		path, err = c.Acquire(context.Background(), shards[0])
		second <- err
	}()
	// The second reader waits on the first's download (it holds the
	// entry), then the first goes away.
	for waiting := false; !waiting; time.Sleep(time.Millisecond) {
		c.mu.Lock()
		e := c.entries[shards[0].id()]
		waiting = e != nil && e.holds == 2
		c.mu.Unlock()
	}
	leave(errors.New("the client closed the connection"))
	if err := <-first; err == nil {
		t.Fatal("the reader that went away got the shard")
	}
	if err := <-second; err != nil {
		t.Fatalf("the reader still there: %v", err)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, data[0]) {
		t.Fatalf("the shard: %d bytes, %v", len(got), err)
	}
}

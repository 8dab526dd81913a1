package cache

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/store"
)

// A file:// stream with InPlace is mapped from its own files: verified
// once (size and hash), again only when a file changed, never copied into
// the cache's directory, and a file that no longer matches its index is
// refused.
func TestLocalShardsAreServedInPlaceAndVerifiedOnce(t *testing.T) {
	ctx := context.Background()
	st, shards, data := fixture(t, 10000, 3000)
	dir := t.TempDir()
	c := newCache(t, dir, st, Options{InPlace: true, LimitBytes: 1})
	src, ok := store.LocalPath(st, shards[0].Key)
	if !ok {
		t.Fatal("the file store names no file")
	}
	// A range that starts inside a page: a Parquet row group's.
	whole := data[0]
	sum, _ := checksum.Of("xxh64", whole[4097:9000])
	part := Shard{Stream: "web", Key: shards[0].Key, Range: true, Offset: 4097, Size: 9000 - 4097, Hash: sum.String()}

	for round := range 2 {
		for _, tc := range []struct {
			s    Shard
			want []byte
		}{{shards[0], data[0]}, {shards[1], data[1]}, {part, whole[4097:9000]}} {
			m, err := c.Map(ctx, tc.s)
			if err != nil {
				t.Fatalf("round %d: %s: %v", round, tc.s.file(), err)
			}
			if !bytes.Equal(m.Bytes(), tc.want) {
				t.Errorf("round %d: %s: %d bytes, not the file's", round, tc.s.file(), len(m.Bytes()))
			}
			m.Close()
			if !c.Present(tc.s) {
				t.Errorf("%s is not present once verified", tc.s.file())
			}
		}
	}
	if st := c.Stats(); st.InPlaceVerified != 3 || st.Downloads != 0 || st.FetchedBytes != 0 || st.UsedBytes != 0 || st.Hits != 3 {
		t.Errorf("stats %+v: want 3 verifications, 3 hits, nothing downloaded or on the cache's disk", st)
	}
	if got, _ := filepath.Glob(filepath.Join(dir, "web", "*")); len(got) != 0 {
		t.Errorf("the cache holds copies: %v", got)
	}
	if p, err := c.Acquire(ctx, shards[1]); err != nil || p != filepath.Clean(filepath.Join(filepath.Dir(src), shards[1].Key)) {
		t.Errorf("Acquire = %q, %v: want the shard's own file", p, err)
	}
	if p, err := c.Acquire(ctx, part); err != nil || p != "" {
		t.Errorf("Acquire of a range = %q, %v: want no file of its own", p, err)
	}

	// The file is rewritten with other bytes: verified again, refused.
	later := time.Now().Add(time.Minute)
	if err := os.WriteFile(src, bytes.Repeat([]byte{'z'}, len(whole)), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Chtimes(src, later, later)
	for _, s := range []Shard{shards[0], part} {
		var ce *CorruptError
		if _, err := c.Map(ctx, s); !errors.As(err, &ce) {
			t.Errorf("%s rewritten: %v, want a CorruptError", s.file(), err)
		}
	}
	// Cut short: refused by its size before any byte is hashed.
	if err := os.Truncate(src, 100); err != nil {
		t.Fatal(err)
	}
	for _, s := range []Shard{shards[0], part} {
		var ce *CorruptError
		if _, err := c.Map(ctx, s); !errors.As(err, &ce) || ce.Attempts != 1 {
			t.Errorf("%s truncated: %v, want a CorruptError", s.file(), err)
		}
	}
	if c.Present(shards[0]) {
		t.Error("a shard whose file changed is still present")
	}
	// Restored: served again after one more verification.
	if err := os.WriteFile(src, whole, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := c.Map(ctx, shards[0])
	if err != nil || !bytes.Equal(m.Bytes(), whole) {
		t.Fatalf("restored: %v", err)
	}
	m.Close()
}

// Without InPlace, or for a store that is not on this machine's disk, a
// shard is copied into the cache as before.
func TestWithoutInPlaceLocalShardsAreCopied(t *testing.T) {
	st, shards, data := fixture(t, 5000)
	dir := t.TempDir()
	c := newCache(t, dir, st, Options{})
	m, err := c.Map(context.Background(), shards[0])
	if err != nil || !bytes.Equal(m.Bytes(), data[0]) {
		t.Fatal(err)
	}
	m.Close()
	if st := c.Stats(); st.Downloads != 1 || st.InPlaceVerified != 0 {
		t.Errorf("stats %+v: want one download", st)
	}
	if _, err := os.Stat(filepath.Join(dir, "web", shards[0].Key)); err != nil {
		t.Errorf("no copy in the cache: %v", err)
	}
}

// A later cache on the same files and directory (the next run) takes the
// earlier run's verifications of unchanged files, hashes a changed one
// again, and reads past a record cut short.
func TestInPlaceVerificationsOutliveTheRun(t *testing.T) {
	ctx := context.Background()
	st, shards, data := fixture(t, 7000, 5000)
	dir := t.TempDir()
	read := func(c *Cache, s Shard, want []byte) error {
		m, err := c.Map(ctx, s)
		if err != nil {
			return err
		}
		defer m.Close()
		if !bytes.Equal(m.Bytes(), want) {
			t.Errorf("%s: not the file's bytes", s.file())
		}
		return nil
	}
	// A run: a new cache on dir reads every shard; its verifications and
	// the earlier runs' it took.
	runOnce := func() (verified, reused int64) {
		c := newCache(t, dir, st, Options{InPlace: true})
		for i, s := range shards {
			if err := read(c, s, data[i]); err != nil {
				t.Fatal(err)
			}
		}
		got := c.Stats()
		return got.InPlaceVerified, got.InPlaceReused
	}
	if v, r := runOnce(); v != 2 || r != 0 {
		t.Fatalf("first run: %d verified, %d taken from the record", v, r)
	}
	if v, r := runOnce(); v != 0 || r != 2 {
		t.Fatalf("second run: %d verified, %d taken: want both shards taken as verified", v, r)
	}

	// Rewritten with other bytes of the same size, its times set back:
	// its change time moved, so the next run hashes it and refuses it.
	src, _ := store.LocalPath(st, shards[1].Key)
	fi, _ := os.Stat(src)
	if err := os.WriteFile(src, bytes.Repeat([]byte{'q'}, len(data[1])), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Chtimes(src, fi.ModTime(), fi.ModTime())
	// A run killed mid-write left half a line.
	f, _ := os.OpenFile(filepath.Join(dir, ".inplace"), os.O_WRONLY|os.O_APPEND, 0)
	_, _ = f.WriteString(`{"id":"web/x","ha`)
	_ = f.Close()
	third := newCache(t, dir, st, Options{InPlace: true})
	if err := read(third, shards[0], data[0]); err != nil {
		t.Fatal(err)
	}
	var ce *CorruptError
	if err := read(third, shards[1], nil); !errors.As(err, &ce) {
		t.Fatalf("a changed file: %v, want a CorruptError", err)
	}
	if got := third.Stats(); got.InPlaceReused != 1 {
		t.Errorf("third run: %+v, want the unchanged shard taken as verified", got)
	}
	// The half line is gone: what the third run records is read by the next.
	if err := os.WriteFile(src, data[1], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := read(third, shards[1], data[1]); err != nil {
		t.Fatal(err)
	}
	if v, r := runOnce(); v != 0 || r != 2 {
		t.Errorf("fourth run: %d verified, %d taken: want both shards taken as verified", v, r)
	}
}

// A shard verified through its mapping: a file cut short under the
// mapping faults as it is hashed, and that is an error, not a crash.
func TestHashingAMappingCutShortIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shard")
	data := bytes.Repeat([]byte("0123456789abcdef"), 4*os.Getpagesize())
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s := Shard{Key: "shard", Size: int64(len(data))}
	want, _ := checksum.Of("xxh64", data)
	mapped, whole, err := mapInPlace(path, s, false)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Munmap(whole) }()
	if got, err := hashMapped(mapped, want); err != nil || got != want.Hex {
		t.Fatalf("hash of the whole mapping = %s, %v; want %s", got, err, want.Hex)
	}
	if err := os.Truncate(path, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := hashMapped(mapped, want); err == nil || !strings.Contains(err.Error(), "changed while it was verified") {
		t.Fatalf("hashing a mapping whose file was cut short: %v, want an error saying it changed", err)
	}
}

package cache

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
)

// BenchmarkInPlaceFirstRead is what a first epoch from local files pays
// beyond a later one's reading (docs/benchmarks.md, the first epoch's
// bound): a new sidecar's cache mapping each in-place shard (64 files of
// 4 MiB, in the page cache) and verifying it by its hash through the
// mapping ("verify"), or, its files verified by an earlier run, mapping
// them populated ("verified"). B/s is of the shards' bytes.
func BenchmarkInPlaceFirstRead(b *testing.B) {
	ctx := context.Background()
	const files, size = 64, 4 << 20
	st, err := stores.Open(ctx, store.Source{URI: "file://" + b.TempDir() + "/"})
	if err != nil {
		b.Fatal(err)
	}
	shards := make([]Shard, files)
	data := make([]byte, size)
	for i := range shards {
		_, _ = rand.Read(data)
		key := fmt.Sprintf("shard.%05d.mds", i)
		if err := st.Put(ctx, key, bytes.NewReader(data), size); err != nil {
			b.Fatal(err)
		}
		sum, _ := checksum.Of("xxh64", data)
		shards[i] = Shard{Stream: "web", Key: key, Size: size, Hash: sum.String()}
	}
	open := func(dir string) *Cache {
		c, err := New(Options{Dir: dir, InPlace: true, LimitBytes: 1}, map[string]store.Store{"web": st})
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	readAll := func(c *Cache) {
		for _, s := range shards {
			m, err := c.Map(ctx, s)
			if err != nil {
				b.Fatal(err)
			}
			m.Close()
		}
	}
	readAll(open(b.TempDir())) // the files in the page cache
	b.Run("verify", func(b *testing.B) {
		b.SetBytes(files * size)
		for b.Loop() {
			b.StopTimer()
			c := open(b.TempDir())
			b.StartTimer()
			readAll(c)
		}
	})
	b.Run("verified", func(b *testing.B) {
		dir := b.TempDir()
		readAll(open(dir)) // recorded in dir's .inplace
		b.SetBytes(files * size)
		for b.Loop() {
			b.StopTimer()
			c := open(dir)
			b.StartTimer()
			readAll(c)
		}
	})
}

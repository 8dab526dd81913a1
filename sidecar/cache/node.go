package cache

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/shardfeed/shardfeed/internal/checksum"
)

// NodeFetch asks the node's cache (the node agent) for a shard's bytes;
// any error sends the download to the store, and a nil reader with no
// error says the shard is not one to ask the node for.
type NodeFetch func(ctx context.Context, s Shard) (io.ReadCloser, error)

// NodeWarm names to the node's cache the shards a reader needs next, for
// it to fetch ahead and keep.
type NodeWarm func(ctx context.Context, shards []Shard) error

// Hint names the shards to the node's cache (Options.NodeWarm), those of
// them not on disk here and that the node keeps (hashed, or versioned),
// without waiting: a hint while the last is still in flight is not taken
// (false: name them again later), and an error only counted (the reads go
// on as they would).
func (c *Cache) Hint(shards []Shard) bool {
	if c.opts.NodeWarm == nil {
		return false
	}
	var ask []Shard
	c.mu.Lock()
	for _, s := range shards {
		if e, ok := c.entries[s.id()]; (ok && e.state == present) || (s.Hash == "" && s.Version == "") {
			continue
		}
		if _, ok := c.inPlace(s); ok {
			continue // on this machine's disk already
		}
		ask = append(ask, s)
	}
	c.mu.Unlock()
	if len(ask) == 0 {
		return true
	}
	if !c.hinting.CompareAndSwap(false, true) {
		return false
	}
	go func() {
		defer c.hinting.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := c.opts.NodeWarm(ctx, ask)
		c.mu.Lock()
		if err != nil {
			c.stats.Node.HintErrors++
		} else {
			c.stats.Node.Hinted += int64(len(ask))
		}
		c.mu.Unlock()
	}()
	return true
}

// Hints says whether Hint names shards to anyone.
func (c *Cache) Hints() bool { return c.opts.NodeWarm != nil }

// NodeStats count what came of the node's cache.
type NodeStats struct {
	// Hits are shards the node's cache gave, checked; Bytes their bytes.
	Hits, Bytes int64
	// Hinted are the shards named to it ahead (Hint); HintErrors the
	// hints it did not take.
	Hinted, HintErrors int64
	// Misses are shards it could not give (or gave wrong), then read
	// from the store.
	Misses int64
}

var errNotAsked = errors.New("not asked")

// fromNode tries the node's cache for the shard: true when its bytes are
// the shard's (size and hash) and installed at dst. The node's word is
// checked like the store's, and a wrong answer costs a download from the
// store, never a corrupt attempt.
func (c *Cache) fromNode(ctx context.Context, s Shard, size int64, want checksum.Sum, dst string) bool {
	err := c.tryNode(ctx, s, size, want, dst)
	if errors.Is(err, errNotAsked) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.stats.Node.Misses++
		if c.opts.OnNodeMiss != nil {
			c.opts.OnNodeMiss(s, err)
		}
		return false
	}
	c.stats.Node.Hits++
	c.stats.Node.Bytes += size
	c.downloadedLocked(ctx)
	return true
}

func (c *Cache) tryNode(ctx context.Context, s Shard, size int64, want checksum.Sum, dst string) error {
	s.Size = size
	body, err := c.opts.Node(ctx, s)
	if err != nil {
		return err
	}
	if body == nil {
		return errNotAsked
	}
	defer func() { _ = body.Close() }()
	tmp, err := os.CreateTemp(c.tmpDir(), "node-*")
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	w, h := io.Writer(tmp), want.New()
	if h != nil {
		w = io.MultiWriter(tmp, h)
	}
	n, err := io.Copy(w, io.LimitReader(body, size+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return err
	case n != size:
		return fmt.Errorf("the node's cache gave %d bytes, want %d", n, size)
	}
	if h == nil {
		return os.Rename(tmp.Name(), dst) // a footer: as unchecked as from the store
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want.Hex {
		return fmt.Errorf("the node's cache gave bytes of %s %s, the index says %s", want.Algo, short(got), short(want.Hex))
	}
	return os.Rename(tmp.Name(), dst)
}

package cache

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// derivedStream is the directory of derived files: what the sidecar made
// of shards (their tokenized columns), kept beside the shards under the
// same budget and evicted with them. No stream is named so (a stream's
// name never starts with ".").
const derivedStream = ".derived"

// maxDerivedBytes bounds one derived file.
const maxDerivedBytes = 1 << 30

func derivedShard(stream, key string) (Shard, error) {
	s := Shard{Stream: derivedStream, Key: stream + "/" + key, Size: -1}
	if stream == "" || strings.ContainsAny(stream, `/\`) || strings.HasPrefix(stream, ".") ||
		key == "" || strings.ContainsAny(key, `/\`) || strings.HasPrefix(key, ".") {
		return s, fmt.Errorf("cache: derived file %q of stream %q is not a plain name", key, stream)
	}
	return s, nil
}

// LoadDerived returns the derived file key of stream (StoreDerived's
// data), if the cache has it whole: its content is checked against the
// sum stored with it, and a file that fails is removed.
func (c *Cache) LoadDerived(stream, key string) ([]byte, bool) {
	s, err := derivedShard(stream, key)
	if err != nil {
		return nil, false
	}
	c.mu.Lock()
	e, ok := c.entries[s.id()]
	if !ok || (e.state != present && e.state != unverified) {
		c.stats.DerivedMisses++
		c.mu.Unlock()
		return nil, false
	}
	e.holds++
	c.mu.Unlock()
	data, err := readDerived(c.path(s))
	c.mu.Lock()
	defer c.mu.Unlock()
	e.holds--
	e.lastUse = time.Now()
	if err != nil {
		if e.holds == 0 {
			_ = os.Remove(c.path(s))
			c.used -= e.size
			delete(c.entries, s.id())
		}
		c.stats.DerivedMisses++
		return nil, false
	}
	e.state = present
	c.stats.DerivedHits++
	c.changed.Broadcast()
	return data, true
}

// readDerived reads a derived file and checks its trailing sha256.
func readDerived(path string) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if info.Size() < sha256.Size || info.Size() > maxDerivedBytes+sha256.Size {
		return nil, fmt.Errorf("%s: %d bytes", path, info.Size())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	data, sum := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	if got := sha256.Sum256(data); !bytes.Equal(got[:], sum) {
		return nil, errors.New("its content is not the one written")
	}
	return data, nil
}

// StoreDerived keeps data as the derived file key of stream, counted in
// the cache's bytes, when it fits: it evicts shards no one holds to make
// room but never waits, and a file that does not fit is not kept (it is
// only work saved). It says whether it kept it.
func (c *Cache) StoreDerived(stream, key string, data []byte) bool {
	s, err := derivedShard(stream, key)
	if err != nil || len(data) > maxDerivedBytes {
		return false
	}
	size := int64(len(data) + sha256.Size)
	if c.opts.LimitBytes > 0 && size > c.opts.LimitBytes/2 {
		return false // would evict most of the cache for work saved
	}
	c.mu.Lock()
	if _, ok := c.entries[s.id()]; ok {
		c.mu.Unlock()
		return false // another decoder made it
	}
	for c.opts.LimitBytes > 0 && c.used+size > c.opts.LimitBytes {
		if !c.evictOne() {
			c.mu.Unlock()
			return false
		}
	}
	e := &entry{shard: s, state: downloading, size: size, holds: 1, reserved: true, done: make(chan struct{})}
	c.entries[s.id()] = e
	c.used += size
	c.stats.PeakBytes = max(c.stats.PeakBytes, c.used)
	c.mu.Unlock()
	err = writeDerived(c.tmpDir(), c.path(s), data)
	c.finish(e, err, false)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		return false
	}
	e.holds = 0
	c.stats.DerivedStored++
	return true
}

// writeDerived writes data and its sha256 to a temporary file and renames
// it into place, so that a file is whole or absent.
func writeDerived(tmpDir, dst string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(tmpDir, "derived-*")
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	_, err = f.Write(data)
	if err == nil {
		_, err = f.Write(sum[:])
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), dst)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

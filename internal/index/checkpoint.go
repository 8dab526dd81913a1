package index

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/shardfeed/shardfeed/internal/index/compact"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/strictjson"
)

// The checkpoint of a long `shardfeed index`, beside the index: the index
// of the stream's first objects (compact) and what it is of.
const (
	CheckpointKey     = indexfile.Dir + "/index.partial.sfi"
	CheckpointMetaKey = indexfile.Dir + "/index.partial.json"

	// maxCheckpointBytes bounds a checkpoint read: about 50 million shards.
	maxCheckpointBytes = 1 << 30
)

// Checkpoint keeps the progress of a long index in the index's store, so
// that the same command run again after an interruption goes on from the
// objects already indexed. A checkpoint is resumed only by a run over the
// same first objects (keys and sizes) with the same options.
type Checkpoint struct {
	Store store.Store
	// Options identifies what is indexed and how (the format, hash, shard
	// size, schema …): a checkpoint of other options is not resumed.
	Options string
	// Every is the least time between two saves (0: 30 s); a save that
	// took long waits ten times as long before the next.
	Every time.Duration
	// Note, if set, is told why a checkpoint there is not resumed.
	Note func(string)
	// Dir, if set, is the folder of the store the checkpoint is kept in
	// (ending in "/"), instead of the index's: one part of a run indexed
	// in parts keeps its own.
	Dir string

	last, took time.Duration
	start      time.Time
}

// checkpointMeta says what a checkpoint's index is of.
type checkpointMeta struct {
	Options string `json:"options"`
	// Objects is how many of the stream's objects, in order, it indexes;
	// Prefix the SHA-256 of their keys and sizes.
	Objects     int       `json:"objects"`
	Prefix      string    `json:"prefix"`
	ContentHash string    `json:"contentHash"`
	Saved       time.Time `json:"saved"`
}

// prefixHash identifies a run of objects by their keys and sizes.
func prefixHash(objects []store.Object) string {
	h := sha256.New()
	var buf [8]byte
	for _, o := range objects {
		binary.LittleEndian.PutUint64(buf[:], uint64(len(o.Key))) //nolint:gosec // a length
		h.Write(buf[:])
		h.Write([]byte(o.Key))
		binary.LittleEndian.PutUint64(buf[:], uint64(o.Size)) //nolint:gosec // a size
		h.Write(buf[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// keys are the checkpoint's index and meta objects.
func (c *Checkpoint) keys() (data, meta string) {
	if c.Dir == "" {
		return CheckpointKey, CheckpointMetaKey
	}
	return c.Dir + "index.partial.sfi", c.Dir + "index.partial.json"
}

func (c *Checkpoint) note(format string, args ...any) {
	if c.Note != nil {
		c.Note(fmt.Sprintf(format, args...))
	}
}

// Load returns the index of the first n of objects that a checkpoint
// keeps, or nil and 0 where there is none to resume (the reason told to
// Note).
func (c *Checkpoint) Load(ctx context.Context, objects []store.Object) (*indexfile.File, int, error) {
	dataKey, metaKey := c.keys()
	data, err := indexfile.ReadObject(ctx, c.Store, metaKey, 64<<10)
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var m checkpointMeta
	if err := strictjson.Decode(data, &m); err != nil {
		c.note("the checkpoint at %s is not one shardfeed wrote (%v): indexing from the first object", indexfile.ObjectURI(c.Store, metaKey), err)
		return nil, 0, nil
	}
	switch {
	case m.Options != c.Options:
		c.note("the checkpoint at %s is of other options: indexing from the first object", indexfile.ObjectURI(c.Store, metaKey))
		return nil, 0, nil
	case m.Objects <= 0 || m.Objects > len(objects) || prefixHash(objects[:m.Objects]) != m.Prefix:
		c.note("the checkpoint at %s is of %d objects that are not the stream's first now (one changed, or was removed): indexing from the first object", indexfile.ObjectURI(c.Store, metaKey), m.Objects)
		return nil, 0, nil
	}
	data, err = indexfile.ReadObject(ctx, c.Store, dataKey, maxCheckpointBytes)
	if err != nil {
		return nil, 0, fmt.Errorf("reading the checkpoint: %w", err)
	}
	f, err := compact.Parse(data)
	if err == nil && f.StreamIndex().ContentHash() != m.ContentHash {
		err = errors.New("its content hash is not the one saved")
	}
	if err != nil {
		c.note("the checkpoint at %s does not read back as it was saved (%v): indexing from the first object", indexfile.ObjectURI(c.Store, dataKey), err)
		return nil, 0, nil
	}
	c.note("resuming from a checkpoint of %d objects (%d shards) saved %s", m.Objects, len(f.Shards), m.Saved.UTC().Format(time.RFC3339))
	return f, m.Objects, nil
}

// Save keeps f, the index of the first len(done) objects, unless a save
// was made less than Every ago (now: whenever).
func (c *Checkpoint) Save(ctx context.Context, f *indexfile.File, done []store.Object, now bool) error {
	if c.start.IsZero() {
		c.start = time.Now()
	}
	every := c.Every
	if every <= 0 {
		every = 30 * time.Second
	}
	since := time.Since(c.start)
	if len(f.Shards) == 0 || len(done) == 0 || !now && since-c.last < max(every, 10*c.took) {
		return nil
	}
	began := time.Now()
	dataKey, metaKey := c.keys()
	data, err := compact.Encode(f)
	if err != nil {
		return err
	}
	meta, err := json.Marshal(checkpointMeta{Options: c.Options, Objects: len(done), Prefix: prefixHash(done),
		ContentHash: f.StreamIndex().ContentHash(), Saved: time.Now()})
	if err != nil {
		return err
	}
	// The index first: a meta always finds the index it names (or a
	// newer one, whose hash it then refuses).
	if err := c.Store.Put(ctx, dataKey, bytes.NewReader(data), int64(len(data))); err != nil {
		return fmt.Errorf("saving a checkpoint: %w", err)
	}
	if err := c.Store.Put(ctx, metaKey, bytes.NewReader(meta), int64(len(meta))); err != nil {
		return fmt.Errorf("saving a checkpoint: %w", err)
	}
	c.last, c.took = since, time.Since(began)
	return nil
}

// Remove deletes the checkpoint, once the index it was of is written.
func (c *Checkpoint) Remove(ctx context.Context) error {
	data, meta := c.keys()
	for _, key := range []string{meta, data} {
		if err := c.Store.Delete(ctx, key); err != nil {
			return err
		}
	}
	return nil
}

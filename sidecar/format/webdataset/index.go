package webdataset

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// headerWindow is what one ranged read of a tar fetches: a header, up to a
// block of its data and the next header, so that runs of small members (a
// caption, a class) cost one request while a large member's bytes are
// skipped.
const headerWindow = 3 * block

// DefaultConcurrency is how many tars are indexed at once.
const DefaultConcurrency = 16

// tarIndex is what indexing one tar found: its shards (without names) and
// the extensions of its samples.
type tarIndex struct {
	shards []indexfile.Entry
	exts   map[string]bool
}

var _ format.StreamIndexer = Format{}

// IndexObjects implements format.StreamIndexer: an index beside the tars
// is reused (Megatron-Energon's, else wids'), or the tars are read
// concurrently, each through ranged reads of its headers alone (a
// compressed one whole), and their shards listed in key order. The
// stream's schema is the key and every extension seen, typed by
// DefaultType or as opts.Schema says.
func (Format) IndexObjects(ctx context.Context, st store.Store, objects []store.Object, f *indexfile.File, opts format.IndexOptions) error {
	if reused, exts, ok, err := energonIndex(ctx, st, objects, opts); err != nil || ok {
		if err != nil {
			return err
		}
		return collect(objects, reused, exts, f, opts)
	}
	if reused, exts, ok, err := widsIndex(ctx, st, objects, opts); err != nil || ok {
		if err != nil {
			return err
		}
		return collect(objects, reused, exts, f, opts)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make([]tarIndex, len(objects))
	errs := make([]error, len(objects))
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	workers := opts.Concurrency
	if workers <= 0 {
		workers = DefaultConcurrency
	}
	for range min(workers, len(objects)) {
		wg.Go(func() {
			for i := range next {
				o := objects[i]
				results[i], errs[i] = indexTar(ctx, st, o, opts)
				if errs[i] != nil {
					errs[i] = fmt.Errorf("%s%s: %w", st.URI(), o.Key, errs[i])
					cancel()
				}
				mu.Lock()
				done++
				if opts.Progress != nil {
					opts.Progress(done, len(objects), o.Key)
				}
				mu.Unlock()
			}
		})
	}
feed:
	for i := range objects {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	// The tar that failed, not one of those its failure cancelled (an
	// earlier tar, still being read, says only "context canceled").
	var cancelled error
	for _, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			cancelled = cmp.Or(cancelled, err)
		default:
			return err
		}
	}
	if cancelled != nil {
		return cancelled
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	exts := map[string]bool{}
	for _, r := range results {
		for e := range r.exts {
			exts[e] = true
		}
	}
	return collect(objects, results, exts, f, opts)
}

// collect lists the tars' shards in order, named by tar and part, and the
// stream's schema.
func collect(objects []store.Object, results []tarIndex, exts map[string]bool, f *indexfile.File, opts format.IndexOptions) error {
	for i, r := range results {
		for p, e := range r.shards {
			e.Name, e.Part = fmt.Sprintf("%s#%d", objects[i].Key, p), p
			f.Shards = append(f.Shards, e)
		}
	}
	schema, err := streamSchema(exts, opts.Schema)
	if err != nil {
		return err
	}
	f.Schema = schema
	return nil
}

// streamSchema is the key, then each extension in name order, typed by
// its convention unless given.
func streamSchema(exts map[string]bool, given []indexfile.Field) ([]indexfile.Field, error) {
	types := map[string]string{}
	for _, g := range given {
		if g.Name == KeyColumn {
			if g.Type != "utf8" {
				return nil, fmt.Errorf("--schema: %s is utf8, not %s", KeyColumn, g.Type)
			}
			continue
		}
		if !slices.Contains(Types, g.Type) {
			return nil, fmt.Errorf("--schema: column %q: a webdataset column is %v, not %q", g.Name, Types, g.Type)
		}
		types[g.Name] = g.Type
		exts[g.Name] = true // a column given and not seen is all nulls
	}
	names := make([]string, 0, len(exts))
	for e := range exts {
		names = append(names, e)
	}
	slices.Sort(names)
	out := []indexfile.Field{{Name: KeyColumn, Type: "utf8"}}
	for _, e := range names {
		t, ok := types[e]
		if !ok {
			t = DefaultType(e)
		}
		out = append(out, indexfile.Field{Name: e, Type: t})
	}
	return out, nil
}

// indexTar cuts one tar into shards of whole samples.
func indexTar(ctx context.Context, st store.Store, o store.Object, opts format.IndexOptions) (tarIndex, error) {
	out := tarIndex{exts: map[string]bool{}}
	if o.Size == 0 {
		// Not a tar of no samples (a tar holds at least its end-of-archive
		// blocks) but a failed upload, as webdataset says (ReadError).
		return out, errors.New("the file is empty (0 bytes), not a tar: re-upload it, or remove it from the stream's prefix")
	}
	var src blocks
	end := o.Size
	hash := ""
	if compressed(o.Key) {
		raw, err := format.ReadRange(ctx, st, o.Key, 0, o.Size)
		if err != nil {
			return out, err
		}
		sum, _ := checksum.Of(opts.Hash, raw)
		hash = sum.String()
		data, err := gunzip(raw)
		if err != nil {
			return out, err
		}
		src, end = bytesBlocks(data), int64(len(data))
	} else {
		src = &rangedBlocks{ctx: ctx, st: st, key: o.Key, size: o.Size}
	}
	var cur *indexfile.Entry
	err := walk(src, end, func(s *sample) error {
		for _, e := range s.exts {
			out.exts[e] = true
		}
		if cur == nil {
			cur = &indexfile.Entry{Object: o.Key, Offset: s.start(), ObjectSize: o.Size}
		}
		cur.Samples++
		cur.Length = s.end() - cur.Offset
		if cur.Length >= opts.ShardBytes && !compressed(o.Key) {
			out.shards = append(out.shards, *cur)
			cur = nil
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	if cur != nil {
		out.shards = append(out.shards, *cur)
	}
	if compressed(o.Key) && len(out.shards) == 1 {
		// Read whole: the shard is the object's bytes.
		out.shards[0].Offset, out.shards[0].Length, out.shards[0].Hash = 0, o.Size, hash
	}
	return out, nil
}

// rangedBlocks reads a tar's headers from a store by ranged reads of
// headerWindow bytes, keeping the last.
type rangedBlocks struct {
	ctx  context.Context
	st   store.Store
	key  string
	size int64
	off  int64
	buf  []byte
}

func (r *rangedBlocks) at(off int64, n int) ([]byte, error) {
	if off >= r.off && off+int64(n) <= r.off+int64(len(r.buf)) {
		return r.buf[off-r.off : off-r.off+int64(n)], nil
	}
	want := min(max(int64(n), headerWindow), r.size-off)
	if off < 0 || want < int64(n) {
		return nil, fmt.Errorf("%w: %d bytes at %d run past its %d", errCorrupt, n, off, r.size)
	}
	b, err := format.ReadRange(r.ctx, r.st, r.key, off, want)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%w: the object ends before byte %d", errCorrupt, off+want)
		}
		return nil, err
	}
	r.off, r.buf = off, b
	return b[:n], nil
}

package format

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
)

// DefaultIndexConcurrency is how many objects shardfeed index reads at
// once: each is a request or a few to the store, whose latency, not its
// bandwidth, bounds one object after another.
const DefaultIndexConcurrency = 16

// indexEach indexes files into out, opts.Concurrency at once, their shards
// in the files' order. The objects up to the first that has a shard are
// indexed one after another, into out: they set what the stream's later
// objects are checked against (a schema, a token type). Each later object
// is indexed into a copy of that head, with its first shard (against which
// some formats check the others), and folded into out in order. With
// opts.Checkpoints, the objects a checkpoint kept are not indexed again,
// and the index of those folded is kept now and then, and when the run
// stops short.
func indexEach(ctx context.Context, st store.Store, ix Indexer, files []partitionFile, out *indexfile.File, opts IndexOptions) (err error) {
	progress := func(done int) {
		if opts.Progress != nil {
			opts.Progress(done, len(files), files[done-1].Key)
		}
	}
	objs := objectsOf(files)
	done := 0 // files folded into out
	cp := opts.Checkpoints
	if cp != nil {
		kept, n, lerr := cp.Load(ctx, objs)
		if lerr != nil {
			return lerr
		}
		if kept != nil {
			*out, done = *kept, n
			progress(done)
		}
		resumed := done
		defer func() {
			if err == nil || done == resumed {
				return
			}
			// Interrupted, or an object refused: keep what was indexed.
			switch serr := cp.Save(context.WithoutCancel(ctx), out, objs[:done], true); {
			case serr != nil:
				err = fmt.Errorf("%w (and the objects indexed were not kept: %w)", err, serr)
			case opts.Note != nil && ctx.Err() != nil:
				opts.Note(fmt.Sprintf("the index of the first %d of %d objects is kept in a checkpoint: the same command goes on from there", done, len(files)))
			case opts.Note != nil:
				// Run as it is, the same command meets the same object: the
				// note says so rather than promise it goes on.
				opts.Note(fmt.Sprintf("the index of the first %d of %d objects is kept in a checkpoint: once the object refused (below) is fixed or removed, the same command goes on from there", done, len(files)))
			}
		}()
	}
	for ; done < len(files) && len(out.Shards) == 0; done++ {
		if err := ix.IndexObject(ctx, st, files[done].Object, out, opts); err != nil {
			return err
		}
		for k := range out.Shards {
			out.Shards[k].Partition = files[done].values
		}
		progress(done + 1)
	}
	if done == len(files) {
		return nil
	}
	return indexRest(ctx, st, ix, files, out, opts, &done)
}

// indexRest indexes files[*done:] into out, which has a shard, at once,
// folding each into out in order and counting it in *done.
func indexRest(ctx context.Context, st store.Store, ix Indexer, files []partitionFile, out *indexfile.File, opts IndexOptions, done *int) error {
	objs := objectsOf(files)
	head := *out
	head.Schema = append([]indexfile.Field(nil), out.Schema...) // out's is widened in place as objects fold
	head.Shards = out.Shards[:1:1]
	fold := func(part *indexfile.File, key string) error {
		if err := foldInto(ix, out, part); err != nil {
			return fmt.Errorf("%s%s: %w", st.URI(), key, err)
		}
		return nil
	}

	workers := opts.Concurrency
	if workers <= 0 {
		workers = DefaultIndexConcurrency
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	var (
		mu      sync.Mutex
		results = make([]*indexfile.File, len(files))
	)
	for k := *done; k < len(files); k++ {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			part := head
			part.Schema = append([]indexfile.Field(nil), head.Schema...)
			part.Shards = append([]indexfile.Entry(nil), head.Shards...)
			if err := ix.IndexObject(gctx, st, files[k].Object, &part, opts); err != nil {
				return err
			}
			part.Shards = part.Shards[1:]
			for s := range part.Shards {
				part.Shards[s].Partition = files[k].values
			}
			mu.Lock()
			defer mu.Unlock()
			results[k] = &part
			for *done < len(files) && results[*done] != nil {
				if err := fold(results[*done], files[*done].Key); err != nil {
					return err
				}
				results[*done] = nil
				*done++
				if opts.Progress != nil {
					opts.Progress(*done, len(files), files[*done-1].Key)
				}
				if cp := opts.Checkpoints; cp != nil {
					if err := cp.Save(gctx, out, objs[:*done], false); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	// The loop stops early when ctx is done, with no goroutine's error
	// to say so: the objects not indexed must not pass for an index.
	if err := ctx.Err(); err != nil {
		return err
	}
	if *done < len(files) {
		return fmt.Errorf("indexed %d of %d objects", *done, len(files))
	}
	return nil
}

// foldInto folds part, the index of objects after out's, into out: its
// shards after out's, and what the format infers across objects (a text
// stream's schema) merged.
func foldInto(ix Indexer, out, part *indexfile.File) error {
	if merger, ok := ix.(Merger); ok {
		return merger.Merge(out, part)
	}
	out.Shards = append(out.Shards, part.Shards...)
	return nil
}

func objectsOf(files []partitionFile) []store.Object {
	out := make([]store.Object, len(files))
	for k := range files {
		out[k] = files[k].Object
	}
	return out
}

package format

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/shardfeed/shardfeed/internal/index"
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
// some formats check the others), and folded into out in order.
func indexEach(ctx context.Context, st store.Store, ix Indexer, files []partitionFile, out *index.File, opts IndexOptions) error {
	progress := func(done int, key string) {
		if opts.Progress != nil {
			opts.Progress(done, len(files), key)
		}
	}
	i := 0
	for ; i < len(files) && len(out.Shards) == 0; i++ {
		if err := ix.IndexObject(ctx, st, files[i].Object, out, opts); err != nil {
			return err
		}
		for k := range out.Shards {
			out.Shards[k].Partition = files[i].values
		}
		progress(i+1, files[i].Key)
	}
	if i == len(files) {
		return nil
	}
	head := *out
	head.Schema = append([]index.Field(nil), out.Schema...) // out's is widened in place as objects fold
	head.Shards = out.Shards[:1:1]
	merger, _ := ix.(Merger)
	fold := func(part *index.File, key string) error {
		if merger != nil {
			if err := merger.Merge(out, part); err != nil {
				return fmt.Errorf("%s%s: %w", st.URI(), key, err)
			}
			return nil
		}
		out.Shards = append(out.Shards, part.Shards...)
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
		results = make([]*index.File, len(files))
		next    = i
	)
	for k := i; k < len(files); k++ {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			part := head
			part.Schema = append([]index.Field(nil), head.Schema...) // a merge widens it in place
			part.Shards = append([]index.Entry(nil), head.Shards...)
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
			for next < len(files) && results[next] != nil {
				if err := fold(results[next], files[next].Key); err != nil {
					return err
				}
				results[next] = nil
				next++
				progress(next, files[next-1].Key)
			}
			return nil
		})
	}
	return g.Wait()
}

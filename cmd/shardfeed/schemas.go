package main

import (
	"context"
	"fmt"
	"io"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/streams"
	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/cache"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
	"github.com/shardfeed/shardfeed/sidecar/source"
)

// openServable opens every stream from its store, its index read once,
// and checks what serve checks before it plans (source.OpenAll: layouts
// its format reads, the columns of spec.streams[].columns, one schema
// after the promotions), so that a dataset plan and simulate accept is one
// serve accepts. It returns the planner's view of the indexes.
func openServable(ctx context.Context, ds *datav1alpha1.TrainingDataset, credentials string) ([]planner.StreamIndex, error) {
	opened := make([]*streams.Stream, len(ds.Spec.Streams))
	byName := map[string]store.Store{}
	servable := true
	for i, s := range ds.Spec.Streams {
		src := streams.SharedCredentials(s, credentials)
		st, err := streams.Open(ctx, i, s, src, 0)
		if err != nil {
			return nil, fmt.Errorf("%w\nor give the index with --index-dir DIR (as DIR/%s/index.json or DIR/%s.json)", err, s.Name, s.Name)
		}
		opened[i], byName[s.Name] = st, st.Store
		servable = servable && st.Layout != nil // a plain list of shards plans, and says nothing of its schema
	}
	if servable {
		read := func(ctx context.Context, part cache.Shard) ([]byte, error) {
			off, n := int64(0), int64(-1)
			if part.Range {
				off, n = part.Offset, part.Size
			}
			r, err := byName[part.Stream].Get(ctx, part.Key, off, n)
			if err != nil {
				return nil, err
			}
			defer func() { _ = r.Close() }()
			return io.ReadAll(r)
		}
		if _, err := source.OpenAll(ctx, opened, formats.Default(), read); err != nil {
			return nil, fmt.Errorf("TrainingDataset %q: %w\n(serve would refuse this dataset; plan and simulate check it the same way)", ds.Name, err)
		}
	}
	return streams.Indexes(opened), nil
}

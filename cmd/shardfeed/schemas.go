package main

import (
	"context"
	"fmt"
	"io"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/streams"
	"github.com/shardfeed/shardfeed/sidecar/cache"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
	"github.com/shardfeed/shardfeed/sidecar/source"
)

// checkServable checks what `serve` checks before it plans: every stream
// has a layout its format reads, its columns exist, and the streams share
// one schema after the documented promotions. plan and simulate run it so
// that a dataset they accept is one serve accepts. It reads each stream's
// schema (the index, or a Parquet or Arrow footer) from its store.
func checkServable(ctx context.Context, ds *datav1alpha1.TrainingDataset, credentials string) error {
	registry := formats.Default()
	sources := make([]*source.Stream, len(ds.Spec.Streams))
	for i, s := range ds.Spec.Streams {
		src := streams.Source(s)
		src.CredentialsDir = credentials
		st, err := streams.Open(ctx, i, s, src, 0)
		if err != nil {
			return err
		}
		layout := st.Layout
		if layout == nil {
			return nil // a plain list of shards plans, and says nothing of its schema
		}
		reader, err := registry.Open(layout)
		if err != nil {
			return fmt.Errorf("stream %q: %w", s.Name, err)
		}
		read := func(ctx context.Context, part cache.Shard) ([]byte, error) {
			off, n := int64(0), int64(-1)
			if part.Range {
				off, n = part.Offset, part.Size
			}
			r, err := st.Store.Get(ctx, part.Key, off, n)
			if err != nil {
				return nil, err
			}
			defer func() { _ = r.Close() }()
			return io.ReadAll(r)
		}
		if sources[i], err = source.Open(ctx, s.Name, layout, reader, s.Columns, read); err != nil {
			return err
		}
	}
	if _, err := source.Unify(sources); err != nil {
		return fmt.Errorf("TrainingDataset %q: %w", ds.Name, err)
	}
	return nil
}

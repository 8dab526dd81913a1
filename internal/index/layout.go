package index

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"

	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/format/mds"
)

// Layout is what a reader of a stream needs beyond the planner's view: where
// each shard's bytes are and how to decode them. Exactly one of MDS and File
// is set; a plain list of shards plans but cannot be served.
type Layout struct {
	// Format is mds, parquet, arrow, jsonl, csv or tsv.
	Format string
	Index  planner.StreamIndex
	MDS    *mds.Index
	File   *File
}

// ErrNoLayout is returned for a plain list of shards: it has the counts a
// plan needs but not where a shard's bytes are or how to decode them.
var ErrNoLayout = errors.New(`the index is a plain list of shards, which plans but does not say how to read them: serve the stream with MDS's index.json or one written by "shardfeed index"`)

// ReadLayout parses an index that says how to read its shards: MDS's
// index.json or a shardfeed index.
func ReadLayout(r io.Reader) (*Layout, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var probe struct {
		Version   *int `json:"version"`
		Shardfeed *int `json:"shardfeed"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("index is not valid JSON: %w", err)
	}
	switch {
	case probe.Shardfeed != nil:
		var f File
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			return nil, fmt.Errorf("shardfeed index: %w", err)
		}
		if err := f.check(); err != nil {
			return nil, err
		}
		return &Layout{Format: f.Format, Index: f.StreamIndex(), File: &f}, nil
	case probe.Version != nil:
		x, err := mds.ReadIndex(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		return &Layout{Format: "mds", Index: x.StreamIndex(), MDS: x}, nil
	}
	return nil, ErrNoLayout
}

// ReadStoreLayout reads the layout from the index.json of a stream's prefix.
func ReadStoreLayout(ctx context.Context, st store.Store) (*Layout, error) {
	r, err := st.Get(ctx, FileName, 0, -1)
	if err != nil {
		return nil, missingIndex(err, st)
	}
	defer func() { _ = r.Close() }()
	x, err := ReadLayout(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path.Join(st.URI(), FileName), err)
	}
	return x, nil
}

// missingIndex adds how to write an index to an error that says there is
// none; other errors (credentials, network) are the store's own.
func missingIndex(err error, st store.Store) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w (write one with: shardfeed index %s)", err, st.URI())
	}
	return err
}

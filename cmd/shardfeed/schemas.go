package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index/sidefile"
	"github.com/shardfeed/shardfeed/internal/planspec"
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
func openServable(ctx context.Context, ds *datav1alpha1.TrainingDataset, credentials, configMaps string) ([]planner.StreamIndex, *servedStreams, error) {
	opened := make([]*streams.Stream, len(ds.Spec.Streams))
	byName := map[string]store.Store{}
	servable := true
	for i, s := range ds.Spec.Streams {
		src := streams.SharedCredentials(s, credentials)
		src.ConfigMapsDir = configMaps
		st, err := streams.Open(ctx, i, planspec.Resolved(&ds.Spec, i), ds.Spec.Packing, src, 0)
		if err != nil {
			return nil, nil, fmt.Errorf("%w\nor give the index with --index-dir DIR (as DIR/%s/index.json or DIR/%s.json)", err, s.Name, s.Name)
		}
		if ds.Spec.Bucketing != nil {
			if err := st.OpenBuckets(ctx, ds.Spec.Bucketing, 0); err != nil {
				return nil, nil, err
			}
		}
		opened[i], byName[s.Name] = st, st.Store
		servable = servable && st.Layout != nil // a plain list of shards plans, and says nothing of its schema
	}
	served := &servedStreams{tokens: make([]*sidefile.LengthsIndex, len(opened)), opened: opened}
	for i, st := range opened {
		if st.Packs != nil {
			served.packs = append(served.packs, st.Packs.Index)
		}
		if st.Tokenize != nil && st.Packs == nil && st.Layout != nil && ds.Spec.Bucketing == nil {
			// The tokens shardfeed index -f counted, if it has.
			samples := make([]int64, len(st.Index.Shards))
			for h, sh := range st.Index.Shards {
				samples[h] = sh.Samples
			}
			x, err := sidefile.ReadLengths(ctx, st.IndexStore, planspec.TokenizeOutput(st.Tokenize), sidefile.Elements, st.Spec.Filter,
				planspec.TokenizeKey(st.Tokenize), st.Layout.Index.ContentHash(), samples, 0)
			if err == nil {
				served.tokens[i] = x
			}
		}
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
		all, err := source.OpenAll(ctx, streams.PlanStreams(opened), formats.Default(), read, ds.Spec.MissingColumns)
		if err != nil {
			// An object that changed since it was indexed fails as a
			// corrupt one would: say the cause.
			why := ""
			for _, c := range source.Changes(ctx, formats.Default(), opened) {
				if c.Err == nil {
					why += "\n" + c.Message(reindexCommand("", ds, c.Stream))
				}
			}
			return nil, nil, fmt.Errorf("TrainingDataset %q: %w%s\n(serve would refuse this dataset; plan and simulate check it the same way)", ds.Name, err, why)
		}
		served.schema = all[0].Schema()
	}
	return streams.Indexes(opened), served, nil
}

// servedStreams is what plan and simulate learn of the streams beyond
// their indexes: the schema they are served in (nil offline, with
// --index-dir, or for plain lists of shards) and, in a packed dataset,
// each stream's packs.
type servedStreams struct {
	schema *arrow.Schema
	packs  []*sidefile.PacksIndex
	// opened are the streams (nil offline): a packed dataset's packs for
	// plan --ids, and the sources plan compares with their indexes.
	opened []*streams.Stream
	// tokens are a tokenized, unpacked stream's token counts (nil where
	// shardfeed index -f has not counted them).
	tokens []*sidefile.LengthsIndex
}

// columnSummary is a served column and what the Python client makes of
// it in every batch.
type columnSummary struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	Delivered string `json:"delivered"`
}

// torchTypes are the torch dtypes of Arrow's numeric types.
var torchTypes = map[arrow.Type]string{
	arrow.INT8: "int8", arrow.INT16: "int16", arrow.INT32: "int32", arrow.INT64: "int64",
	arrow.UINT8: "uint8", arrow.UINT16: "uint16", arrow.UINT32: "uint32", arrow.UINT64: "uint64",
	arrow.FLOAT16: "float16", arrow.FLOAT32: "float32", arrow.FLOAT64: "float64", arrow.BOOL: "bool",
}

// delivered says what a column of type t arrives as in a batch of the
// Python client (shardfeed._convert): the same in every batch.
func delivered(t arrow.DataType) string {
	if dt, ok := torchTypes[t.ID()]; ok {
		fill := "0"
		switch t.ID() {
		case arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64:
			fill = "NaN"
		case arrow.BOOL:
			fill = "False"
		}
		return fmt.Sprintf("tensor %s [rows] (a null: %s, or fill_null)", dt, fill)
	}
	var dims []string
	inner := t
	for inner.ID() == arrow.FIXED_SIZE_LIST {
		l := inner.(*arrow.FixedSizeListType)
		dims = append(dims, fmt.Sprint(l.Len()))
		inner = l.Elem()
	}
	if dt, ok := torchTypes[inner.ID()]; ok && len(dims) > 0 && inner.ID() != arrow.BOOL {
		return fmt.Sprintf("tensor %s [rows, %s] (a null: filled, or fill_null)", dt, strings.Join(dims, ", "))
	}
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return "list of str (a null: None)"
	case arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW, arrow.FIXED_SIZE_BINARY:
		return "list of bytes (a null: None)"
	case arrow.LIST, arrow.LARGE_LIST:
		if _, ok := torchTypes[t.(arrow.ListLikeType).Elem().ID()]; ok {
			return "list of arrays, one per row (variable length)"
		}
	}
	return "list of Python values"
}

// columnsOf summarizes the served schema's columns (the _shardfeed_ ones
// the sidecar adds are documented once, not listed).
func columnsOf(s *arrow.Schema) []columnSummary {
	if s == nil {
		return nil
	}
	out := make([]columnSummary, 0, s.NumFields())
	for _, f := range s.Fields() {
		out = append(out, columnSummary{Name: f.Name, Type: f.Type.String(), Delivered: delivered(f.Type)})
	}
	return out
}

// warnChanged tells w of each stream whose source changed since it was
// indexed, with the command that indexes it again.
func warnChanged(w io.Writer, file string, ds *datav1alpha1.TrainingDataset, changed []source.Changed) {
	for _, c := range changed {
		_, _ = fmt.Fprintln(w, "warning: "+c.Message(reindexCommand(file, ds, c.Stream)))
	}
}

// reindexCommand indexes stream of ds again: from its manifest file when
// there is one, else with the stream's settings as flags.
func reindexCommand(file string, ds *datav1alpha1.TrainingDataset, stream string) string {
	if file != "" && file != "-" {
		return fmt.Sprintf("shardfeed index -f %s --stream %s", file, stream)
	}
	for _, s := range ds.Spec.Streams {
		if s.Name == stream {
			return streams.IndexCommand(s)
		}
	}
	return "shardfeed index"
}

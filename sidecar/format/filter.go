package format

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shardfeed/shardfeed/internal/expr"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/index/sidefile"
	"github.com/shardfeed/shardfeed/internal/store"
)

// unreadable says of an unknown column that the stream has it, in a type
// a filter cannot read (a struct, a list, a timestamp…), rather than that
// it has no such column.
func unreadable(err error, schema *arrow.Schema) error {
	var unknown *expr.UnknownColumnsError
	if !errors.As(err, &unknown) {
		return err
	}
	for _, name := range unknown.Unknown {
		if idx := schema.FieldIndices(name); len(idx) > 0 {
			return fmt.Errorf("column %q is %s, which a filter cannot read: filters read bool, integer, float, string and binary columns (not a struct's fields, lists or timestamps yet); filter on such a column, or write the value you need as a column of its own",
				name, schema.Field(idx[0]).Type)
		}
	}
	return err
}

// Select computes a row filter's selection over a stream of layout l whose
// shards are in st: each shard is read (only the columns the filter can
// read) and its matching rows found. It returns the selection's index and
// its runs object, written beside the stream's index under the filter's
// hash. An unknown column is refused before any shard is read, naming the
// columns.
func (r Registry) Select(ctx context.Context, st store.Store, l *index.Layout, filter string, progress func(done, total int, shard string)) (*sidefile.FilterIndex, []byte, error) {
	return r.SelectShards(ctx, st, l, filter, AllShards(l), progress)
}

// SelectShards is Select over the shards of range in alone: the
// selection's shards are theirs, its runs object theirs from offset 0
// (one part of a selection computed in parts, which
// sidefile.JoinFilters joins).
func (r Registry) SelectShards(ctx context.Context, st store.Store, l *index.Layout, filter string, in ShardRange, progress func(done, total int, shard string)) (*sidefile.FilterIndex, []byte, error) {
	if err := in.check(l); err != nil {
		return nil, nil, err
	}
	reader, read, schema, err := r.openScan(ctx, st, l)
	if err != nil {
		return nil, nil, err
	}
	cols := expr.ColumnsOf(schema)
	e, err := expr.Compile(filter, cols)
	if err != nil {
		return nil, nil, fmt.Errorf("filter: %w", unreadable(err, schema))
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	out := &sidefile.FilterIndex{Shardfeed: indexfile.Version, Filter: filter, Nulls: expr.Nulls, Index: l.Index.ContentHash()}
	pruner, _ := reader.(Pruner)
	var runsObject []byte
	for i := in.From; i < in.To; i++ {
		sh := l.Index.Shards[i]
		if sh.Samples == 0 {
			// No row to match (a Parquet file's empty row group, whose
			// bytes the index does not range): nothing is read.
			runsObject = out.AppendShard(runsObject, nil)
			if progress != nil {
				progress(i+1-in.From, in.len(), sh.Name)
			}
			continue
		}
		if pruner != nil {
			stats, err := pruner.Stats(ctx, i, read)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", sh.Name, err)
			}
			if stats != nil && e.Excludes(stats) {
				runsObject = out.AppendShard(runsObject, nil)
				out.Pruned++
				if progress != nil {
					progress(i+1-in.From, in.len(), sh.Name)
				}
				continue
			}
		}
		var parts [][]byte
		for _, p := range reader.Parts(i) {
			b, err := read(ctx, p)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", sh.Name, err)
			}
			parts = append(parts, b)
		}
		rr, err := reader.Records(ctx, i, parts, names)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", sh.Name, err)
		}
		var runs []indexfile.Run
		var row int64
		for rr.Next() {
			rec := rr.RecordBatch()
			matched, err := e.Rows(rec)
			if err != nil {
				rr.Release()
				return nil, nil, fmt.Errorf("%s: %w", sh.Name, err)
			}
			for _, m := range matched {
				if n := len(runs); n > 0 && runs[n-1][1] == row+m[0] {
					runs[n-1][1] = row + m[1]
				} else {
					runs = append(runs, indexfile.Run{row + m[0], row + m[1]})
				}
			}
			row += rec.NumRows()
		}
		err = rr.Err()
		rr.Release()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", sh.Name, err)
		}
		if row != sh.Samples {
			return nil, nil, fmt.Errorf("%s: %d rows read, the index says %d: re-run shardfeed index", sh.Name, row, sh.Samples)
		}
		runsObject = out.AppendShard(runsObject, runs)
		if progress != nil {
			progress(i+1-in.From, in.len(), sh.Name)
		}
	}
	return out, runsObject, nil
}

// openScan opens a stream of layout l whose shards are in st for a scan
// of every shard: its reader, a read of its parts that keeps the last
// footer, and its schema.
func (r Registry) openScan(ctx context.Context, st store.Store, l *index.Layout) (Reader, ReadFunc, *arrow.Schema, error) {
	reader, err := r.Open(l)
	if err != nil {
		return nil, nil, nil, err
	}
	read := lastFooter(StoreRead(st))
	schema, err := reader.Schema(ctx, read)
	if err != nil {
		return nil, nil, nil, err
	}
	return reader, read, schema, nil
}

// lastFooter remembers the last part read that is not a shard's own bytes
// (a Parquet footer, which every row group of a file shares), so that
// consecutive shards of one object read it once.
func lastFooter(read ReadFunc) ReadFunc {
	var last Part
	var data []byte
	return func(ctx context.Context, p Part) ([]byte, error) {
		p0 := p
		p0.Version = "" // each row group names its own; the footer is one
		if p.Hash == "" && data != nil && p0 == last {
			return data, nil
		}
		b, err := read(ctx, p)
		if err == nil && p.Hash == "" {
			last, data = p0, b
		}
		return b, err
	}
}

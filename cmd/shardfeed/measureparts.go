package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/index/indexparts"
	"github.com/shardfeed/shardfeed/internal/index/indexparts/jobrecords"
	"github.com/shardfeed/shardfeed/internal/index/sidefile"
	"github.com/shardfeed/shardfeed/internal/planspec"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
)

// A stream's selection and lengths measured in parts, over the index
// already there: --measure-parts N with --part K measures the K-th of N
// ranges of its shards (tokenizing, where the lengths are a tokenized
// column's: the work that needs many machines); with --merge-parts, the
// parts are joined into the files one run writes, and the buckets and
// packs are cut from them.

// measuring is a measuring run: what it measures, its name and its
// parts' shards.
type measuring struct {
	m     indexparts.Measure
	run   string
	spans []indexparts.Span
	tc    *tokenCounting
}

// measureInParts runs the measuring step asked for over the stream's
// index in ist (MDS's own in st).
func (o *indexOptions) measureInParts(ctx context.Context, st, ist store.Store, source store.Source, packing *datav1alpha1.Packing,
	opts format.IndexOptions, verb string, start time.Time) (err error) {
	if name := o.inParts.name; name != "" {
		defer func() {
			if err != nil {
				o.recordFailure(ctx, ist, name, err)
			}
		}()
	}
	own := ist
	if o.kind == datav1alpha1.FormatMDS {
		own = st
	}
	l, err := index.ReadStoreLayout(ctx, own)
	if err != nil {
		return err
	}
	data, err := dataStore(ctx, st, source, l)
	if err != nil {
		return err
	}
	var r measuring
	r.m = indexparts.Measure{Index: l.Index.ContentHash(), Filter: o.filter, Column: o.lengths, Parts: o.inParts.measure}
	if t := o.tokenize; t != nil && o.lengths == planspec.TokenizeOutput(t) {
		r.m.Tokenize = planspec.TokenizeKey(t)
	}
	if o.inParts.part >= 0 && o.lengths != "" {
		// The tokenizer is read where the tokens are counted: the join
		// has their counts.
		if r.tc, err = o.tokenCount(ctx, source); err != nil {
			return err
		}
	}
	r.run = indexparts.MeasureRun(r.m)
	sizes := make([]int64, len(l.Index.Shards))
	for i, sh := range l.Index.Shards {
		sizes[i] = sh.Bytes
	}
	r.spans = indexparts.MeasureSpans(sizes, r.m.Parts)
	if k := o.inParts.part; k >= 0 {
		if k >= len(r.spans) {
			return fmt.Errorf("--part %d: --measure-parts %d makes parts 0 to %d", k, len(r.spans), len(r.spans)-1)
		}
		return o.measurePart(ctx, data, ist, l, r, k, opts.Progress, start)
	}
	m, err := o.joinMeasured(ctx, ist, l, r)
	if err != nil {
		return err
	}
	if err := o.derive(ctx, o.out, ist, l, packing, verb, m); err != nil {
		return err
	}
	if o.inParts.keep {
		return nil
	}
	if err := removeMeasured(ctx, ist, r, o.inParts.name); err != nil {
		return fmt.Errorf("removing the measured parts joined: %w", err)
	}
	return nil
}

// measurePart measures part k's shards and writes what it measured under
// the run, unless it is done already.
func (o *indexOptions) measurePart(ctx context.Context, data, ist store.Store, l *index.Layout, r measuring, k int,
	progress func(done, total int, object string), start time.Time) error {
	span := r.spans[k]
	if _, err := readMeasured(ctx, ist, r, k); err == nil {
		_, err = fmt.Fprintf(o.out, "part %d of measuring run %s is done already: skipped\n", k, r.run)
		return err
	}
	in := format.ShardRange{From: span.First, To: span.First + span.Objects}
	rec := indexparts.Measured{Run: r.run, Part: k, From: in.From, To: in.To}
	var sel *format.Selection
	if o.filter != "" {
		fi, runs, err := formats.Default().SelectShards(ctx, data, l, o.filter, in, progress)
		if err != nil {
			return fmt.Errorf("--filter: %w", err)
		}
		if err := ist.Put(ctx, indexparts.MeasuredRunsKey(r.run, k), bytes.NewReader(runs), int64(len(runs))); err != nil {
			return err
		}
		rec.Filter, rec.RunsSHA256, sel = fi, indexparts.Digest(runs), &format.Selection{Index: fi, Runs: runs}
	}
	if o.lengths != "" {
		x, values, err := measureLengths(ctx, data, l, o.lengths, r.tc, sel, in, progress)
		if err != nil {
			return fmt.Errorf("--lengths: %w", err)
		}
		if err := ist.Put(ctx, indexparts.MeasuredLengthsKey(r.run, k), bytes.NewReader(values), int64(len(values))); err != nil {
			return err
		}
		rec.Lengths, rec.LengthsSHA256 = x, indexparts.Digest(values)
	}
	// The record last: a part is done once it is there.
	if err := putJSON(ctx, ist, indexparts.MeasuredKey(r.run, k), rec); err != nil {
		return err
	}
	_, err := fmt.Fprintf(o.out, "measured part %d of %d (shards %d to %d of %d) under %s (%s); join the parts with --merge-parts\n",
		k, len(r.spans), in.From, in.To, len(l.Index.Shards), indexfile.ObjectURI(ist, indexparts.RunDir(r.run)), time.Since(start).Round(time.Millisecond))
	return err
}

// readMeasured reads part k's record, checked against the run.
func readMeasured(ctx context.Context, ist store.Store, r measuring, k int) (*indexparts.Measured, error) {
	key := indexparts.MeasuredKey(r.run, k)
	data, err := indexfile.ReadObject(ctx, ist, key, indexparts.MaxManifestBytes)
	if err != nil {
		return nil, err
	}
	rec, err := indexparts.ParseMeasured(data, r.run, k, r.spans[k], r.m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: delete it and measure the part again (--part %d)", indexfile.ObjectURI(ist, key), err, k)
	}
	return rec, nil
}

// readMeasuredObject reads an object a part wrote, checked against the
// digest its record gives.
func readMeasuredObject(ctx context.Context, ist store.Store, key, digest string, k int) ([]byte, error) {
	data, err := indexfile.ReadObject(ctx, ist, key, indexparts.MaxMeasuredBytes)
	if err != nil {
		return nil, fmt.Errorf("part %d: %w", k, err)
	}
	if got := indexparts.Digest(data); got != digest {
		return nil, fmt.Errorf("%s: its SHA-256 is %s, its record's %s: delete the part's files and measure it again (--part %d)", indexfile.ObjectURI(ist, key), got, digest, k)
	}
	return data, nil
}

// joinMeasured reads every part of the run and joins them: the measures
// derive writes, as one run over every shard measures them.
func (o *indexOptions) joinMeasured(ctx context.Context, ist store.Store, l *index.Layout, r measuring) (measures, error) {
	var (
		filters []*sidefile.FilterIndex
		lengths []*sidefile.LengthsIndex
		runs    [][]byte
		values  [][]byte
	)
	for k := range r.spans {
		rec, err := readMeasured(ctx, ist, r, k)
		if errors.Is(err, store.ErrNotFound) {
			return measures{}, fmt.Errorf("part %d of measuring run %s is not done (no %s): measure it with --part %d, then join", k, r.run,
				indexfile.ObjectURI(ist, indexparts.MeasuredKey(r.run, k)), k)
		}
		if err != nil {
			return measures{}, err
		}
		if rec.Filter != nil {
			b, err := readMeasuredObject(ctx, ist, indexparts.MeasuredRunsKey(r.run, k), rec.RunsSHA256, k)
			if err != nil {
				return measures{}, err
			}
			filters, runs = append(filters, rec.Filter), append(runs, b)
		}
		if rec.Lengths != nil {
			b, err := readMeasuredObject(ctx, ist, indexparts.MeasuredLengthsKey(r.run, k), rec.LengthsSHA256, k)
			if err != nil {
				return measures{}, err
			}
			lengths, values = append(lengths, rec.Lengths), append(values, b)
		}
	}
	// Joined and checked whole before anything is written: a part that
	// does not hold up leaves the files beside the index as they were.
	m := measures{note: fmt.Sprintf(", joined from %d parts", len(r.spans))}
	rows := shardRows(l)
	if filters != nil {
		f, b, err := sidefile.JoinFilters(filters, runs)
		if err != nil {
			return measures{}, fmt.Errorf("%w: delete the run's files under %s and measure it again", err, indexfile.ObjectURI(ist, indexparts.RunDir(r.run)))
		}
		for i, s := range f.Shards {
			if _, err := f.ShardRuns(i, b[s.Offset:s.Offset+s.Length], rows[i]); err != nil {
				return measures{}, r.partOf(ist, i, fmt.Errorf("the selection of shard %d: %w", i, err))
			}
		}
		if err := f.Check(l.Index.ContentHash(), rows, int64(len(b))); err != nil {
			return measures{}, err
		}
		m.selection = func(context.Context) (*sidefile.FilterIndex, []byte, error) { return f, b, nil }
		for i, s := range f.Shards {
			rows[i] = s.Matching // the lengths are of the matching rows
		}
	}
	if lengths != nil {
		x, b, err := sidefile.JoinLengths(lengths, values)
		if err != nil {
			return measures{}, fmt.Errorf("%w: delete the run's files under %s and measure it again", err, indexfile.ObjectURI(ist, indexparts.RunDir(r.run)))
		}
		if err := x.Check(l.Index.ContentHash(), rows, int64(len(b))); err != nil {
			return measures{}, err
		}
		for i, s := range x.Shards {
			if _, err := x.ShardLengths(i, b[s.Offset:s.Offset+s.Length]); err != nil {
				return measures{}, r.partOf(ist, i, fmt.Errorf("the lengths of shard %d: %w", i, err))
			}
		}
		m.lengths = func(context.Context, *format.Selection) (*sidefile.LengthsIndex, []byte, error) { return x, b, nil }
	}
	return m, nil
}

// partOf says which part measured shard i, with err, and how to measure
// it again.
func (r measuring) partOf(ist store.Store, i int, err error) error {
	for k, s := range r.spans {
		if i >= s.First && i < s.First+s.Objects {
			return fmt.Errorf("part %d of measuring run %s (shards %d to %d): %w: delete its files (%s) and measure it again (--part %d)", k, r.run, s.First, s.First+s.Objects, err,
				indexfile.ObjectURI(ist, indexparts.MeasuredKey(r.run, k)), k)
		}
	}
	return err
}

// shardRows are the rows of each shard of l's index.
func shardRows(l *index.Layout) []int64 {
	rows := make([]int64, len(l.Index.Shards))
	for i, sh := range l.Index.Shards {
		rows[i] = sh.Samples
	}
	return rows
}

// removeMeasured deletes a measuring run's files, and the failure
// recorded under name.
func removeMeasured(ctx context.Context, ist store.Store, r measuring, name string) error {
	var keys []string
	for k := range r.spans {
		keys = append(keys, indexparts.MeasuredKey(r.run, k), indexparts.MeasuredRunsKey(r.run, k), indexparts.MeasuredLengthsKey(r.run, k))
	}
	if name != "" {
		keys = append(keys, jobrecords.FailureKey(name))
	}
	for _, key := range keys {
		if err := ist.Delete(ctx, key); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	return nil
}

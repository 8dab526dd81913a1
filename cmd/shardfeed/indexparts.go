package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/shardfeed/shardfeed/internal/bytesize"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/compact"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/index/indexparts"
	"github.com/shardfeed/shardfeed/internal/index/indexparts/jobrecords"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
)

// maxPartIndexBytes bounds a part's index read, as a checkpoint's.
const maxPartIndexBytes = 1 << 30

// partsFlags index a stream in parts, on several machines at once.
type partsFlags struct {
	list  int
	part  int
	merge bool
	run   string
	keep  bool
	// name, if set, records the run under it for whoever runs the steps
	// (the operator's Jobs): its totals, and the parts' progress.
	name string
	// ifChanged cuts no run where the listing is the index's own.
	ifChanged bool
	// measure, with part or merge, measures the selection and lengths
	// over the index there in this many ranges of its shards.
	measure int
}

func (p *partsFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&p.list, "list-parts", 0, "index in parts, step 1: list the stream once and cut its objects into this many parts (contiguous runs balanced by bytes and count), written under _shardfeed/parts/RUN/ beside the index")
	f.IntVar(&p.part, "part", -1, "index in parts, step 2: index only part K (0-based) of the run listed, beside the others (one pod each); a part already done is skipped, one interrupted resumes")
	f.BoolVar(&p.merge, "merge-parts", false, "index in parts, step 3: merge every part of the run into the stream's index, byte for byte the one a single run writes, then remove the run's files (unless --keep-parts)")
	f.StringVar(&p.run, "run", "", "with --part or --merge-parts: the run (--list-parts prints it; default: the run last listed with the same options)")
	f.BoolVar(&p.keep, "keep-parts", false, "with --merge-parts: keep the run's files")
	f.IntVar(&p.measure, "measure-parts", 0, "measure the filter's selection and the lengths (and the tokens) over the index already there in this many ranges of its shards, one machine each: with --part K, measure range K; then with --merge-parts, join them into the files one run writes and cut the buckets and packs")
	f.BoolVar(&p.ifChanged, "if-changed", false, "with --list-parts: where the stream has an index of the very objects listed (keys, sizes, version tags), cut no run and say so (recorded under --record-run's name as unchanged): the operator's spec.index.recheckEvery")
	f.StringVar(&p.name, "record-run", "", "with --list-parts: also record the run and its totals under this name (_shardfeed/parts/named-NAME.json), for a program that runs the steps (the operator's indexing Jobs) to read; with --merge-parts: remove that record; with any step, or an index in one run: record why it failed (named-NAME.failed.json)")
}

// on says whether one of the steps is asked for, refusing two.
func (p *partsFlags) on() (bool, error) {
	n := 0
	for _, b := range []bool{p.list != 0, p.part >= 0, p.merge} {
		if b {
			n++
		}
	}
	switch {
	case n > 1:
		return false, errors.New("--list-parts, --part and --merge-parts are three steps: give one at a time")
	case p.measure != 0 && (p.measure < 0 || p.measure > indexparts.MaxParts):
		return false, fmt.Errorf("--measure-parts %d: 1 to %d parts", p.measure, indexparts.MaxParts)
	case p.measure != 0 && (p.list != 0 || n == 0):
		return false, errors.New("--measure-parts goes with --part K or --merge-parts (the index is there: nothing is listed)")
	case p.measure != 0 && (p.run != "" || p.ifChanged):
		return false, errors.New("--measure-parts names its run by what it measures: drop --run and --if-changed")
	case n == 0 && (p.run != "" || p.keep):
		return false, errors.New("--run and --keep-parts go with --part or --merge-parts")
	case p.list < 0 || p.list > indexparts.MaxParts:
		return false, fmt.Errorf("--list-parts %d: 1 to %d parts", p.list, indexparts.MaxParts)
	case p.list != 0 && p.run != "":
		return false, errors.New("--list-parts makes its run: drop --run")
	case p.keep && !p.merge:
		return false, errors.New("--keep-parts goes with --merge-parts")
	case p.ifChanged && p.list == 0:
		return false, errors.New("--if-changed goes with --list-parts")
	case p.name != "":
		if err := jobrecords.CheckName(p.name); err != nil {
			return false, fmt.Errorf("--record-run: %w", err)
		}
		if p.run != "" {
			if err := indexparts.CheckRun(p.run); err != nil {
				return false, fmt.Errorf("--run: %w: give the run --list-parts printed", err)
			}
		}
	case p.run != "":
		if err := indexparts.CheckRun(p.run); err != nil {
			return false, fmt.Errorf("--run: %w: give the run --list-parts printed", err)
		}
	}
	return n == 1, nil
}

// indexParts runs the step of indexing in parts asked for: the stream's
// layout after --merge-parts, nil after the others.
func (o *indexOptions) indexParts(ctx context.Context, cmd *cobra.Command, st, ist store.Store, opts format.IndexOptions, verb string, start time.Time) (_ *index.Layout, err error) {
	if name := o.inParts.name; name != "" {
		defer func() {
			if err != nil {
				o.recordFailure(ctx, ist, name, err)
			}
		}()
	}
	switch {
	case o.inParts.list > 0:
		return nil, o.listParts(ctx, st, ist, opts, start)
	case o.inParts.part >= 0:
		return nil, o.indexPart(ctx, st, ist, opts, start)
	}
	return o.mergeParts(ctx, cmd, ist, opts, verb, start)
}

// listParts lists the stream and writes the run's object lists and
// manifest, unless the same run is listed already.
func (o *indexOptions) listParts(ctx context.Context, st, ist store.Store, opts format.IndexOptions, start time.Time) error {
	var counts store.Counts
	pl, err := formats.Default().ListObjects(ctx, o.listing(store.Counted(st, &counts)), o.kind, opts)
	if err != nil {
		return err
	}
	if len(pl.Objects) > 0 && pl.Head > indexparts.MaxHead {
		return fmt.Errorf("the first %d objects hold no sample: more than %d, which every part would index again; remove them or index in one run", pl.Head-1, indexparts.MaxHead)
	}
	if o.inParts.ifChanged {
		if same, err := o.listedAsIndexed(ctx, ist, pl.Listing); err != nil || same {
			if err != nil {
				return err
			}
			return o.recordUnchanged(ctx, ist, pl.Objects, start)
		}
	}
	key := opts.Key(o.kind)
	n := o.inParts.list
	run := indexparts.RunID(key, pl.Listing, n)
	m := &indexparts.Manifest{Version: indexparts.Version, Run: run, Format: string(o.kind), Options: key, Listing: *pl.Listing, Objects: len(pl.Objects)}
	for _, obj := range pl.Objects[:pl.Head] {
		m.Head = append(m.Head, indexparts.ObjectOf(obj))
	}
	m.Parts = indexparts.Plan(pl.Objects, n)
	if old, err := readManifest(ctx, ist, run); err == nil && old.Options == key {
		_, _ = fmt.Fprintf(o.out, "run %s is listed already under %s: its parts go on\n", run, indexfile.ObjectURI(ist, indexparts.RunDir(run)))
	} else {
		for k, s := range m.Parts {
			data := indexparts.EncodeObjects(pl.Objects[s.First : s.First+s.Objects])
			m.Digests = append(m.Digests, indexparts.Digest(data))
			m.Bytes += s.Bytes
			if err := ist.Put(ctx, indexparts.ObjectsKey(run, k), bytes.NewReader(data), int64(len(data))); err != nil {
				return fmt.Errorf("writing part %d's objects: %w", k, err)
			}
		}
		if err := putJSON(ctx, ist, indexparts.ManifestKey(run), m); err != nil {
			return err
		}
	}
	if err := putJSON(ctx, ist, indexparts.CurrentKey(key), indexparts.Current{Run: run}); err != nil {
		return err
	}
	if name := o.inParts.name; name != "" {
		var bytes int64
		for _, s := range m.Parts {
			bytes += s.Bytes
		}
		listed := jobrecords.Listed{Run: run, Objects: int64(len(pl.Objects)), Bytes: bytes, Parts: len(m.Parts)}
		if err := putJSON(ctx, ist, jobrecords.ListedKey(name), listed); err != nil {
			return err
		}
	}
	var largest int64
	for _, s := range m.Parts {
		largest = max(largest, s.Bytes)
	}
	_, err = fmt.Fprintf(o.out, "listed %d objects (%s) in %d parts of at most %s: run %s under %s (%s); index each part with --part K (0 to %d), then --merge-parts\n",
		len(pl.Objects), bytesize.Human(m.Bytes), n, bytesize.Human(largest), run, indexfile.ObjectURI(ist, indexparts.RunDir(run)), time.Since(start).Round(time.Millisecond), n-1)
	return err
}

// runOf reads the run --run names, or the last listed with the options.
func (o *indexOptions) runOf(ctx context.Context, ist store.Store, opts format.IndexOptions) (*indexparts.Manifest, error) {
	key := opts.Key(o.kind)
	run := o.inParts.run
	if run == "" {
		data, err := indexfile.ReadObject(ctx, ist, indexparts.CurrentKey(key), indexparts.MaxRecordBytes)
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("no run of these options is listed under %s: list the parts first (--list-parts N)", indexfile.ObjectURI(ist, indexparts.Dir))
		}
		if err != nil {
			return nil, err
		}
		c, err := indexparts.ParseCurrent(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: list the parts again (--list-parts N)", indexfile.ObjectURI(ist, indexparts.CurrentKey(key)), err)
		}
		run = c.Run
	}
	m, err := readManifest(ctx, ist, run)
	if err != nil {
		return nil, err
	}
	if m.Options != key || m.Format != string(o.kind) {
		return nil, fmt.Errorf("run %s was listed with other options (its format %s): give the options it was listed with, or list the parts again with these", run, m.Format)
	}
	return m, nil
}

func readManifest(ctx context.Context, ist store.Store, run string) (*indexparts.Manifest, error) {
	key := indexparts.ManifestKey(run)
	data, err := indexfile.ReadObject(ctx, ist, key, indexparts.MaxManifestBytes)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("run %s has no manifest at %s: list the parts (--list-parts N)", run, indexfile.ObjectURI(ist, key))
	}
	if err != nil {
		return nil, err
	}
	m, err := indexparts.ParseManifest(data)
	if err == nil && m.Run != run {
		err = fmt.Errorf("it is run %s's", m.Run)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w: list the parts again (--list-parts N)", indexfile.ObjectURI(ist, key), err)
	}
	return m, nil
}

func readObjects(ctx context.Context, ist store.Store, m *indexparts.Manifest, k int) ([]store.Object, error) {
	key := indexparts.ObjectsKey(m.Run, k)
	data, err := indexfile.ReadObject(ctx, ist, key, indexparts.MaxObjectsBytes)
	if err != nil {
		return nil, fmt.Errorf("part %d's objects: %w", k, err)
	}
	objs, err := indexparts.ParseObjects(data, m, k)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: list the parts again (--list-parts N)", indexfile.ObjectURI(ist, key), err)
	}
	return objs, nil
}

// readPart reads part k's index: nil for a part without shards, an error
// naming the part where it is not done.
func readPart(ctx context.Context, ist store.Store, m *indexparts.Manifest, k int) (*indexfile.File, error) {
	key := indexparts.RecordKey(m.Run, k)
	data, err := indexfile.ReadObject(ctx, ist, key, indexparts.MaxRecordBytes)
	if err != nil {
		return nil, err
	}
	r, err := indexparts.ParseRecord(data, m.Run, k)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", indexfile.ObjectURI(ist, key), err)
	}
	if r.Shards == 0 {
		return nil, nil
	}
	data, err = indexfile.ReadObject(ctx, ist, indexparts.PartKey(m.Run, k), maxPartIndexBytes)
	if err != nil {
		return nil, err
	}
	if got := indexparts.Digest(data); got != r.SHA256 {
		return nil, fmt.Errorf("%s: its SHA-256 is %s, its record's %s", indexfile.ObjectURI(ist, indexparts.PartKey(m.Run, k)), got, r.SHA256)
	}
	f, err := compact.Parse(data)
	if err == nil && len(f.Shards) != r.Shards {
		err = fmt.Errorf("%d shards, its record %d", len(f.Shards), r.Shards)
	}
	if err == nil && string(f.Format) != m.Format {
		err = fmt.Errorf("of format %s, the run's %s", f.Format, m.Format)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", indexfile.ObjectURI(ist, indexparts.PartKey(m.Run, k)), err)
	}
	return f, nil
}

// indexPart indexes part K of the run, unless it is done already.
func (o *indexOptions) indexPart(ctx context.Context, st, ist store.Store, opts format.IndexOptions, start time.Time) error {
	m, err := o.runOf(ctx, ist, opts)
	if err != nil {
		return err
	}
	k := o.inParts.part
	if k >= len(m.Parts) {
		return fmt.Errorf("--part %d: run %s has %d parts, 0 to %d", k, m.Run, len(m.Parts), len(m.Parts)-1)
	}
	if _, err := readPart(ctx, ist, m, k); err == nil {
		_, err = fmt.Fprintf(o.out, "part %d of run %s is done already: skipped\n", k, m.Run)
		return err
	}
	objs, err := readObjects(ctx, ist, m, k)
	if err != nil {
		return err
	}
	// The head objects before the part are indexed again, as the head
	// the part's objects are indexed against: checked too.
	var head []store.Object
	for _, h := range m.Head[:min(len(m.Head), m.Parts[k].First)] {
		head = append(head, h.StoreObject())
	}
	if len(objs) > 0 {
		if err := o.unchanged(ctx, st, append(slices.Clone(head), objs...), m.Listing.ObjectList); err != nil {
			return err
		}
	}
	rec := indexparts.Record{Run: m.Run, Part: k}
	if len(objs) > 0 {
		cp := &index.Checkpoint{Store: ist, Options: opts.Key(o.kind), Note: opts.Note, Dir: indexparts.CheckpointDir(m.Run, k)}
		opts.Checkpoints = cp
		progress := newPartProgress(ist, m, k, head, objs, opts.Progress)
		opts.Progress = progress.observe
		stop := progress.start(ctx, partProgressEvery)
		f, err := formats.Default().IndexPart(ctx, st, o.kind, append(head, objs...), len(head), opts)
		stop()
		if err != nil {
			return fmt.Errorf("part %d: %w", k, err)
		}
		if err := progress.finish(ctx); err != nil {
			return err
		}
		if rec.Shards = len(f.Shards); rec.Shards > 0 {
			data, err := compact.Encode(f)
			if err != nil {
				return err
			}
			rec.SHA256 = indexparts.Digest(data)
			if err := ist.Put(ctx, indexparts.PartKey(m.Run, k), bytes.NewReader(data), int64(len(data))); err != nil {
				return fmt.Errorf("writing part %d: %w", k, err)
			}
		}
		defer func() { _ = cp.Remove(context.WithoutCancel(ctx)) }()
	}
	if err := putJSON(ctx, ist, indexparts.RecordKey(m.Run, k), rec); err != nil {
		return err
	}
	_, err = fmt.Fprintf(o.out, "indexed part %d of run %s: %d objects (%s), %d shards (%s)\n", k, m.Run, len(objs), bytesize.Human(m.Parts[k].Bytes), rec.Shards,
		time.Since(start).Round(time.Millisecond))
	return err
}

// unchanged refuses an object that is gone, or whose size (or version
// tag, where the listing recorded them) is not the one listed.
func (o *indexOptions) unchanged(ctx context.Context, st store.Store, objs []store.Object, fromList bool) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(o.concurrency, format.DefaultIndexConcurrency))
	for _, want := range objs {
		g.Go(func() error {
			got, err := st.Stat(gctx, want.Key)
			switch {
			case errors.Is(err, store.ErrNotFound):
				return fmt.Errorf("%s%s is gone since the parts were listed: list the parts again (--list-parts N), which makes a new run", st.URI(), want.Key)
			case err != nil:
				return err
			case got.Size != want.Size:
				return fmt.Errorf("%s%s is %d bytes, and was %d when the parts were listed: list the parts again (--list-parts N), which makes a new run", st.URI(), want.Key, got.Size, want.Size)
			case !fromList && want.ETag != "" && strings.Trim(got.ETag, `"`) != strings.Trim(want.ETag, `"`):
				return fmt.Errorf("%s%s changed since the parts were listed (version %s, listed %s): list the parts again (--list-parts N), which makes a new run", st.URI(), want.Key, got.ETag, want.ETag)
			}
			return nil
		})
	}
	return g.Wait()
}

// mergeParts merges every part of the run into the stream's index and
// writes it, then removes the run's files (unless --keep-parts).
func (o *indexOptions) mergeParts(ctx context.Context, cmd *cobra.Command, ist store.Store, opts format.IndexOptions, verb string, start time.Time) (*index.Layout, error) {
	m, err := o.runOf(ctx, ist, opts)
	if err != nil {
		return nil, err
	}
	parts := make([]*indexfile.File, len(m.Parts))
	objs := make([]store.Object, 0, m.Objects)
	for k := range m.Parts {
		if parts[k], err = readPart(ctx, ist, m, k); errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("part %d of run %s is not done (no %s): index it with --part %d, then merge", k, m.Run, indexfile.ObjectURI(ist, indexparts.RecordKey(m.Run, k)), k)
		} else if err != nil {
			return nil, fmt.Errorf("part %d of run %s: %w: index it again (delete its files, then --part %d)", k, m.Run, err, k)
		}
		these, err := readObjects(ctx, ist, m, k)
		if err != nil {
			return nil, err
		}
		objs = append(objs, these...)
	}
	f, err := formats.Default().MergeParts(o.kind, parts, objs, &m.Listing, opts)
	if err != nil {
		return nil, err
	}
	if err := o.writeIndexed(ctx, cmd, ist, f, nil, fmt.Sprintf(", merged from %d parts", len(parts)), verb, start); err != nil {
		return nil, err
	}
	if !o.inParts.keep {
		if err := removeRun(ctx, ist, m, opts.Key(o.kind), o.inParts.name); err != nil {
			return nil, fmt.Errorf("removing the parts of the index written: %w", err)
		}
	}
	o.noteHive(cmd, f, opts)
	return index.LayoutOf(f), nil
}

// removeRun deletes a run's files, and the pointers to it (the one of
// its options, and the one named name where there is one).
func removeRun(ctx context.Context, ist store.Store, m *indexparts.Manifest, options, name string) error {
	keys := []string{indexparts.ManifestKey(m.Run)}
	for k := range m.Parts {
		keys = append(keys, indexparts.RecordKey(m.Run, k), indexparts.PartKey(m.Run, k), indexparts.ObjectsKey(m.Run, k), jobrecords.ProgressKey(m.Run, k))
	}
	if data, err := indexfile.ReadObject(ctx, ist, indexparts.CurrentKey(options), indexparts.MaxRecordBytes); err == nil {
		if c, err := indexparts.ParseCurrent(data); err == nil && c.Run == m.Run {
			keys = append(keys, indexparts.CurrentKey(options))
		}
	}
	if name != "" {
		keys = append(keys, jobrecords.FailureKey(name)) // a step failed before, and done since
		if data, err := indexfile.ReadObject(ctx, ist, jobrecords.ListedKey(name), indexparts.MaxRecordBytes); err == nil {
			if l, err := jobrecords.ParseListed(data); err == nil && l.Run == m.Run {
				keys = append(keys, jobrecords.ListedKey(name))
			}
		}
	}
	for _, key := range keys {
		if err := ist.Delete(ctx, key); err != nil {
			return err
		}
	}
	return nil
}

func putJSON(ctx context.Context, st store.Store, key string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := st.Put(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
		return fmt.Errorf("writing %s: %w", strings.TrimSuffix(st.URI(), "/")+"/"+key, err)
	}
	return nil
}

// recordFailure records why the step failed under the run's name, for
// the operator's condition; a record not written leaves the logs alone to
// say it (the command's error stands either way).
func (o *indexOptions) recordFailure(ctx context.Context, ist store.Store, name string, err error) {
	f := jobrecords.Failure{Step: "merge", Run: o.inParts.run, Time: time.Now().UTC(), Error: jobrecords.FailureText(err.Error())}
	switch {
	case o.inParts.measure == 0 && o.inParts.list == 0 && o.inParts.part < 0 && !o.inParts.merge:
		f.Step = "index"
	case o.inParts.measure > 0 && o.inParts.part >= 0:
		f.Step, f.Part = "measure", o.inParts.part
	case o.inParts.measure > 0:
		f.Step = "join"
	case o.inParts.list > 0:
		f.Step = "list"
	case o.inParts.part >= 0:
		f.Step, f.Part = "part", o.inParts.part
	}
	// Written even when the step was cancelled (its pod stopped), within
	// a bound of its own.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if werr := putJSON(wctx, ist, jobrecords.FailureKey(name), f); werr != nil {
		_, _ = fmt.Fprintf(o.out, "warning: the failure was not recorded for the operator: %v\n", werr)
	}
}

// listedAsIndexed says whether the stream's index there lists the very
// objects listed now. No index, or one that recorded no listing, is
// not.
func (o *indexOptions) listedAsIndexed(ctx context.Context, ist store.Store, now *indexfile.Listing) (bool, error) {
	l, _, err := index.ReadStoreIndexOf(ctx, ist, 0, o.kind)
	if missing := (*index.MissingError)(nil); errors.As(err, &missing) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("--if-changed: reading the index to compare: %w", err)
	}
	was := l.File.Listing
	return was != nil && now != nil && was.Objects == now.Objects && was.Digest == now.Digest &&
		was.ObjectList == now.ObjectList && was.Shards == now.Shards, nil
}

// recordUnchanged says (and records under the run's name) that the
// listing found the index's objects.
func (o *indexOptions) recordUnchanged(ctx context.Context, ist store.Store, objs []store.Object, start time.Time) error {
	var bytes int64
	for _, obj := range objs {
		bytes += obj.Size
	}
	if name := o.inParts.name; name != "" {
		if err := putJSON(ctx, ist, jobrecords.ListedKey(name), jobrecords.Listed{Objects: int64(len(objs)), Bytes: bytes, Unchanged: true}); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(o.out, "listed %d objects (%s): the stream's index lists these very objects, unchanged since it was written (%s); no run cut\n",
		len(objs), bytesize.Human(bytes), time.Since(start).Round(time.Millisecond))
	return err
}

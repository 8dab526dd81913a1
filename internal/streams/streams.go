// Package streams opens the streams of a TrainingDataset spec: each
// stream's store and index, read once, with the spec's defaults resolved.
// It is the one constructor the reconciler, the sidecar and the CLI share,
// and it decodes nothing (the operator links it).
package streams

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/utils/ptr"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/index/sidefile"
	"github.com/shardfeed/shardfeed/internal/planspec"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/planner"
)

// Stream is one stream of a spec, opened.
type Stream struct {
	// Spec is the stream as the spec gives it.
	Spec  datav1alpha1.Stream
	Store store.Store
	// IndexStore is where the stream's index and selections are: Store,
	// or the one source.indexURI names.
	IndexStore store.Store
	// Index is the planner's view of the stream's index.
	Index planner.StreamIndex
	// Layout says how to read the shards; nil for a plain list of shards,
	// which plans but cannot be served (Served says why).
	Layout *index.Layout
	// Filter is the selection of the stream's row filter, when it has one:
	// then Index counts each shard's matching rows (Layout's, all of them).
	Filter *Filter
	// Packs are the counts of the dataset's packing (spec.packing), when
	// it has one: then Index counts each shard's packs, and the
	// documents are its rows (its matching rows, filtered).
	Packs *Packs
	// Lanes are, in a bucketed dataset (spec.bucketing), the stream's rows
	// in each bucket: the stream with the bucket's selection as its
	// filter (OpenBuckets). Index.Buckets are their indexes.
	Lanes []*Stream
	// Source is how the stream's store was reached (its settings and
	// credentials): a tokenizer.json in the stream's store is read so.
	Source store.Source
	// Tokenize is the stream's tokenization, when it has one: Open's
	// Spec.Tokenize, which the caller sets to the dataset's where the
	// stream has none (planspec.Resolved).
	Tokenize *datav1alpha1.Tokenize
}

// TokenizerFile returns where a tokenization's tokenizer.json is: a store
// of the stream's settings and credentials (the same scheme as the
// stream's, and in Azure the same account, as source.indexURI must be),
// or the directory its ConfigMap is mounted in, and the file's key in it.
func TokenizerFile(s datav1alpha1.Stream, src store.Source, tf datav1alpha1.TokenizerFile) (store.Source, string, error) {
	if ref := tf.ConfigMapRef; ref != nil {
		if src.ConfigMapsDir == "" {
			return store.Source{}, "", fmt.Errorf("tokenize.tokenizer.configMapRef %s/%s: no directory of ConfigMaps here: give --configmaps-dir DIR, with the file as DIR/%s/%s",
				ref.Name, ref.Key, ref.Name, ref.Key)
		}
		if strings.ContainsAny(ref.Name, `/\`) || strings.ContainsAny(ref.Key, `/\`) || strings.HasPrefix(ref.Name, ".") || strings.HasPrefix(ref.Key, "..") {
			return store.Source{}, "", fmt.Errorf("tokenize.tokenizer.configMapRef %q/%q is not a ConfigMap's name and key", ref.Name, ref.Key)
		}
		return store.Source{URI: "file://" + filepath.ToSlash(filepath.Join(src.ConfigMapsDir, ref.Name)) + "/"}, ref.Key, nil
	}
	uri := tf.URI
	cut := strings.LastIndex(uri, "/")
	if cut < 0 || cut == len(uri)-1 {
		return store.Source{}, "", fmt.Errorf("tokenize.tokenizer.uri %q names no file (…/tokenizer.json)", uri)
	}
	if err := CheckIndexURI(datav1alpha1.Source{URI: s.Source.URI, IndexURI: uri[:cut+1]}); err != nil {
		return store.Source{}, "", fmt.Errorf("tokenize.tokenizer.uri: %s", strings.Replace(err.Error(), "source.indexURI", "the tokenizer", 1))
	}
	src.URI = uri[:cut+1]
	return src, uri[cut+1:], nil
}

// Packs is a packed stream's packing and its counts, as shardfeed index
// --pack-length wrote them beside the stream's index.
type Packs struct {
	Packing planner.Packing
	Column  string
	// PadToken is the token id of a sequence's padding.
	PadToken int64
	Index    *sidefile.PacksIndex
}

// Filter is a filtered stream's selection, as shardfeed index --filter
// wrote it beside the stream's index.
type Filter struct {
	Index *sidefile.FilterIndex
	// RunsKey is the key of the selection's runs in the store StoreName
	// names: the stream's own, or its index's (IndexStoreName).
	RunsKey   string
	StoreName string
}

// IndexStoreName names a stream's index store among a pod's stores, where
// source.indexURI puts its index apart from the data. A stream's name
// never starts with "_", so it names no stream.
func IndexStoreName(stream string) string { return "_index-" + stream }

// IndexSource returns where a stream's index and its filters' selections
// are: source.indexURI with src's endpoint and credentials, else src. An
// index URI of another store is refused: the stream's credentials are
// sent there.
func IndexSource(s datav1alpha1.Stream, src store.Source) (store.Source, error) {
	if s.Source.IndexURI == "" {
		return src, nil
	}
	if err := CheckIndexURI(s.Source); err != nil {
		return store.Source{}, err
	}
	src.URI = s.Source.IndexURI
	return src, nil
}

// CheckIndexURI refuses a source.indexURI of another store than
// source.uri: another scheme, or another Azure storage account (whose key
// the Secret holds).
func CheckIndexURI(s datav1alpha1.Source) error {
	if s.IndexURI == "" {
		return nil
	}
	same, err := stores.SameStore(s.URI, s.IndexURI)
	if err != nil {
		return fmt.Errorf("source.indexURI: %w", err)
	}
	if !same {
		return fmt.Errorf("source.indexURI %s is in another store than source.uri %s (the stream's endpoint and credentials read both): put the index in the same store, in a prefix or bucket the team may write", s.IndexURI, s.URI)
	}
	return nil
}

// Source returns the store source of a spec stream; the caller adds the
// credentials and the retry policy.
func Source(s datav1alpha1.Stream) store.Source {
	return store.Source{URI: s.Source.URI, Endpoint: s.Source.Endpoint, Region: s.Source.Region, Insecure: s.Source.Insecure}
}

// SharedCredentials returns the source of a spec stream for a command given
// one credentials directory for the whole manifest (the CLI's and serve's
// --credentials-dir): the stream's Secret's sub-directory dir/<name>, as
// the sidecar mounts it, when there is one; else dir itself, whose keys a
// store takes if they are there.
func SharedCredentials(s datav1alpha1.Stream, dir string) store.Source {
	src := Source(s)
	if dir == "" {
		return src
	}
	if ref := s.Source.CredentialsSecretRef; ref != nil {
		sub := filepath.Join(dir, ref.Name)
		if fi, err := os.Stat(sub); err == nil && fi.IsDir() {
			src.CredentialsDir = sub
			return src
		}
	}
	src.CredentialsDir, src.CredentialsOptional = dir, true
	return src
}

// Open opens the store of src and reads the stream's index from it, at
// most maxIndexBytes of it (0: indexfile.DefaultMaxBytes). An index whose
// format differs from the one the spec names is refused. With packing
// (the dataset's spec.packing), the packs counted beside the index are
// the stream's samples.
func Open(ctx context.Context, i int, s datav1alpha1.Stream, packing *datav1alpha1.Packing, src store.Source, maxIndexBytes int64) (*Stream, error) {
	return open(ctx, i, s, packing, src, maxIndexBytes, index.ReadStoreIndexOf)
}

// OpenLean is Open for a sidecar that serves a few of the shards: a
// compact index of a stream with no filter or packing is read in parts
// (index.ReadStoreLeanOf): its header and counts now, each shard's entry
// when the sidecar resolves it (its Layout's File.Lean). Other indexes are
// read as Open reads them. A bucketed dataset's streams are read whole
// (Open): their buckets' selections are checked against every shard.
func OpenLean(ctx context.Context, i int, s datav1alpha1.Stream, packing *datav1alpha1.Packing, src store.Source, maxIndexBytes int64) (*Stream, error) {
	read := index.ReadStoreIndexOf
	if s.Filter == "" && packing == nil {
		read = index.ReadStoreLeanOf
	}
	return open(ctx, i, s, packing, src, maxIndexBytes, read)
}

// OpenSummary is Open for a reader that plans and serves nothing (the
// operator): a compact index of a stream with no filter or packing is
// read by its header alone, at most maxIndexBytes of it, and the stream's
// Index is its summary (planner.StreamIndex.Summary), its Layout's File
// without shards. Other indexes are read as Open reads them.
func OpenSummary(ctx context.Context, i int, s datav1alpha1.Stream, packing *datav1alpha1.Packing, src store.Source, maxIndexBytes int64) (*Stream, error) {
	read := index.ReadStoreIndexOf
	if s.Filter == "" && packing == nil {
		read = index.ReadStoreSummaryOf
	}
	return open(ctx, i, s, packing, src, maxIndexBytes, read)
}

// indexReader reads a stream's index from its store (index.ReadStoreIndexOf
// and its lean and summary forms).
type indexReader func(ctx context.Context, st store.Store, maxBytes int64, kind datav1alpha1.ShardFormat) (*index.Layout, planner.StreamIndex, error)

func open(ctx context.Context, i int, s datav1alpha1.Stream, packing *datav1alpha1.Packing, src store.Source, maxIndexBytes int64, read indexReader) (*Stream, error) {
	st, err := stores.Open(ctx, src)
	if err != nil {
		return nil, fmt.Errorf("stream %q: %w", s.Name, err)
	}
	out := &Stream{Spec: s, Store: st, IndexStore: st, Source: src, Tokenize: s.Tokenize}
	if s.Source.IndexURI != "" {
		isrc, err := IndexSource(s, src)
		if err != nil {
			return nil, fmt.Errorf("stream %q: spec.streams[%d].%w", s.Name, i, err)
		}
		if out.IndexStore, err = stores.Open(ctx, isrc); err != nil {
			return nil, fmt.Errorf("stream %q: source.indexURI: %w", s.Name, err)
		}
	}
	own := out.IndexStore // where an index of shardfeed's is; MDS's is in the data
	if s.Format == datav1alpha1.FormatMDS || s.Format == "" {
		own = st
	}
	if out.Layout, out.Index, err = read(ctx, own, maxIndexBytes, s.Format); err != nil {
		if missing := (*index.MissingError)(nil); errors.As(err, &missing) {
			missing.Command = IndexCommand(s)
			if s.Format == datav1alpha1.FormatMDS || s.Format == "" { // MDS writes its own
				missing.Command = "mosaicml-streaming's MDSWriter or shardfeed convert, with the shards (or fix source.uri, or the format)"
			}
		}
		if s.Iceberg != nil && errors.Is(err, store.ErrNotFound) {
			// A table's index names its catalog and table: say them all.
			return nil, fmt.Errorf("stream %q: the Iceberg table %s has no index at %s%s: write it with: %s", s.Name, s.Iceberg.Table, st.URI(), indexfile.Key, IndexCommand(s))
		}
		return nil, fmt.Errorf("stream %q: %w", s.Name, err)
	}
	if out.Layout == nil {
		if packing != nil {
			return nil, fmt.Errorf("stream %q: spec.packing packs the documents of the shards, and its index is a plain list of shards: index the stream (%s)", s.Name, PacksCommand(s, packing))
		}
		if s.Filter != "" {
			return nil, fmt.Errorf("stream %q: spec.streams[%d].filter needs the rows of the shards, and its index is a plain list of shards: index the stream (%s)", s.Name, i, IndexCommand(s))
		}
		return out, nil // a plain list of shards: it plans
	}
	if want := s.Format; want != "" && want != out.Layout.Format {
		return nil, fmt.Errorf("stream %q: spec.streams[%d].format is %s, its index is %s: fix the format or the source", s.Name, i, want, out.Layout.Format)
	}
	if f := out.Layout.File; f != nil {
		if err := checkPartitions(i, s, f.Partitions); err != nil {
			return nil, fmt.Errorf("stream %q: %w", s.Name, err)
		}
	} else if s.Partitions != nil {
		return nil, fmt.Errorf("stream %q: spec.streams[%d].partitions needs a shardfeed index, and its index is %s's own: drop partitions or fix the format", s.Name, i, out.Layout.Format)
	}
	if s.Filter != "" {
		if out.Filter, err = openFilter(ctx, out.IndexStore, i, s, out.Index, maxIndexBytes); err != nil {
			return nil, fmt.Errorf("stream %q: %w", s.Name, err)
		}
		out.Index = filtered(out.Index, out.Filter.Index)
	}
	if packing != nil {
		// The packs are of the documents (the index's samples, or their
		// matching rows), counted over the stream's own index.
		if out.Packs, err = openPacks(ctx, out.IndexStore, s, packing, out.Layout.Index.ContentHash(), out.Index, maxIndexBytes); err != nil {
			return nil, fmt.Errorf("stream %q: %w", s.Name, err)
		}
		out.Index = packed(out.Index, out.Packs)
	}
	if f := out.Layout.File; f != nil && s.HuggingFace != nil && s.HuggingFace.Split != "" {
		if err := checkSplit(i, s, f.HuggingFace); err != nil {
			return nil, fmt.Errorf("stream %q: %w", s.Name, err)
		}
	}
	if f := out.Layout.File; f != nil && f.Lance != nil {
		if err := checkLance(i, s, f.Lance); err != nil {
			return nil, fmt.Errorf("stream %q: %w", s.Name, err)
		}
	}
	if f := out.Layout.File; f != nil && f.Table != nil {
		if err := checkTable(i, s, f.Table); err != nil {
			return nil, fmt.Errorf("stream %q: %w", s.Name, err)
		}
		// A table's files are keys of its bucket, where source.uri holds
		// only the index.
		root := src
		root.URI = f.Table.Root
		if out.Store, err = stores.Open(ctx, root); err != nil {
			return nil, fmt.Errorf("stream %q: %w", s.Name, err)
		}
		if out.Filter != nil { // beside the index, under the table's bucket
			out.Filter.RunsKey = out.tableKey(out.Filter.RunsKey)
		}
	}
	return out, nil
}

// tableKey is the key, in a table's bucket, of an object beside its index.
func (st *Stream) tableKey(key string) string {
	f := st.Layout.File
	if f == nil || f.Table == nil {
		return key
	}
	return strings.TrimPrefix(strings.TrimSuffix(st.Spec.Source.URI, "/")+"/"+key, f.Table.Root)
}

// Buckets returns spec.bucketing as shardfeed index cuts the samples (its
// measure left to the lengths).
func Buckets(b *datav1alpha1.Bucketing) (sidefile.Buckets, error) {
	ratios, err := sidefile.ParseRatios(b.AspectRatios)
	if err != nil {
		return sidefile.Buckets{}, fmt.Errorf("spec.bucketing.aspectRatios: %w", err)
	}
	return sidefile.Buckets{Column: b.Column, Bounds: b.Boundaries, Ratios: ratios}, nil
}

// BucketsCommand is the shardfeed index command that writes a stream's
// buckets' selections over the index already there.
func BucketsCommand(s datav1alpha1.Stream, b *datav1alpha1.Bucketing) string {
	cmd := IndexCommand(s) + " --selection-only --lengths " + shellQuote(b.Column)
	if len(b.AspectRatios) > 0 {
		return cmd + " --aspect-ratios " + strings.Join(b.AspectRatios, ",")
	}
	var bounds []string
	for _, v := range b.Boundaries {
		bounds = append(bounds, fmt.Sprint(v))
	}
	return cmd + " --buckets " + strings.Join(bounds, ",")
}

// OpenBuckets reads the selections of spec.bucketing's buckets beside the
// stream's index (of its matching rows, filtered) and makes each a lane:
// the stream with the bucket's selection as its filter, which the sidecar
// serves as any filtered stream, its shards' bytes under the stream's own
// name (fetched and cached once for all its buckets).
func (st *Stream) OpenBuckets(ctx context.Context, b *datav1alpha1.Bucketing, maxIndexBytes int64) error {
	if st.Layout == nil {
		return fmt.Errorf("stream %q: spec.bucketing needs the rows of the shards, and its index is a plain list of shards: index the stream (%s)", st.Spec.Name, BucketsCommand(st.Spec, b))
	}
	if st.Packs != nil {
		return fmt.Errorf("stream %q: spec.bucketing and spec.packing together: pack or bucket, not both", st.Spec.Name)
	}
	cut, err := Buckets(b)
	if err != nil {
		return err
	}
	st.Lanes, st.Index.Buckets = nil, nil
	for k := range cut.Count() {
		lane := *st
		lane.Spec.Filter = cut.Filter(k, st.Spec.Filter)
		f, err := readFilter(ctx, st.IndexStore, lane.Spec, st.Layout.Index, maxIndexBytes)
		if errors.Is(err, sidefile.ErrNoSelection) {
			return fmt.Errorf("stream %q: spec.bucketing: %w: write the buckets' selections with: %s", st.Spec.Name, err, BucketsCommand(st.Spec, b))
		}
		if err != nil {
			return fmt.Errorf("stream %q: spec.bucketing: bucket %d: %w (%s)", st.Spec.Name, k, err, BucketsCommand(st.Spec, b))
		}
		f.RunsKey = lane.tableKey(f.RunsKey)
		lane.Filter, lane.Index, lane.Lanes = f, filtered(st.Layout.Index, f.Index), nil
		st.Lanes, st.Index.Buckets = append(st.Lanes, &lane), append(st.Index.Buckets, lane.Index)
	}
	return nil
}

// PlanStreams are the streams in the order of the plan's: each stream's
// lanes in a bucketed dataset, else the streams.
func PlanStreams(ss []*Stream) []*Stream {
	var out []*Stream
	for _, s := range ss {
		if s.Lanes != nil {
			out = append(out, s.Lanes...)
		} else {
			out = append(out, s)
		}
	}
	return out
}

// openFilter reads the selection of the stream's filter beside its index,
// checked against the index.
func openFilter(ctx context.Context, st store.Store, i int, s datav1alpha1.Stream, x planner.StreamIndex, maxIndexBytes int64) (*Filter, error) {
	f, err := readFilter(ctx, st, s, x, maxIndexBytes)
	if errors.Is(err, sidefile.ErrNoSelection) {
		return nil, fmt.Errorf("spec.streams[%d].filter: %w: write it with: %s", i, err, SelectionCommand(s))
	}
	if err != nil {
		return nil, fmt.Errorf("spec.streams[%d].filter: %w (%s)", i, err, SelectionCommand(s))
	}
	return f, nil
}

// readFilter reads the selection of s.Filter beside the index x.
func readFilter(ctx context.Context, st store.Store, s datav1alpha1.Stream, x planner.StreamIndex, maxIndexBytes int64) (*Filter, error) {
	rows := make([]int64, len(x.Shards))
	for h, sh := range x.Shards {
		rows[h] = sh.Samples
	}
	fi, err := sidefile.ReadFilter(ctx, st, s.Filter, x.ContentHash(), rows, maxIndexBytes)
	if err != nil {
		return nil, err
	}
	name := s.Name
	if s.Source.IndexURI != "" {
		name = IndexStoreName(s.Name)
	}
	return &Filter{Index: fi, RunsKey: fi.RunsKey, StoreName: name}, nil
}

// filtered is the planner's view of a filtered stream: each shard's
// matching rows, its bytes with its runs' (a pod fetches both), and the
// filter a plan input.
func filtered(x planner.StreamIndex, f *sidefile.FilterIndex) planner.StreamIndex {
	x.Shards = slices.Clone(x.Shards)
	for h := range x.Shards {
		x.Shards[h].Samples = f.Shards[h].Matching
		x.Shards[h].Bytes += f.Shards[h].Length
		x.Shards[h].RunsBytes = f.Shards[h].Length
	}
	x.Filter = sidefile.FilterHash(f.Filter)
	return x
}

// openPacks reads the counts of the dataset's packing beside the stream's
// index, checked against the index (its matching rows, filtered).
func openPacks(ctx context.Context, st store.Store, s datav1alpha1.Stream, spec *datav1alpha1.Packing, contentHash string, x planner.StreamIndex, maxIndexBytes int64) (*Packs, error) {
	p := planspec.Packing(spec)
	docs := make([]int64, len(x.Shards))
	for h, sh := range x.Shards {
		docs[h] = sh.Samples
	}
	px, err := sidefile.ReadPacks(ctx, st, spec.Column, s.Filter, planspec.TokenizeKey(s.Tokenize), p, contentHash, docs, maxIndexBytes)
	if errors.Is(err, sidefile.ErrNoPacks) {
		return nil, fmt.Errorf("spec.packing: %w: count them with: %s", err, PacksCommand(s, spec))
	}
	if err != nil {
		return nil, fmt.Errorf("spec.packing: %w (%s)", err, PacksCommand(s, spec))
	}
	return &Packs{Packing: p, Column: spec.Column, PadToken: ptr.Deref(spec.PadToken, 0), Index: px}, nil
}

// packed is the planner's view of a packed stream: each shard's packs its
// samples, and the packing a plan input.
func packed(x planner.StreamIndex, p *Packs) planner.StreamIndex {
	x.Shards = slices.Clone(x.Shards)
	x.Tokens = 0
	units := p.Index.Units()
	for h := range x.Shards {
		x.Shards[h].Samples = p.Index.Shards[h].Packs
		x.Tokens += p.Index.Shards[h].Tokens
	}
	// A unit's packs are its first shard's samples, and the bytes a pod
	// fetches for them its shards' with a document (packs spanning
	// shards), with the shared parts (footers) of the objects past the
	// first's.
	for h, k := range units {
		shared := []string{x.Shards[h].Shared}
		for j := h + 1; j < h+k; j++ {
			bytes := x.Shards[j].Bytes
			x.Shards[j].Bytes = 0
			if p.Index.Shards[j].Docs == 0 {
				continue // a shard of no document is not fetched (source.Stream.unit)
			}
			x.Shards[h].Bytes += bytes
			if o := x.Shards[j].Shared; o != "" && !slices.Contains(shared, o) {
				shared = append(shared, o)
				x.Shards[h].Bytes += x.Shards[j].SharedBytes
			}
		}
	}
	x.Packing = p.Column + ": " + p.Packing.String()
	return x
}

// PacksCommand is the shardfeed index command that counts a stream's packs
// over the index already there (measuring its documents' lengths).
func PacksCommand(s datav1alpha1.Stream, p *datav1alpha1.Packing) string {
	if s.Tokenize != nil {
		// The packed column is made by the tokenizer the manifest names
		// (and checks by its sha256): only index -f knows it. A command of
		// flags alone read the source's column of that name, which it has
		// not ("no column input_ids").
		return fmt.Sprintf("shardfeed index -f <the TrainingDataset's manifest> --stream %s --selection-only", s.Name)
	}
	pk := planspec.Packing(p)
	cmd := IndexCommand(s) + " --selection-only --lengths " + shellQuote(p.Column) + fmt.Sprintf(" --pack-length %d", pk.SeqLength)
	if pk.Method != planner.BestFit {
		cmd += " --pack-method " + string(pk.Method)
	}
	if pk.Method != planner.Concatenate && pk.Window != int(datav1alpha1.DefaultPackingWindow) {
		cmd += fmt.Sprintf(" --pack-window %d", pk.Window)
	}
	if pk.Overlong == planner.DropOverlong {
		cmd += " --pack-overlong drop"
	}
	if pk.AcrossShards {
		cmd += " --pack-across-shards"
	}
	return cmd
}

// checkTable refuses the index of a table other than the one the spec
// names, at another snapshot than it pins, or in another bucket.
func checkTable(i int, s datav1alpha1.Stream, t *indexfile.Table) error {
	field := fmt.Sprintf("spec.streams[%d].iceberg", i)
	rerun := "re-run shardfeed index (" + IndexCommand(s) + ")"
	switch want := s.Iceberg; {
	case want == nil:
		return fmt.Errorf("its index is of the Iceberg table %s, and the spec names no table: give the stream format: iceberg and an iceberg section", t.Name)
	case want.Table != t.Name:
		return fmt.Errorf("%s.table is %s, its index is of %s: %s", field, want.Table, t.Name, rerun)
	case want.SnapshotID != nil && *want.SnapshotID != t.Snapshot:
		return fmt.Errorf("%s.snapshotID pins snapshot %d, its index is at snapshot %d: %s", field, *want.SnapshotID, t.Snapshot, rerun)
	case want.Ref != t.Ref:
		return fmt.Errorf("%s.ref is %q, its index was resolved from %q: %s", field, want.Ref, t.Ref, rerun)
	}
	root, err := stores.Root(s.Source.URI)
	if err != nil {
		return err
	}
	if root != t.Root {
		return fmt.Errorf("its index lists the files of %s, and source.uri is in %s: %s", t.Root, root, rerun)
	}
	return nil
}

// checkLance refuses the index of another dataset than source.uri, or at
// another version or tag than the spec pins.
func checkLance(i int, s datav1alpha1.Stream, l *indexfile.Lance) error {
	field := fmt.Sprintf("spec.streams[%d].lance", i)
	rerun := "re-run shardfeed index (" + IndexCommand(s) + ")"
	if strings.TrimSuffix(s.Source.URI, "/")+"/" != l.Root {
		return fmt.Errorf("its index is of the Lance dataset %s, not source.uri %s: %s", l.Root, s.Source.URI, rerun)
	}
	want := s.Lance
	if want == nil {
		want = &datav1alpha1.LanceTable{}
	}
	switch {
	case want.Version != nil && uint64(*want.Version) != l.Version: //nolint:gosec // a CEL minimum of 1
		return fmt.Errorf("%s.version pins version %d, its index is at version %d: %s", field, *want.Version, l.Version, rerun)
	case want.Tag != l.Tag:
		return fmt.Errorf("%s.tag is %q, its index was resolved from %q (version %d): %s", field, want.Tag, l.Tag, l.Version, rerun)
	case len(l.Columns) > 0 && len(s.Columns) == 0:
		return fmt.Errorf("its index keeps the columns %s alone, and spec.streams[%d].columns asks for every column: %s", strings.Join(l.Columns, ", "), i, rerun)
	}
	if len(l.Columns) > 0 {
		for _, c := range s.Columns {
			if !slices.Contains(l.Columns, c) {
				return fmt.Errorf("spec.streams[%d].columns asks for %q, which its index did not keep (it keeps %s): %s", i, c, strings.Join(l.Columns, ", "), rerun)
			}
		}
	}
	return nil
}

// checkSplit refuses the index of another split of a Hugging Face dataset
// than the spec chooses, or of files of no split chosen.
func checkSplit(i int, s datav1alpha1.Stream, got *indexfile.HuggingFace) error {
	want := s.HuggingFace.Split
	rerun := "re-run shardfeed index (" + IndexCommand(s) + ")"
	if got == nil {
		return fmt.Errorf("spec.streams[%d].huggingface.split is %s, and its index was written with no split chosen: %s", i, want, rerun)
	}
	if got.Split != want {
		return fmt.Errorf("spec.streams[%d].huggingface.split is %s, its index is of split %s: %s", i, want, got.Split, rerun)
	}
	return nil
}

// checkPartitions refuses an index of a partitioned tree the spec does not
// partition so, or of another selection or other columns.
func checkPartitions(i int, s datav1alpha1.Stream, got *indexfile.Partitions) error {
	field := fmt.Sprintf("spec.streams[%d].partitions", i)
	rerun := "re-run shardfeed index (" + IndexCommand(s) + ")"
	want := s.Partitions
	switch {
	case want == nil && got == nil:
		return nil
	case want == nil:
		return fmt.Errorf("its index is of a hive-partitioned tree (columns %s) and the spec has no partitions: give them, or %s", fieldNames(got.Columns), rerun)
	case got == nil:
		return fmt.Errorf("%s is set, and its index is not of a partitioned tree: %s", field, rerun)
	case want.Select != got.Select:
		return fmt.Errorf("%s.select is %q, its index selected %q: %s", field, want.Select, got.Select, rerun)
	case len(want.Columns) > 0 != got.Given:
		return fmt.Errorf("%s.columns %s, and its index's types were %s: %s", field, map[bool]string{true: "are given", false: "are not given"}[len(want.Columns) > 0],
			map[bool]string{true: "given", false: "inferred"}[got.Given], rerun)
	}
	same := func(c datav1alpha1.PartitionColumn, f indexfile.Field) bool {
		return c.Name == f.Name && c.Type == f.Type
	}
	if len(want.Columns) > 0 && !slices.EqualFunc(want.Columns, got.Columns, same) {
		return fmt.Errorf("%s.columns differ from its index's (%s): %s", field, fieldNames(got.Columns), rerun)
	}
	return nil
}

func fieldNames(fs []indexfile.Field) string {
	var b strings.Builder
	for j, f := range fs {
		if j > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f.Name + " " + f.Type)
	}
	return b.String()
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// IndexCommand is the shardfeed index command that writes the index of a
// stream, for the messages that ask for one.
func IndexCommand(s datav1alpha1.Stream) string {
	cmd := "shardfeed index " + s.Source.URI
	if s.Format != "" && s.Format != datav1alpha1.FormatMDS || s.Filter != "" {
		cmd += " --format " + string(cmp.Or(s.Format, datav1alpha1.FormatMDS))
	}
	if t := s.Iceberg; t != nil {
		cmd += " --catalog-type " + string(t.Catalog.Type)
		for _, f := range [][2]string{{"--catalog-uri", t.Catalog.URI}, {"--catalog-name", t.Catalog.Name}, {"--warehouse", t.Catalog.Warehouse},
			{"--catalog-region", t.Catalog.Region}, {"--catalog-id", t.Catalog.CatalogID}, {"--table", t.Table}, {"--ref", t.Ref}} {
			if f[1] != "" {
				cmd += " " + f[0] + " " + f[1]
			}
		}
		if t.SnapshotID != nil {
			cmd += fmt.Sprintf(" --snapshot-id %d", *t.SnapshotID)
		}
	}
	if l := s.Lance; l != nil {
		if l.Version != nil {
			cmd += fmt.Sprintf(" --version %d", *l.Version)
		}
		if l.Tag != "" {
			cmd += " --tag " + l.Tag
		}
	}
	if m := s.Megatron; m != nil && m.Unit != "" {
		cmd += " --unit " + m.Unit
	}
	if l := s.LitData; l != nil && l.BlockSize > 0 {
		cmd += fmt.Sprintf(" --block-size %d", l.BlockSize)
	}
	if h := s.HuggingFace; h != nil && h.Split != "" {
		cmd += " --split " + h.Split
	}
	if s.Format == datav1alpha1.FormatLance && len(s.Columns) > 0 {
		cmd += " --columns " + shellQuote(strings.Join(s.Columns, ","))
	}
	if p := s.Partitions; p != nil {
		cmd += " --hive"
		if len(p.Columns) > 0 {
			var cols []string
			for _, c := range p.Columns {
				cols = append(cols, c.Name+":"+c.Type)
			}
			cmd += " --partition-columns " + shellQuote(strings.Join(cols, ","))
		}
		if p.Select != "" {
			cmd += " --select " + shellQuote(p.Select)
		}
	}
	if s.Filter != "" {
		cmd += " --filter " + shellQuote(s.Filter)
	}
	if s.Source.IndexURI != "" {
		cmd += " --index-uri " + s.Source.IndexURI
	}
	if s.Source.Endpoint != "" {
		cmd += " --endpoint " + s.Source.Endpoint
	}
	if s.Source.Region != "" {
		cmd += " --region " + s.Source.Region
	}
	if s.Source.Insecure {
		cmd += " --insecure"
	}
	return cmd
}

// SelectionCommand is the shardfeed index command that writes a filtered
// stream's selection over the index already there, leaving it as it is:
// re-indexing with other options than the index was written with (a JSON
// Lines stream's --shard-size) would change every plan's fingerprint over
// the stream, and running jobs would refuse to resume.
func SelectionCommand(s datav1alpha1.Stream) string {
	return IndexCommand(s) + " --selection-only"
}

// Served returns the layout of a stream that is to be served: an error for
// a plain list of shards.
func (s *Stream) Served() (*index.Layout, error) {
	if s.Layout == nil {
		return nil, fmt.Errorf("stream %q: %w", s.Spec.Name, index.NoLayout(s.Store))
	}
	return s.Layout, nil
}

// Indexes returns the planner's view of every stream.
func Indexes(ss []*Stream) []planner.StreamIndex {
	out := make([]planner.StreamIndex, len(ss))
	for i, s := range ss {
		out[i] = s.Index
	}
	return out
}

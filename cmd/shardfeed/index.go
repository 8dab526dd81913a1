package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/bytesize"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/compact"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/index/sidefile"
	"github.com/shardfeed/shardfeed/internal/planspec"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/streams"
	"github.com/shardfeed/shardfeed/internal/workloadidentity"
	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
	"github.com/shardfeed/shardfeed/sidecar/format/iceberg/icebergindex"
	"github.com/shardfeed/shardfeed/sidecar/format/text"
	"github.com/shardfeed/shardfeed/sidecar/objectlist"
	streamsource "github.com/shardfeed/shardfeed/sidecar/source"
)

// sourceFlags are how the CLI reaches a stream outside a manifest.
type sourceFlags struct {
	endpoint, region, credentialsDir string
	// writeCredentialsDir, if set, holds the credentials the index is
	// written with (the data is read with credentialsDir's).
	writeCredentialsDir string
	// configMapsDir: where a manifest's ConfigMaps are (a tokenizer's).
	configMapsDir string
	insecure      bool
	// identityDir, with -f, holds the projected workload identity tokens
	// of the streams that name one, a file each named after the stream
	// (an indexing Job's pods).
	identityDir string
	// allowedEndpoints and allowCloudEndpoints are the platform's endpoint
	// policy: every request and address is checked against it (neither:
	// none checked, a laptop's default).
	allowedEndpoints    []string
	allowCloudEndpoints bool
}

// addPodFlags adds the flags an indexing Job's pods are given: where the
// workload identity tokens are, and the platform's endpoint policy (read
// from the environment the operator sets, as a sidecar's).
func (s *sourceFlags) addPodFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&s.identityDir, "identity-dir", "", "with -f: a folder of projected workload identity tokens, one per stream named after it: a stream with source.workloadIdentity reads (and writes its index) with its token, as a sidecar does")
	f.StringSliceVar(&s.allowedEndpoints, "allowed-endpoints", splitList(os.Getenv(sidecarconfig.EnvAllowedEndpoints)),
		"store endpoints the command may reach beside the clouds' own (the manager's --allowed-endpoints; an indexing Job's pods get it from "+sidecarconfig.EnvAllowedEndpoints+"): every request and address is checked")
	f.BoolVar(&s.allowCloudEndpoints, "allow-cloud-endpoints", os.Getenv(sidecarconfig.EnvAllowCloudEndpoints) == "true",
		"with --allowed-endpoints: allow the clouds' own storage and token hosts too (the manager's --allow-cloud-endpoints)")
}

// policy applies the endpoint policy and, for stream s, its workload
// identity to source.
func (s *sourceFlags) policy(source *store.Source, stream *datav1alpha1.Stream) {
	if len(s.allowedEndpoints) > 0 || s.allowCloudEndpoints {
		source.Endpoints = stores.Policy(s.allowedEndpoints, s.allowCloudEndpoints)
	}
	if s.identityDir != "" && stream != nil && stream.Source.WorkloadIdentity != nil {
		source.Identity = workloadidentity.Identity(stream.Source, store.TokenFile(workloadidentity.TokenPath(s.identityDir, stream.Name)))
	}
}

func (s *sourceFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&s.endpoint, "endpoint", "", "S3-compatible endpoint (host:port or http(s)://host:port); empty: AWS S3")
	f.StringVar(&s.region, "region", "", "bucket region")
	f.BoolVar(&s.insecure, "insecure", false, "allow plain HTTP to the endpoint")
	f.StringVar(&s.credentialsDir, "credentials-dir", "", "directory with the files AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (a mounted Secret); empty: the default chain (env, ~/.aws, IRSA, instance metadata)")
}

// indexOptions are the flags of shardfeed index.
type indexOptions struct {
	src           sourceFlags
	kind          datav1alpha1.ShardFormat
	algo          string
	shardSize     string
	schema        string
	dryRun        bool
	selectionOnly bool
	// indexOnly writes the index and nothing beside it.
	indexOnly    bool
	table        icebergFlags
	lance        lanceFlags
	parts        partitionFlags
	inParts      partsFlags
	manifest     string
	stream       string
	filter       string
	lengths      string
	buckets      []int64
	aspectRatios []string
	pack         packFlags
	indexURI     string
	// own are the options a format alone takes (--unit, --block-size,
	// --split), from the registry.
	own         ownFlags
	shards      string
	concurrency int
	// listParallel bounds the directories listed at once.
	listParallel int
	// objectList and objectListForm: the stream's objects from a file
	// instead of a listing; objects, the file's.
	objectList, objectListForm string
	// indexForm is the form of the index written (index.Form).
	indexForm string
	// appendTo indexes only the objects the index there does not list.
	appendTo bool
	objects  []store.Object
	out      io.Writer
	// specSchema is a manifest stream's column types (webdataset).
	specSchema []indexfile.Field
	// tokenize is a manifest stream's tokenization (its own or the
	// dataset's): lengths of its output column are its text's tokens.
	tokenize *datav1alpha1.Tokenize
	// spec is the manifest's stream, whose store and credentials reach
	// its tokenizer.
	spec datav1alpha1.Stream
}

// packFlags are a packing's flags (spec.packing): with --lengths, index
// counts each shard's packs.
type packFlags struct {
	length   int64
	method   string
	window   int64
	overlong string
	across   bool
}

func (f *packFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.Int64Var(&f.length, "pack-length", 0, "with --lengths: count each shard's packs of the documents into sequences of this many tokens (spec.packing.sequenceLength)")
	fl.StringVar(&f.method, "pack-method", string(datav1alpha1.DefaultPackingMethod), "with --pack-length: bestFit, firstFit or concatenate (spec.packing.method)")
	fl.Int64Var(&f.window, "pack-window", datav1alpha1.DefaultPackingWindow, "with --pack-length: documents of a shard packed together (spec.packing.window)")
	fl.StringVar(&f.overlong, "pack-overlong", string(datav1alpha1.DefaultOverlong), "with --pack-length: cut or drop a document longer than a sequence (spec.packing.overlong)")
	fl.BoolVar(&f.across, "pack-across-shards", false, "with --pack-length: pack consecutive shards together, in units of two windows of documents (spec.packing.acrossShards)")
}

// fromSpec takes a manifest's packing.
func (f *packFlags) fromSpec(p *datav1alpha1.Packing) {
	if p == nil {
		return
	}
	f.length = p.SequenceLength
	f.method = string(cmp.Or(p.Method, datav1alpha1.DefaultPackingMethod))
	f.overlong = string(cmp.Or(p.Overlong, datav1alpha1.DefaultOverlong))
	f.across = p.AcrossShards
	if p.Window != nil {
		f.window = *p.Window
	}
}

// spec is the packing the flags give, checked as the CRD checks it; nil
// without --pack-length.
func (f *packFlags) spec(column string) (*datav1alpha1.Packing, error) {
	if f.length == 0 {
		return nil, nil
	}
	p := &datav1alpha1.Packing{Column: column, SequenceLength: f.length, Method: datav1alpha1.PackingMethod(f.method), Window: &f.window,
		Overlong: datav1alpha1.OverlongPolicy(f.overlong), AcrossShards: f.across}
	switch {
	case column == "":
		return nil, errors.New("--pack-length packs the documents of a column: give --lengths COLUMN")
	case f.length < 1 || f.length > 1<<20:
		return nil, fmt.Errorf("--pack-length must be 1 to %d tokens, got %d", 1<<20, f.length)
	case !slices.Contains([]datav1alpha1.PackingMethod{datav1alpha1.PackingBestFit, datav1alpha1.PackingFirstFit, datav1alpha1.PackingConcatenate}, p.Method):
		return nil, fmt.Errorf("--pack-method is bestFit, firstFit or concatenate, got %q", f.method)
	case f.window < 1 || f.window > planner.MaxPackWindow:
		return nil, fmt.Errorf("--pack-window must be 1 to %d documents, got %d", planner.MaxPackWindow, f.window)
	case p.Overlong != datav1alpha1.OverlongCut && p.Overlong != datav1alpha1.OverlongDrop:
		return nil, fmt.Errorf("--pack-overlong is cut or drop, got %q", f.overlong)
	}
	return p, nil
}

// indexLong is index's help, the paragraphs of the formats' own
// (formatsHelp) between its head and its tail.
const indexLong = `index reads a stream's objects under URI (s3://bucket/prefix/ or file:///path/)
and writes _shardfeed/index.json under URI (a folder pyarrow, pandas, Spark
and Trino skip), or under --index-uri where the data's bucket is not yours
to write: one shard per Parquet row group (from the
file footers), per Arrow IPC record batch, or per run of whole JSON Lines /
CSV / TSV records of about
--shard-size, with the schema inferred from every record; each shard
with its byte range and a content hash. The sidecar and shardfeed plan read
it. MDS streams need no index of ours: MDS has its own.`

// indexLongTail is index's help after the formats' paragraphs.
const indexLongTail = `With --filter EXPR, index also finds the rows of each shard that the CEL
expression matches (spec.streams[].filter; an unknown column is refused,
naming the stream's columns) and writes them beside the index:
filter-<sha256 of EXPR>.json, the matching rows per shard, which the
planner reads, and filter-<sha256 of EXPR>.runs, the runs of matching rows,
which a pod fetches with each shard. Parquet row groups whose statistics
rule the filter out are not read. An MDS stream keeps its own index: give
--format mds --filter EXPR to write the selection only.

With --lengths COLUMN, index also measures each sample's length in COLUMN
(what packing and bucketing plan with): a list column's elements (token
ids), or the height and width in a binary column's JPEG or PNG headers
(no pixel decoded). Lengths are of the filter's matching rows where the
stream has a filter. They go beside the index as
lengths-<sha256>.json, per shard the samples, the sum and the largest,
which the planner reads, and lengths-<sha256>.lengths, each sample's
length as varints, which a pod fetches for its own splits' shards.
--selection-only with --lengths writes them over the index already there.

With --lengths COLUMN --buckets B1,B2,… (lengths: elements, or an
image's pixels) or --aspect-ratios R1,R2,… (an image's width over height,
e.g. 3/4,4/3), index also writes each bucket's rows as a selection beside
the index, as a filter's are written (of the filter's matching rows where
the stream has one), under the bucket's name
"shardfeed.bucket(COLUMN: … at …)[k]": what bucketing plans with.

With --lengths COLUMN --pack-length L (or -f of a manifest with
spec.packing), index also packs each shard's documents (COLUMN's token
lists) into sequences of L tokens as the sidecar will (--pack-method,
--pack-window, --pack-overlong) and writes beside the index
packs-<sha256>.json, per shard its documents, packs, tokens, padding and
what was cut, dropped or empty: the packs a packed plan counts as its
samples (docs/planner.md, packing). --pack-across-shards
(spec.packing.acrossShards) packs consecutive shards together, in units
of the fewest shards that hold two windows of documents.

Indexing in parts, on several machines at once (the pods of an Indexed
Job): --list-parts N lists the stream once and cuts its objects into N
parts under _shardfeed/parts/RUN/; --part K (each machine its own K)
indexes one part, skipped when done, resumed when interrupted, refused
naming an object changed since the listing; --merge-parts merges every
part into the index a single run writes, byte for byte, and removes the
run's files. Give each step the same URI (or -f and --stream) and options.

With -f MANIFEST, the stream (--stream NAME, or the manifest's only stream
that needs an index) gives the URI, the format, the endpoint and, for a
table, the catalog, table, snapshot and ref, the filter, and the options
of the format's own (each flag's help names the field); --credentials-dir is read as
plan reads it (a stream's Secret's keys in DIR/<secret name>/).`

func newIndexCommand() *cobra.Command {
	o := &indexOptions{}
	reg := formats.Default()
	cmd := &cobra.Command{
		Use:   "index (URI --format " + strings.Join(append(reg.Kinds(format.IndexesObjects), reg.Kinds(format.IsTable)...), "|") + " | -f MANIFEST [--stream NAME])",
		Short: "Write the shardfeed index of a stream (its shards, sample counts, byte ranges and hashes) as URI/_shardfeed/index.json",
		Long:  indexLong + "\n\n" + formatsHelp(reg, 72) + "\n\n" + indexLongTail,
		Example: `  shardfeed index s3://datasets/web/ --format parquet --endpoint http://minio:9000 --insecure
  shardfeed index file:///data/web/ --format parquet --hash sha256
  shardfeed index s3://lake/.shardfeed/events/ --format iceberg --catalog-type rest --catalog-uri http://iceberg-rest:8181 --table analytics.events --endpoint http://minio:9000 --insecure
  shardfeed index s3://lake/robots.lance/ --format lance --tag train-v3 --columns image,state,action
  shardfeed index -f dataset.yaml --stream events --credentials-dir ./secrets/
  shardfeed index s3://datasets/web/ --format parquet --list-parts 8   # then --part 0 … --part 7, then --merge-parts
  shardfeed index s3://datasets/web/ --format parquet --filter "lang == 'en' && score >= 0.5"
  shardfeed index s3://datasets/tokens/ --format mds --lengths tokens
  shardfeed index s3://datasets/docs/ --format parquet --selection-only --lengths tokens --pack-length 4096`,
		Args: cobra.MaximumNArgs(1),
		RunE: o.run,
	}
	o.src.add(cmd)
	o.src.addPodFlags(cmd)
	cmd.Flags().StringVar(&o.src.writeCredentialsDir, "write-credentials-dir", "", "a directory of credentials (as --credentials-dir's files) the index, its parts and its selections are written with, where the data's credentials may only read (spec.index.writeCredentialsSecretRef)")
	cmd.Flags().StringVar(&o.src.configMapsDir, "configmaps-dir", "", "with -f: directory of the ConfigMaps the dataset names, as DIR/<name>/<key> (a tokenizer's configMapRef)")
	o.table.add(cmd)
	o.lance.add(cmd)
	o.parts.add(cmd)
	o.inParts.add(cmd)
	o.addLengthFlags(cmd)
	cmd.Flags().StringVar((*string)(&o.kind), "format", "parquet", "format of the stream's objects: "+strings.Join(reg.Kinds(format.IndexesObjects), ", ")+
		"; or of a table: "+strings.Join(reg.Kinds(format.IsTable), ", ")+" (mds with --filter: MDS keeps its own index)")
	cmd.Flags().StringVar(&o.shardSize, "shard-size", "64MiB", "size of a jsonl, csv or tsv shard (a run of whole records); of a lerobot shard's decoded frames (a run of an episode's)")
	cmd.Flags().StringVar(&o.algo, "hash", "xxh64", "hash algorithm of the shards' content")
	o.own.add(cmd, reg)
	cmd.Flags().StringVar(&o.shards, "shards", "", `a brace pattern of the objects under URI to index, as WebDataset names shard sets ("shards-{000000..012345}.tar"); each must exist`)
	cmd.Flags().IntVar(&o.concurrency, "concurrency", 0, "how many objects to read at once (default 16; webdataset's tars through their headers)")
	cmd.Flags().IntVar(&o.listParallel, "list-parallel", 16, "directories of the stream's tree listed at once (each a request stream of its own)")
	cmd.Flags().StringVar(&o.objectList, "object-list", "", "a file of the stream's objects (keys and sizes) read instead of listing its prefix: an S3 Inventory report's CSV data file, or rows of key,size (keys as the bucket names them; others are skipped)")
	cmd.Flags().BoolVar(&o.appendTo, "append", false, "index only the objects the stream's index does not list yet, their shards after its own (which stay as they are); a new index, so a new plan fingerprint")
	cmd.Flags().StringVar(&o.indexForm, "index-form", string(index.FormAuto), fmt.Sprintf("the form of the index written: json (%s), compact (%s, read in parts), or auto: compact above %d shards", indexfile.Key, compact.Key, index.CompactAbove))
	cmd.Flags().StringVar(&o.objectListForm, "object-list-form", string(objectlist.CSV), "the object list's form: csv (rows of key,size), s3-inventory-csv (a report's CSV data file, .gz too), parquet (columns key and size, and bucket: a report's Parquet data file) or s3-inventory (a report's manifest.json, its data files beside it or in ../data/)")
	cmd.Flags().StringVar(&o.schema, "schema", "", `for jsonl, csv and tsv: a JSON file [{"name": "id", "type": "int64"}, ...] to use instead of the inferred schema`)
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "index, but do not write the index")
	cmd.Flags().BoolVar(&o.indexOnly, "index-only", false, "write the index alone, not the filter's selection nor the lengths, buckets and packs the flags or the manifest ask for (then --measure-parts, or --selection-only)")
	cmd.Flags().StringVarP(&o.manifest, "filename", "f", "", "a TrainingDataset manifest whose stream to index (- for stdin), instead of URI and the stream's flags")
	cmd.Flags().StringVar(&o.stream, "stream", "", "with -f: the stream to index (default: the manifest's only stream that needs an index)")
	cmd.Flags().BoolVar(&o.selectionOnly, "selection-only", false, "with --filter or --lengths: write only the filter's selection and the lengths, over the index already there (which stays as it is, and so does every plan's fingerprint)")
	cmd.Flags().StringVar(&o.indexURI, "index-uri", "", "where the index and the filter's selections go, when not under _shardfeed/ in URI (spec.streams[].source.indexURI): a prefix of the same store, for data you may not write to")
	cmd.Flags().StringVar(&o.filter, "filter", "", "a row filter (spec.streams[].filter): a CEL expression over the stream's columns; writes the rows it matches in each shard beside the index")
	return cmd
}

// addLengthFlags adds the flags of what index measures beside the index:
// lengths, buckets and packs.
func (o *indexOptions) addLengthFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.lengths, "lengths", "", "a column whose samples' lengths to write beside the index (for packing and bucketing): a list column's elements (tokens), or a binary column's image height and width; of the filter's matching rows where there is a filter")
	cmd.Flags().Int64SliceVar(&o.buckets, "buckets", nil, "with --lengths: write each bucket's rows as a selection beside the index, the buckets cut at these lengths (elements, or an image's pixels), ascending, e.g. 512,1024,2048")
	cmd.Flags().StringSliceVar(&o.aspectRatios, "aspect-ratios", nil, "with --lengths of images: write each bucket's rows as a selection beside the index, the buckets cut at these ratios of width over height, ascending, e.g. 3/4,4/3")
	o.pack.add(cmd)
}

func (o *indexOptions) run(cmd *cobra.Command, args []string) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	source, err := o.source(cmd, args)
	if err != nil {
		return err
	}
	packing, err := o.pack.spec(o.lengths)
	if err != nil {
		return err
	}
	if err := o.checkFlags(); err != nil {
		return err
	}
	inParts, err := o.inParts.on()
	if err != nil {
		return err
	}
	measuring := o.inParts.measure > 0
	switch {
	case measuring && (o.dryRun || o.appendTo || o.indexOnly):
		return errors.New("--measure-parts measures the index already there: not with --dry-run, --append or --index-only")
	case inParts && !measuring && (o.dryRun || o.appendTo || o.selectionOnly):
		return errors.New("--dry-run, --append and --selection-only are not indexed in parts: drop them, or index without --list-parts, --part or --merge-parts")
	case o.indexOnly && o.selectionOnly:
		return errors.New("--index-only writes the index alone and --selection-only all but the index: give one")
	}
	st, ist, err := o.stores(ctx, source)
	if err != nil {
		return err
	}
	opts, err := o.formatOptions(cmd)
	if err != nil {
		return err
	}
	start := time.Now()
	out := cmd.OutOrStdout()
	verb := "wrote"
	if o.dryRun {
		verb = "would write"
	}
	var l *index.Layout
	switch {
	case o.selectionOnly && o.filter == "" && o.lengths == "":
		return errors.New("--selection-only writes a filter's selection or a column's lengths: give --filter or --lengths (or a manifest's stream with a filter)")
	case o.kind == datav1alpha1.FormatMDS && o.filter == "" && o.lengths == "":
		return errors.New("an MDS stream keeps its own index: nothing to write but a filter's selection (--filter) or a column's lengths (--lengths)")
	case measuring:
		if o.filter == "" && o.lengths == "" {
			return errors.New("--measure-parts measures a filter's selection or a column's lengths: give --filter or --lengths (or a manifest's stream with a filter, packing, bucketing or tokenize)")
		}
		return o.measureInParts(ctx, st, ist, source, packing, opts, verb, start)
	case o.kind == datav1alpha1.FormatMDS || o.selectionOnly:
		// MDS keeps its own index, and --selection-only keeps the
		// one there: only the filter's selection is written, over
		// that index, so every plan's fingerprint stays.
		own := ist // shardfeed's index; MDS's own is in the data
		if o.kind == datav1alpha1.FormatMDS {
			own = st
		}
		if l, err = index.ReadStoreLayout(ctx, own); err != nil {
			return err
		}
	case inParts:
		if l, err = o.indexParts(ctx, cmd, st, ist, opts, verb, start); err != nil || l == nil {
			return err // listed, or a part indexed: the merge goes on
		}
	default:
		if l, err = o.indexStream(ctx, cmd, st, ist, source, opts, verb, start); err != nil {
			if name := o.inParts.name; name != "" {
				o.recordFailure(ctx, ist, name, err)
			}
			return err
		}
	}
	if o.indexOnly {
		return nil
	}
	data, err := dataStore(ctx, st, source, l)
	if err != nil {
		return err
	}
	return o.derive(ctx, out, ist, l, packing, verb, o.measureHere(data, l, source, opts.Progress))
}

// measures are how the files beside the index are had: the selection and
// the lengths, measured here or joined from parts measured elsewhere.
type measures struct {
	selection func(ctx context.Context) (*sidefile.FilterIndex, []byte, error)
	lengths   func(ctx context.Context, sel *format.Selection) (*sidefile.LengthsIndex, []byte, error)
	// note ends the lines saying what was written.
	note string
}

// measureHere measures the stream of layout l, whose shards are in data,
// in this process.
func (o *indexOptions) measureHere(data store.Store, l *index.Layout, src store.Source, progress func(done, total int, object string)) measures {
	return measures{
		selection: func(ctx context.Context) (*sidefile.FilterIndex, []byte, error) {
			return formats.Default().Select(ctx, data, l, o.filter, progress)
		},
		lengths: func(ctx context.Context, sel *format.Selection) (*sidefile.LengthsIndex, []byte, error) {
			tc, err := o.tokenCount(ctx, src)
			if err != nil {
				return nil, nil, err
			}
			return measureLengths(ctx, data, l, o.lengths, tc, sel, format.AllShards(l), progress)
		},
	}
}

// measureLengths measures column's lengths over the shards in of layout l
// (a tokenized column's by its text's tokens, with tc; the filter's
// matching rows, with sel).
func measureLengths(ctx context.Context, data store.Store, l *index.Layout, column string, tc *tokenCounting, sel *format.Selection, in format.ShardRange,
	progress func(done, total int, object string)) (*sidefile.LengthsIndex, []byte, error) {
	if tc != nil {
		return formats.Default().TokenLengthsShards(ctx, data, l, tc.tokenize.Column, column, planspec.TokenizeKey(tc.tokenize), tc.count, sel, in, progress)
	}
	return formats.Default().LengthsShards(ctx, data, l, column, sel, in, progress)
}

// derive writes beside the index of layout l in ist the files its stream
// needs besides: the filter's selection, the lengths, the buckets'
// selections and the packs, as m has them.
func (o *indexOptions) derive(ctx context.Context, out io.Writer, ist store.Store, l *index.Layout, packing *datav1alpha1.Packing, verb string, m measures) error {
	// The selection and the lengths are measured, both, before either is
	// written: a failure leaves the files beside the index as they were.
	var (
		sel              *format.Selection
		x                *sidefile.LengthsIndex
		values           []byte
		selTook, lenTook time.Duration
	)
	if o.filter != "" {
		start := time.Now()
		fi, runs, err := m.selection(ctx)
		if err != nil {
			return fmt.Errorf("--filter: %w", err)
		}
		sel, selTook = &format.Selection{Index: fi, Runs: runs}, time.Since(start)
	}
	if o.lengths != "" {
		start := time.Now()
		var err error
		if x, values, err = m.lengths(ctx, sel); err != nil {
			return fmt.Errorf("--lengths: %w", err)
		}
		lenTook = time.Since(start)
	}
	if sel != nil {
		if err := writeSelection(ctx, out, ist, l, o.filter, sel, selTook, m.note, verb, o.dryRun); err != nil {
			return err
		}
	}
	if o.lengths == "" {
		return nil
	}
	if err := writeLengths(ctx, out, ist, o.lengths, x, values, lenTook, m.note, verb, o.dryRun); err != nil {
		return err
	}
	if len(o.buckets) > 0 || len(o.aspectRatios) > 0 {
		if err := o.writeBuckets(ctx, out, ist, l, x, values, sel, verb); err != nil {
			return err
		}
	}
	if packing == nil {
		return nil
	}
	return writePacks(out, ist, x, values, packing, verb, o.dryRun)
}

// writeBuckets writes each bucket's rows of the samples whose lengths are
// x and values (a filter's matching rows, with sel) as a selection beside
// the index in ist.
func (o *indexOptions) writeBuckets(ctx context.Context, out io.Writer, ist store.Store, l *index.Layout, x *sidefile.LengthsIndex, values []byte,
	sel *format.Selection, verb string) error {
	ratios, err := sidefile.ParseRatios(o.aspectRatios)
	if err != nil {
		return fmt.Errorf("--aspect-ratios: %w", err)
	}
	b := sidefile.Buckets{Column: x.Column, Measure: x.Measure, Bounds: o.buckets, Ratios: ratios}
	var runs func(i int) ([]indexfile.Run, error)
	if sel != nil {
		runs = func(i int) ([]indexfile.Run, error) {
			sh := sel.Index.Shards[i]
			return sel.Index.ShardRuns(i, sel.Runs[sh.Offset:sh.Offset+sh.Length], l.Index.Shards[i].Samples)
		}
	}
	sels, objects, err := sidefile.BucketSelections(x, values, b, x.Filter, runs)
	if err != nil {
		return fmt.Errorf("--buckets: %w", err)
	}
	samples, _, _ := x.Totals()
	for k, s := range sels {
		if !o.dryRun {
			if err := sidefile.WriteFilter(ctx, ist, s, objects[k]); err != nil {
				return err
			}
		}
		var n int64
		for _, sh := range s.Shards {
			n += sh.Matching
		}
		key, _ := sidefile.FilterObjects(s.Filter)
		if _, err := fmt.Fprintf(out, "%s %s%s: bucket %d, %s: %d samples (%.1f%%)\n", verb, strings.TrimSuffix(ist.URI(), "/")+"/", key, k, s.Filter,
			n, 100*float64(n)/float64(max(samples, 1))); err != nil {
			return err
		}
	}
	return nil
}

// writePacks counts each shard's packs of the documents whose lengths are
// x and values, and writes them beside the index in ist.
func writePacks(out io.Writer, ist store.Store, x *sidefile.LengthsIndex, values []byte, spec *datav1alpha1.Packing, verb string, dryRun bool) error {
	start := time.Now()
	p := planspec.Packing(spec)
	px, err := sidefile.Packs(x, values, p)
	if err != nil {
		return fmt.Errorf("--pack-length: %w", err)
	}
	if !dryRun {
		if err := sidefile.WritePacks(context.Background(), ist, px, p); err != nil {
			return err
		}
	}
	t := px.Totals()
	_, err = fmt.Fprintf(out, "%s %s%s: %d documents (%s) in %d packs of %d tokens, %.2f%% padding; %d documents cut, %d dropped (%d tokens), %d empty (%s)\n", verb,
		strings.TrimSuffix(ist.URI(), "/")+"/", sidefile.PacksKey(x.Column, x.Filter, x.Tokenize, p), t.Docs, p, t.Packs, p.SeqLength,
		t.PaddingPercent(), t.CutDocs, t.DroppedDocs, t.DroppedTokens, t.EmptyDocs, time.Since(start).Round(time.Millisecond))
	return err
}

// dataStore is where the shards of the stream of layout l are: st, or a
// table's bucket, read with the stream's credentials.
func dataStore(ctx context.Context, st store.Store, source store.Source, l *index.Layout) (store.Store, error) {
	if f := l.File; f != nil && f.Table != nil {
		root := source
		root.URI = f.Table.Root
		return stores.Open(ctx, root)
	}
	return st, nil
}

// source is the stream's source: from the manifest's stream (which also
// gives the format, the index's place, the table, the partitions and the
// filter), or from URI and the flags.
// indexStream indexes the stream's objects and writes its index: all of
// them, or (--append) those the index there does not list yet. A long run
// keeps checkpoints beside the index, which the same command run again
// goes on from.
func (o *indexOptions) indexStream(ctx context.Context, cmd *cobra.Command, st, ist store.Store, source store.Source, opts format.IndexOptions, verb string, start time.Time) (*index.Layout, error) {
	out := o.out
	opts.Table = o.table.options(source)
	if lt, err := o.lance.options(o.kind); err != nil || lt != nil {
		if err != nil {
			return nil, err
		}
		opts.Table = lt
	}
	var before int
	if o.appendTo {
		l, err := index.ReadStoreLayout(ctx, ist)
		if err != nil {
			return nil, fmt.Errorf("--append: %w", err)
		}
		f := l.File
		if f == nil || f.Format != o.kind {
			return nil, fmt.Errorf("--append adds to a shardfeed index of a %s stream, and %s holds %s's: index the stream without --append", o.kind, ist.URI(), l.Format)
		}
		opts.Append, before = f, len(f.Shards)
	}
	var cp *index.Checkpoint
	if !o.dryRun {
		cp = &index.Checkpoint{Store: ist, Options: opts.Key(o.kind), Note: opts.Note}
		opts.Checkpoints = cp
	}
	var counts store.Counts
	f, err := formats.Default().Index(ctx, o.listing(store.Counted(st, &counts)), o.kind, opts)
	if err != nil {
		return nil, err
	}
	added := ""
	if opts.Append != nil {
		added = fmt.Sprintf(", %d of them new", len(f.Shards)-before)
	}
	if err := o.writeIndexed(ctx, cmd, ist, f, cp, added, verb, start); err != nil {
		return nil, err
	}
	printCost(out, f, &counts)
	o.noteHive(cmd, f, opts)
	return index.LayoutOf(f), nil
}

// writeIndexed writes f, the stream's index, in the form asked for (the
// index it replaces kept), removes the checkpoint cp of its run, and says
// what it wrote.
func (o *indexOptions) writeIndexed(ctx context.Context, cmd *cobra.Command, ist store.Store, f *indexfile.File, cp *index.Checkpoint, added, verb string, start time.Time) error {
	if !o.dryRun {
		if err := keepReplaced(ctx, cmd.ErrOrStderr(), ist, f); err != nil {
			return err
		}
	}
	key, err := o.writeIndex(ctx, ist, f)
	if err != nil {
		return err
	}
	if cp != nil {
		if err := cp.Remove(ctx); err != nil {
			return fmt.Errorf("removing the checkpoint of the index written: %w", err)
		}
	}
	_, err = fmt.Fprintf(o.out, "%s %s%s: %d shards%s, %d samples (%s)\n", verb, strings.TrimSuffix(ist.URI(), "/")+"/", key, len(f.Shards), added, f.StreamIndex().Samples(), time.Since(start).Round(time.Millisecond))
	return err
}

// noteHive notes a tree whose objects are all under key=value folders,
// indexed without --hive.
func (o *indexOptions) noteHive(cmd *cobra.Command, f *indexfile.File, opts format.IndexOptions) {
	if keys := hiveKeys(f); opts.Partitions == nil && len(keys) > 0 {
		fix := "index with --hive to read them as columns"
		if k := o.kind; k != datav1alpha1.FormatParquet && k != datav1alpha1.FormatORC {
			fix = "--hive reads Parquet and ORC trees: put the values in the records, or convert the tree to Parquet and index that with --hive"
		}
		_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "note: every object is under key=value folders (%s): their values are not columns of this index; %s\n",
			strings.Join(keys, ", "), fix)
	}
}

// keepReplaced keeps the index at ist, with its side files, when f is of
// other content (sidefile.Keep): a job that committed on it resumes there.
func keepReplaced(ctx context.Context, w io.Writer, ist store.Store, f *indexfile.File) error {
	old, _, err := index.ReadStoreIndex(ctx, ist, 0)
	if err != nil || old == nil {
		return nil //nolint:nilerr // no index there (or none readable): nothing a job can resume on
	}
	was, now := old.Index.ContentHash(), f.StreamIndex().ContentHash()
	if was == now {
		return nil
	}
	n, err := sidefile.Keep(ctx, ist, was)
	if err != nil || n == 0 { // an index beside the data, where an earlier release wrote it
		return err
	}
	_, _ = fmt.Fprintf(w, "note: kept the index this one replaces, and %d files beside it, under %s%s%s/: a job that committed on it resumes there\n",
		n-1, ist.URI(), sidefile.KeptDir, was)
	return nil
}

// writeIndex writes the index in the form asked for, unless a dry run:
// the key it is (or would be) at.
func (o *indexOptions) writeIndex(ctx context.Context, ist store.Store, f *indexfile.File) (string, error) {
	form := index.Form(o.indexForm).Of(f)
	if o.dryRun {
		return form.Key(), nil
	}
	return index.WriteForm(ctx, ist, f, form)
}

// checkFlags refuses flags that do not go together, before any work.
func (o *indexOptions) checkFlags() error {
	if (len(o.buckets) > 0 || len(o.aspectRatios) > 0) && o.lengths == "" {
		return errors.New("--buckets and --aspect-ratios cut the samples by their lengths: give --lengths COLUMN")
	}
	if o.appendTo && (o.selectionOnly || o.kind == datav1alpha1.FormatMDS) {
		return errors.New("--append adds new objects' shards to a shardfeed index: not with --selection-only, nor to an MDS stream (MDS writes its own index)")
	}
	if !slices.Contains(index.Forms, index.Form(o.indexForm)) {
		return fmt.Errorf("--index-form %q is not one of auto, json, compact", o.indexForm)
	}
	return nil
}

func (o *indexOptions) source(cmd *cobra.Command, args []string) (store.Source, error) {
	o.out = cmd.OutOrStdout()
	var source store.Source
	switch {
	case o.manifest != "" && len(args) > 0:
		return store.Source{}, errors.New("give a URI or -f MANIFEST, not both")
	case o.manifest != "":
		if err := o.fromManifest(cmd); err != nil {
			return store.Source{}, err
		}
		s, spec, err := indexedStream(cmd, o.manifest, o.stream)
		if err != nil {
			return store.Source{}, err
		}
		o.spec, o.tokenize = s, cmp.Or(s.Tokenize, spec.Tokenize)
		if packing := spec.Packing; packing != nil {
			if cmd.Flags().Changed("lengths") && o.lengths != packing.Column {
				return store.Source{}, fmt.Errorf("--lengths %s: the manifest packs column %s: drop --lengths", o.lengths, packing.Column)
			}
			o.lengths = packing.Column
			o.pack.fromSpec(packing)
		}
		if b := spec.Bucketing; b != nil {
			if cmd.Flags().Changed("lengths") && o.lengths != b.Column {
				return store.Source{}, fmt.Errorf("--lengths %s: the manifest buckets column %s: drop --lengths", o.lengths, b.Column)
			}
			o.lengths, o.buckets, o.aspectRatios = b.Column, b.Boundaries, b.AspectRatios
		}
		if o.tokenize != nil && o.lengths == "" {
			// A tokenized stream's tokens are counted whether or not it
			// packs or buckets: plan --summary reports them.
			o.lengths = planspec.TokenizeOutput(o.tokenize)
		}
		if cmd.Flags().Changed("index-uri") {
			return store.Source{}, errors.New("with -f, the stream's source.indexURI says where its index goes: drop --index-uri")
		}
		source, o.kind, o.indexURI = streams.SharedCredentials(s, o.src.credentialsDir), s.Format, s.Source.IndexURI
		source.ConfigMapsDir = o.src.configMapsDir
		o.src.policy(&source, &s)
		o.table.fromSpec(s.Iceberg)
		o.lance.fromSpec(s.Lance)
		if s.Format == datav1alpha1.FormatLance && o.lance.columns == nil {
			// Only the columns the stream serves: the others' bytes are
			// never fetched.
			o.lance.columns = s.Columns
		}
		o.parts.fromSpec(s.Partitions)
		o.filter = s.Filter
		if w := s.WebDataset; w != nil {
			o.shards = w.Shards
			for _, c := range w.Columns {
				o.specSchema = append(o.specSchema, indexfile.Field{Name: c.Name, Type: c.Type})
			}
		}
		o.own.fromSpec(&s)
	case len(args) == 0:
		return store.Source{}, errors.New("give the stream's URI (shardfeed index s3://bucket/prefix/ --format parquet) or its manifest (-f dataset.yaml --stream NAME)")
	default:
		uri, err := localURI(args[0], ".")
		if err != nil {
			return store.Source{}, err
		}
		source = store.Source{URI: uri, Endpoint: o.src.endpoint, Region: o.src.region, Insecure: o.src.insecure, CredentialsDir: o.src.credentialsDir}
		if o.src.identityDir != "" {
			return store.Source{}, errors.New("--identity-dir goes with -f: the manifest's stream names its workload identity")
		}
		o.src.policy(&source, nil)
	}
	return source, nil
}

// stores opens the stream's store, and the store its index goes to (the
// same, unless --index-uri or source.indexURI names another prefix).
func (o *indexOptions) stores(ctx context.Context, source store.Source) (st, ist store.Store, err error) {
	st, err = stores.Open(ctx, source)
	if err != nil {
		return nil, nil, err
	}
	if o.listParallel < 1 {
		return nil, nil, fmt.Errorf("--list-parallel %d: list at least one directory at a time", o.listParallel)
	}
	if o.objectList != "" {
		if o.objects, err = o.readObjectList(source.URI); err != nil {
			return nil, nil, err
		}
	}
	ist = st // where the index and the selections go
	isrc := source
	if o.src.writeCredentialsDir != "" {
		// The index is written with credentials of its own; the data's
		// stay read-only (an indexing Job's pods: spec.index).
		isrc.CredentialsDir, isrc.CredentialsOptional, isrc.Credentials, isrc.Identity = o.src.writeCredentialsDir, false, nil, nil
		if ist, err = stores.Open(ctx, isrc); err != nil {
			return nil, nil, fmt.Errorf("--write-credentials-dir: %w", err)
		}
	}
	if o.indexURI != "" {
		if o.indexURI, err = localURI(o.indexURI, "."); err != nil {
			return nil, nil, fmt.Errorf("--index-uri: %w", err)
		}
		if o.kind == datav1alpha1.FormatIceberg {
			return nil, nil, errors.New("--index-uri: a table's index goes to URI, outside the table's location already: drop --index-uri")
		}
		isrc, err := streams.IndexSource(datav1alpha1.Stream{Source: datav1alpha1.Source{URI: source.URI, IndexURI: o.indexURI}}, isrc)
		if err != nil {
			return nil, nil, fmt.Errorf("--index-uri: %w", err)
		}
		if ist, err = stores.Open(ctx, isrc); err != nil {
			return nil, nil, fmt.Errorf("--index-uri: %w", err)
		}
	}
	return st, ist, nil
}

// listing is st as the indexer lists it: the object list's objects, with
// no request, or its tree a directory per request stream, many at once (a
// prefix of many directories in a fraction of one listing's time).
func (o *indexOptions) listing(st store.Store) store.Store {
	if o.objects != nil {
		return store.Listed{Store: st, Objects: o.objects}
	}
	return store.ParallelList{Store: st, Parallel: o.listParallel}
}

// readObjectList reads --object-list: the objects under the stream's
// prefix (uri's), relative to it.
func (o *indexOptions) readObjectList(uri string) ([]store.Object, error) {
	bucket, prefix := "", ""
	if u, err := url.Parse(uri); err == nil && u.Scheme != "file" && u.Scheme != "" {
		bucket, prefix = u.Host, strings.TrimPrefix(u.Path, "/")
	}
	start := time.Now()
	objs, outside, err := objectlist.ReadFile(o.objectList, objectlist.Form(o.objectListForm), bucket, prefix, 0)
	if err != nil {
		return nil, fmt.Errorf("--object-list %s: %w", o.objectList, err)
	}
	if o.out != nil {
		_, _ = fmt.Fprintf(o.out, "%d objects under %s from %s, no listing (%d rows of other prefixes skipped) (%s)\n",
			len(objs), uri, o.objectList, outside, time.Since(start).Round(time.Millisecond))
	}
	return objs, nil
}

// formatOptions are the format's options: hash, shard size, progress,
// partitions, a given schema and the format's own.
func (o *indexOptions) formatOptions(cmd *cobra.Command) (format.IndexOptions, error) {
	shardBytes, err := parseBytes(o.shardSize)
	if err != nil {
		return format.IndexOptions{}, fmt.Errorf("--shard-size: %w", err)
	}
	if err := o.own.check(o.kind, "--format"); err != nil {
		return format.IndexOptions{}, err
	}
	opts := format.IndexOptions{Hash: o.algo, ShardBytes: shardBytes, Own: o.own.values(), Shards: o.shards, Concurrency: o.concurrency, Progress: progressPrinter(cmd.ErrOrStderr()),
		Warn: func(msg string) { _, _ = fmt.Fprintln(cmd.ErrOrStderr(), "warning: "+msg) },
		Note: func(msg string) { _, _ = fmt.Fprintln(cmd.ErrOrStderr(), "note: "+msg) }}
	if opts.Partitions, err = o.parts.options(o.kind); err != nil {
		return opts, err
	}
	if o.schema != "" {
		if opts.Schema, err = readSchema(o.schema); err != nil {
			return opts, err
		}
	}
	if o.specSchema != nil {
		if o.schema != "" {
			return opts, errors.New("--schema: the manifest's stream types its columns (webdataset.columns): drop --schema")
		}
		opts.Schema = o.specSchema
	}
	return opts, nil
}

// writeSelection writes a row filter's selection beside the index of
// layout l in ist, and says so (measured in took).
func writeSelection(ctx context.Context, out io.Writer, ist store.Store, l *index.Layout, filter string, s *format.Selection, took time.Duration,
	note, verb string, dryRun bool) error {
	sel := s.Index
	if !dryRun {
		if err := sidefile.WriteFilter(ctx, ist, sel, s.Runs); err != nil {
			return err
		}
	}
	var matching int64
	shards := 0
	for _, s := range sel.Shards {
		matching += s.Matching
		if s.Matching > 0 {
			shards++
		}
	}
	key, _ := sidefile.FilterObjects(filter)
	total := l.Index.Samples()
	pruned := ""
	if sel.Pruned > 0 {
		pruned = fmt.Sprintf("; %d shards ruled out by their statistics, unread", sel.Pruned)
	}
	_, err := fmt.Fprintf(out, "%s %s%s: %d of %d samples match (%.1f%%), in %d of %d shards%s (%s%s)\n", verb, strings.TrimSuffix(ist.URI(), "/")+"/", key,
		matching, total, 100*float64(matching)/float64(max(total, 1)), shards, len(sel.Shards), pruned, took.Round(time.Millisecond), note)
	return err
}

// tokenCounting is a tokenized column's measure: its tokenization and how
// its text's tokens are counted.
type tokenCounting struct {
	tokenize *datav1alpha1.Tokenize
	count    format.TokenCount
}

// tokenCount returns how the lengths column is measured when it is the
// output of the stream's tokenization (nil otherwise): the tokenizer read
// as the sidecar reads it (the stream's store and credentials, its pinned
// hash).
func (o *indexOptions) tokenCount(ctx context.Context, src store.Source) (*tokenCounting, error) {
	t := o.tokenize
	if t == nil || o.lengths != planspec.TokenizeOutput(t) {
		return nil, nil
	}
	tk, err := streamsource.LoadTokenizer(ctx, o.spec, src, t)
	if err != nil {
		return nil, err
	}
	count, err := streamsource.TokenCount(tk, t)
	if err != nil {
		return nil, err
	}
	return &tokenCounting{tokenize: t, count: count}, nil
}

// writeLengths writes the lengths of column (measured in took) beside
// the index in ist, and says so.
func writeLengths(ctx context.Context, out io.Writer, ist store.Store, column string, x *sidefile.LengthsIndex, values []byte, took time.Duration,
	note, verb string, dryRun bool) error {
	if !dryRun {
		if err := sidefile.WriteLengths(ctx, ist, x, values); err != nil {
			return err
		}
	}
	key, _ := sidefile.LengthsObjects(x.Column, x.Measure, x.Filter, x.Tokenize)
	samples, sum, largest := x.Totals()
	what := "elements"
	if x.Measure == sidefile.ImageSize {
		what = "pixels"
	}
	_, err := fmt.Fprintf(out, "%s %s%s: lengths of %s (%s) for %d samples, %d %s in all, %.1f a sample, %d at most (%s%s)\n", verb,
		strings.TrimSuffix(ist.URI(), "/")+"/", key, column, x.Measure, samples, sum, what, float64(sum)/float64(max(samples, 1)), largest,
		took.Round(time.Millisecond), note)
	return err
}

// printCost says what indexing read of the indexed objects: a format that
// reads headers alone (webdataset) reads a small share of them.
func printCost(out io.Writer, f *indexfile.File, counts *store.Counts) {
	size, read := objectsSize(f), counts.ReadBytes.Load()
	switch {
	case size > 0 && read <= size:
		_, _ = fmt.Fprintf(out, "read %s of the indexed objects' %s (%.2f%%) in %d requests (%d of them lists)\n", bytesize.Human(read),
			bytesize.Human(size), 100*float64(read)/float64(size), counts.Requests(), counts.Lists.Load())
	case size > 0:
		// More than the objects hold: what was read beside them (an index
		// or metadata reused, a compressed object read whole), not a share.
		_, _ = fmt.Fprintf(out, "read %s in %d requests (%d of them lists): the indexed objects' %s, and %s of the files beside them\n", bytesize.Human(read),
			counts.Requests(), counts.Lists.Load(), bytesize.Human(size), bytesize.Human(read-size))
	}
}

// objectsSize sums the sizes of the objects an index's shards are in,
// where it records them.
func objectsSize(f *indexfile.File) int64 {
	seen := map[string]bool{}
	var n int64
	for _, e := range f.Shards {
		if !seen[e.Object] && e.ObjectSize > 0 {
			seen[e.Object] = true
			n += e.ObjectSize
		}
	}
	return n
}

// streamFlags are the flags -f MANIFEST replaces with the stream's spec,
// with the formats' own options' (ownFlags).
var streamFlags = []string{"format", "endpoint", "region", "insecure", "catalog-type", "catalog-uri", "catalog-name",
	"warehouse", "catalog-region", "catalog-id", "table", "snapshot-id", "ref", "hive", "select", "partition-columns", "filter",
	"version", "tag", "pack-length", "pack-method", "pack-window", "pack-overlong", "pack-across-shards", "buckets", "aspect-ratios", "shards"}

// fromManifest refuses a flag that -f MANIFEST replaces with the
// stream's spec.
func (o *indexOptions) fromManifest(cmd *cobra.Command) error {
	for _, f := range slices.Concat(streamFlags, o.own.flags()) {
		if cmd.Flags().Changed(f) {
			return fmt.Errorf("--%s comes from the manifest's stream with -f: drop the flag, or give the URI instead of -f", f)
		}
	}
	return nil
}

// indexedStream returns the stream of the manifest that index -f is to
// index: the one named, or the only one that needs an index of ours (or,
// in a packed or bucketed dataset, its packs or buckets), and the
// dataset's spec.
func indexedStream(cmd *cobra.Command, manifest, name string) (datav1alpha1.Stream, *datav1alpha1.TrainingDatasetSpec, error) {
	ds, err := readDataset(manifest, cmd.InOrStdin())
	if err != nil {
		return datav1alpha1.Stream{}, nil, err
	}
	var names, candidates []string
	for _, s := range ds.Spec.Streams {
		names = append(names, s.Name)
		mds := s.Format == datav1alpha1.FormatMDS || s.Format == ""
		ours := !mds || s.Filter != "" || ds.Spec.Packing != nil || ds.Spec.Bucketing != nil
		if s.Name == name {
			if !ours {
				return datav1alpha1.Stream{}, nil, fmt.Errorf("stream %q is MDS, which keeps its own index: nothing to write", s.Name)
			}
			if mds {
				s.Format = datav1alpha1.FormatMDS
			}
			return s, &ds.Spec, nil
		}
		if ours {
			candidates = append(candidates, s.Name)
		}
	}
	switch {
	case name != "":
		return datav1alpha1.Stream{}, nil, fmt.Errorf("%s has no stream %q: its streams are %s", manifest, name, strings.Join(names, ", "))
	case len(candidates) == 1:
		return indexedStream(cmd, manifest, candidates[0])
	case len(candidates) == 0:
		return datav1alpha1.Stream{}, nil, fmt.Errorf("every stream of %s is MDS, which keeps its own index: nothing to write", manifest)
	}
	return datav1alpha1.Stream{}, nil, fmt.Errorf("%s has several streams to index (%s): name one with --stream", manifest, strings.Join(candidates, ", "))
}

// partitionFlags read a stream as a hive-partitioned tree
// (spec.streams[].partitions).
type partitionFlags struct {
	hive            bool
	selection, cols string
}

func (p *partitionFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&p.hive, "hive", false, "parquet and orc: read URI as a hive-partitioned tree (key=value directories), the partition values as columns")
	f.StringVar(&p.selection, "select", "", "with --hive: a CEL expression over the partition columns; only the partitions it selects are listed and indexed")
	f.StringVar(&p.cols, "partition-columns", "", "with --hive: the partition columns' types in the tree's order, e.g. date:utf8,bucket:int32 (default: inferred as pyarrow does)")
}

func (p *partitionFlags) fromSpec(s *datav1alpha1.Partitions) {
	if s == nil {
		return
	}
	p.hive, p.selection = true, s.Select
	var cols []string
	for _, c := range s.Columns {
		cols = append(cols, c.Name+":"+c.Type)
	}
	p.cols = strings.Join(cols, ",")
}

// options returns the partition options of the flags (nil without --hive).
func (p *partitionFlags) options(kind datav1alpha1.ShardFormat) (*format.PartitionOptions, error) {
	if !p.hive {
		if p.selection != "" || p.cols != "" {
			return nil, errors.New("--select and --partition-columns read a hive-partitioned tree: add --hive")
		}
		return nil, nil
	}
	if kind != datav1alpha1.FormatParquet && kind != datav1alpha1.FormatORC {
		return nil, fmt.Errorf("--hive reads a tree of parquet or orc files, not %s", kind)
	}
	opts := &format.PartitionOptions{Select: p.selection}
	if p.cols == "" {
		return opts, nil
	}
	for _, c := range strings.Split(p.cols, ",") {
		name, typ, ok := strings.Cut(strings.TrimSpace(c), ":")
		if !ok || name == "" || !slices.Contains(indexfile.PartitionTypes, typ) {
			return nil, fmt.Errorf("--partition-columns %q: each column is name:type, the type one of %s", c, strings.Join(indexfile.PartitionTypes, ", "))
		}
		opts.Columns = append(opts.Columns, indexfile.Field{Name: name, Type: typ})
	}
	return opts, nil
}

// icebergFlags name an Iceberg table and its catalog
// (spec.streams[].iceberg).
type icebergFlags struct {
	catalog            datav1alpha1.IcebergCatalog
	catalogType, table string
	ref                string
	snapshotID         int64
	catalogTimeout     time.Duration
}

func (t *icebergFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&t.catalogType, "catalog-type", "", "iceberg: the table's catalog, rest, sql or glue")
	f.StringVar(&t.catalog.URI, "catalog-uri", "", "iceberg: the catalog's uri (http(s)://host:port/path for rest; sqlite:///path, postgresql://host/db or mysql://host/db for sql)")
	f.StringVar(&t.catalog.Name, "catalog-name", "", `iceberg: the catalog's name (default "default")`)
	f.StringVar(&t.catalog.Warehouse, "warehouse", "", "iceberg: the warehouse to ask a rest catalog for")
	f.StringVar(&t.catalog.Region, "catalog-region", "", "iceberg: a glue catalog's region")
	f.StringVar(&t.catalog.CatalogID, "catalog-id", "", "iceberg: a glue catalog's AWS account")
	f.DurationVar(&t.catalogTimeout, "catalog-timeout", icebergindex.DefaultTimeout, "iceberg: bound on each request to the catalog")
	f.StringVar(&t.table, "table", "", "iceberg: the table, namespace.table")
	f.Int64Var(&t.snapshotID, "snapshot-id", 0, "iceberg: the snapshot to index (default: the ref's, or the current one)")
	f.StringVar(&t.ref, "ref", "", "iceberg: the branch or tag whose snapshot to index")
}

// fromSpec takes the table of a manifest's stream (nil: none).
func (t *icebergFlags) fromSpec(s *datav1alpha1.IcebergTable) {
	if s == nil {
		return
	}
	t.catalog, t.catalogType, t.table, t.ref = s.Catalog, string(s.Catalog.Type), s.Table, s.Ref
	if s.SnapshotID != nil {
		t.snapshotID = *s.SnapshotID
	}
}

// options are the table the flags (or the manifest) name, for the
// format's TableIndexer; nil where they name none.
func (t *icebergFlags) options(src store.Source) *format.TableOptions {
	if t.table == "" && t.catalogType == "" {
		return nil
	}
	spec := datav1alpha1.IcebergTable{Catalog: t.catalog, Table: t.table, Ref: t.ref}
	spec.Catalog.Type = datav1alpha1.IcebergCatalogType(t.catalogType)
	if t.snapshotID != 0 {
		spec.SnapshotID = &t.snapshotID
	}
	return &format.TableOptions{Iceberg: spec, Source: src, Timeout: t.catalogTimeout,
		Token: os.Getenv("SHARDFEED_CATALOG_TOKEN"), Credential: os.Getenv("SHARDFEED_CATALOG_CREDENTIAL"),
		User: os.Getenv("SHARDFEED_CATALOG_USER"), Password: os.Getenv("SHARDFEED_CATALOG_PASSWORD")}
}

// lanceFlags pin a Lance dataset's version (spec.streams[].lance) and
// project its columns.
type lanceFlags struct {
	version int64
	tag     string
	columns []string
}

func (l *lanceFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.Int64Var(&l.version, "version", 0, "lance: the dataset version to index (default: the tag's, or the latest)")
	f.StringVar(&l.tag, "tag", "", "lance: the tag whose version to index (a tag keeps its version from cleanup: pin by tag)")
	f.StringSliceVar(&l.columns, "columns", nil, "lance: index only these columns; shards fetch no other column's bytes (default: all)")
}

// fromSpec takes the pin of a manifest's stream (nil: none).
func (l *lanceFlags) fromSpec(s *datav1alpha1.LanceTable) {
	if s == nil {
		return
	}
	l.tag = s.Tag
	if s.Version != nil {
		l.version = *s.Version
	}
}

// options are the dataset pin and projection of a lance stream; nil for
// another format, which the flags must then not be given for.
func (l *lanceFlags) options(kind datav1alpha1.ShardFormat) (*format.TableOptions, error) {
	if kind != datav1alpha1.FormatLance {
		if l.version != 0 || l.tag != "" || l.columns != nil {
			return nil, fmt.Errorf("--version, --tag and --columns are for format lance, not %s", kind)
		}
		return nil, nil
	}
	opts := &format.TableOptions{Lance: datav1alpha1.LanceTable{Tag: l.tag}, Columns: l.columns}
	if l.version != 0 {
		opts.Lance.Version = &l.version
	}
	return opts, nil
}

// hiveKeys returns the partition keys of a tree whose every object sits
// under key=value folders (a hive-partitioned tree indexed without
// --hive, whose partition values would not be columns), else nil.
func hiveKeys(f *indexfile.File) []string {
	var keys []string
	for i, e := range f.Shards {
		dirs := strings.Split(e.Object, "/")
		var these []string
		for _, d := range dirs[:len(dirs)-1] {
			if k, _, ok := strings.Cut(d, "="); ok && k != "" {
				these = append(these, k)
			}
		}
		if len(these) == 0 {
			return nil
		}
		if i == 0 {
			keys = these
		}
	}
	return keys
}

// progressPrinter prints one updating line on a terminal, a line per tenth
// of the objects otherwise.
func progressPrinter(w io.Writer) func(done, total int, object string) {
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	start := time.Now()
	return func(done, total int, object string) {
		rate := progressRate(done, total, time.Since(start))
		switch {
		case tty:
			const width = 30
			filled := width * done / max(total, 1)
			bar := strings.Repeat("=", filled) + strings.Repeat(" ", width-filled)
			_, _ = fmt.Fprintf(w, "\r\033[K[%s] %d/%d%s %s", bar, done, total, rate, object)
			if done == total {
				_, _ = fmt.Fprintln(w)
			}
		case done == total || done%max(1, total/10) == 0:
			_, _ = fmt.Fprintf(w, "indexed %d/%d objects%s\n", done, total, rate)
		}
	}
}

// progressRate says how fast objects are indexed and when the last will
// be, once there is a second of them to go by.
func progressRate(done, total int, took time.Duration) string {
	if done == 0 || took < time.Second {
		return ""
	}
	perSecond := float64(done) / took.Seconds()
	if done == total {
		return fmt.Sprintf(" (%.0f/s, %s)", perSecond, took.Round(time.Second))
	}
	eta := time.Duration(float64(total-done) / perSecond * float64(time.Second))
	return fmt.Sprintf(" (%.0f/s, %s left)", perSecond, eta.Round(time.Second))
}

// parseBytes reads sizes like 64MiB, 64Mi, 1GB, 512k or 1048576.
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
		{"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"B", 1},
	}
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is not a size: write e.g. 64MiB, 512KiB or 1000000", s)
	}
	return n * mult, nil
}

// readSchema reads a schema file: [{"name": …, "type": …}, …].
func readSchema(path string) ([]indexfile.Field, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var fields []indexfile.Field
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fields); err != nil {
		return nil, fmt.Errorf("--schema %s: %w (want [{\"name\": \"id\", \"type\": \"int64\"}, ...])", path, err)
	}
	if len(fields) == 0 {
		return nil, fmt.Errorf("--schema %s lists no columns", path)
	}
	for i, f := range fields {
		t, err := indexfile.ParseColumnType(f.Type)
		if err != nil {
			return nil, fmt.Errorf("--schema %s: column %q: %w", path, f.Name, err)
		}
		fields[i].Type = t.String() // as the index spells it
	}
	if _, err := text.Schema(fields); err != nil {
		return nil, fmt.Errorf("--schema %s: %w", path, err)
	}
	return fields, nil
}

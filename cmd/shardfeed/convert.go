package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/spf13/cobra"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/arrowsize"
	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
	"github.com/shardfeed/shardfeed/sidecar/format/mds"
)

// convertOptions are the flags of shardfeed convert.
type convertOptions struct {
	src                         sourceFlags
	from, to                    datav1alpha1.ShardFormat
	out, shardSize              string
	compression, hashes, outDir string
	schema                      string
	overwrite                   bool
	// own are the options a format alone takes, from the registry.
	own   ownFlags
	parts partitionFlags
	lance lanceFlags
}

func newConvertCommand() *cobra.Command {
	o := &convertOptions{}
	reg := formats.Default()
	// Every format whose objects convert reads, and Lance datasets (a
	// table read from its store alone, with no catalog).
	sources := reg.Kinds(func(f format.Format) bool {
		return !format.IsTable(f) || f.Kind() == datav1alpha1.FormatLance
	})
	cmd := &cobra.Command{
		Use:   "convert SOURCE_URI --from " + strings.Join(sources, "|") + " --to mds|parquet --out OUT_URI",
		Short: "Convert a stream's JSON Lines, CSV, TSV, Parquet, ORC or Arrow IPC objects to MDS or Parquet shards",
		Long: `convert reads every object of the source stream (s3:// or file://) in order
and writes MDS shards (readable by mosaicml-streaming and by shardfeed), or
Parquet objects of row groups of about --shard-size with their shardfeed
index, to OUT_URI; index.json is written last, so an interrupted conversion
leaves no index that names missing shards. Arrow types map to MDS encodings as
docs/formats.md says; MDS has no nulls, so a null value stops the
conversion with the column and row. With --hive, a hive-partitioned tree of
Parquet or ORC files is read with its partition values as columns, only the
partitions --select keeps. With --from lance, SOURCE_URI is a Lance
dataset's directory, read at --version, --tag or its latest version (deleted
rows left out), only --columns if given.`,
		Example: `  shardfeed convert file:///data/chat/ --from jsonl --to mds --out s3://datasets/chat-mds/ --compression zstd:3 --hashes xxh64`,
		Args:    cobra.ExactArgs(1),
		RunE:    o.run,
	}
	o.src.add(cmd)
	o.parts.add(cmd)
	o.lance.add(cmd)
	f := cmd.Flags()
	f.StringVar((*string)(&o.from), "from", "", "format of the source objects: "+strings.Join(sources, ", "))
	f.StringVar((*string)(&o.to), "to", "mds", "output format: mds or parquet")
	f.StringVar(&o.out, "out", "", "output stream URI (s3:// or file://), reached with the same endpoint and credentials")
	f.StringVar(&o.shardSize, "shard-size", "64MiB", "raw size of an MDS shard, or of a Parquet row group")
	f.StringVar(&o.compression, "compression", "", "shard compression: zstd, gz, br or snappy, with an optional :level (zstd:3)")
	f.StringVar(&o.hashes, "hashes", "xxh64", "comma-separated hash algorithms recorded per shard (Parquet: the first)")
	f.StringVar(&o.outDir, "temp-dir", "", "directory for source objects while they are scanned")
	f.BoolVar(&o.overwrite, "overwrite", false, "delete what --out holds before writing (without it, a non-empty --out is refused: its stale shards would mix with the new ones)")
	f.StringVar(&o.schema, "schema", "", `for jsonl, csv and tsv: a JSON file [{"name": "id", "type": "int64"}, ...] to use instead of the schema inferred from every record`)
	o.own.add(cmd, reg)
	_ = cmd.MarkFlagRequired("from")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

func (o *convertOptions) run(cmd *cobra.Command, args []string) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	write, ok := converters[o.to]
	if !ok {
		return fmt.Errorf("--to %q is not supported: use mds or parquet", o.to)
	}
	limit, err := parseBytes(o.shardSize)
	if err != nil {
		return fmt.Errorf("--shard-size: %w", err)
	}
	source := store.Source{Endpoint: o.src.endpoint, Region: o.src.region, Insecure: o.src.insecure, CredentialsDir: o.src.credentialsDir}
	in := source
	if in.URI, err = localURI(args[0], "."); err != nil {
		return err
	}
	inStore, err := stores.Open(ctx, in)
	if err != nil {
		return err
	}
	dst := source
	if dst.URI, err = localURI(o.out, "."); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	outStore, err := stores.Open(ctx, dst)
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if a, b := inStore.URI(), outStore.URI(); strings.HasPrefix(a, b) || strings.HasPrefix(b, a) {
		return fmt.Errorf("--out %s and the source %s overlap: write the converted stream to a prefix of its own", b, a)
	}
	if err := emptyOutput(ctx, outStore, o.overwrite, cmd.ErrOrStderr()); err != nil {
		return err
	}
	if err := o.own.check(o.from, "--from"); err != nil {
		return err
	}
	c := &converter{ctx: ctx, in: inStore, out: outStore, from: o.from, formats: o.own.reg, stderr: cmd.ErrOrStderr(), tmp: o.outDir,
		own: o.own.values()}
	if c.partitions, err = o.parts.options(o.from); err != nil {
		return err
	}
	if c.table, err = o.lance.options(o.from); err != nil {
		return err
	}
	if o.schema != "" {
		if c.schema, err = readSchema(o.schema); err != nil {
			return err
		}
	}
	var hashList []string
	if o.hashes != "" {
		hashList = strings.Split(o.hashes, ",")
	}
	start := time.Now()
	samples, shards, err := write(c, limit, o.compression, hashList)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %d samples in %d %s shards (%s)\n", outStore.URI(), samples, shards, o.to, time.Since(start).Round(time.Millisecond))
	return err
}

// emptyOutput refuses an output prefix that already holds objects, whose
// stale shards would stay beside the new ones, unless overwrite: then they
// are deleted first.
func emptyOutput(ctx context.Context, out store.Store, overwrite bool, log io.Writer) error {
	objs, err := out.List(ctx)
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if len(objs) == 0 {
		return nil
	}
	if !overwrite {
		return fmt.Errorf("--out %s already holds %d objects (%s, …): its stale shards would mix with the new ones; choose an empty prefix, or pass --overwrite to delete them first",
			out.URI(), len(objs), objs[0].Key)
	}
	for _, o := range objs {
		if err := out.Delete(ctx, o.Key); err != nil {
			return fmt.Errorf("--overwrite: %w", err)
		}
	}
	_, _ = fmt.Fprintf(log, "deleted the %d objects --out held (--overwrite)\n", len(objs))
	return nil
}

// converters write a converted stream in each output format.
var converters = map[datav1alpha1.ShardFormat]func(c *converter, shardBytes int64, compression string, hashes []string) (samples int64, shards int, err error){
	datav1alpha1.FormatMDS: func(c *converter, shardBytes int64, compression string, hashes []string) (int64, int, error) {
		return c.toMDS(mds.WriterOptions{Compression: compression, Hashes: hashes, SizeLimit: shardBytes})
	},
	datav1alpha1.FormatParquet: func(c *converter, shardBytes int64, compression string, hashes []string) (int64, int, error) {
		algo := "xxh64"
		if len(hashes) > 0 {
			algo = hashes[0]
		}
		return c.toParquet(shardBytes, compression, algo)
	},
}

// converter streams a source's records into a writer.
type converter struct {
	ctx     context.Context
	in, out store.Store
	from    datav1alpha1.ShardFormat
	formats format.Registry
	stderr  io.Writer
	tmp     string
	schema  []indexfile.Field // given, for text sources
	// partitions read a hive-partitioned source, its partition values
	// written as columns.
	partitions *format.PartitionOptions
	// table pins and projects a Lance dataset.
	table *format.TableOptions
	// own are the values of the source format's own options (a megatron
	// source's unit, a TokensLoader litdata source's block size).
	own map[string]string
}

// layout returns the source's layout: indexed from its objects by a format
// that can (without writing an index), or read from its index.json.
func (c *converter) layout() (*index.Layout, error) {
	f, err := c.formats.Lookup(c.from)
	if err != nil {
		return nil, fmt.Errorf("--from: %w", err)
	}
	_, table := f.(format.TableIndexer)
	if _, ok := f.(format.Indexer); !ok && !table {
		return index.ReadStoreLayout(c.ctx, c.in)
	}
	x, err := c.formats.Index(c.ctx, c.in, c.from, format.IndexOptions{TempDir: c.tmp, Schema: c.schema, Partitions: c.partitions, Table: c.table,
		Own: c.own, Progress: func(done, total int, what string) {
			switch {
			case table:
				_, _ = fmt.Fprintf(c.stderr, "indexed %s (%d/%d)\n", what, done, total)
			case done == total:
				_, _ = fmt.Fprintf(c.stderr, "scanned %d objects\n", total)
			}
		}})
	if err != nil {
		return nil, err
	}
	return &index.Layout{Format: c.from, Index: x.StreamIndex(), File: x}, nil
}

// each calls fn with every record batch of the source, in order, each
// shard's bytes checked against the hash its index records.
func (c *converter) each(fn func(rec arrow.RecordBatch, shard string) error) error {
	l, err := c.layout()
	if err != nil {
		return err
	}
	reader, err := c.formats.Open(l)
	if err != nil {
		return err
	}
	progress := progressPrinter(c.stderr)
	for i, s := range l.Index.Shards {
		if err := c.eachOfShard(reader, i, s.Name, fn); err != nil {
			return err
		}
		progress(i+1, len(l.Index.Shards), s.Name)
	}
	return nil
}

func (c *converter) eachOfShard(reader format.Reader, i int, name string, fn func(rec arrow.RecordBatch, shard string) error) error {
	parts := reader.Parts(i)
	data := make([][]byte, len(parts))
	for j, p := range parts {
		off, n := int64(0), int64(-1)
		if p.Range {
			off, n = p.Offset, p.Size
		}
		b, err := readAll(c.ctx, c.in, p.Key, off, n)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if p.Hash != "" {
			sum, err := checksum.Parse(p.Hash)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if got, _ := checksum.Of(sum.Algo, b); got != sum {
				return fmt.Errorf("%s: %s is %s, the index says %s: the shard is corrupt or changed", name, sum.Algo, got.Hex, sum.Hex)
			}
		}
		data[j] = b
	}
	rr, err := reader.Records(c.ctx, i, data, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer rr.Release()
	for rr.Next() {
		if err := fn(rr.RecordBatch(), name); err != nil {
			return err
		}
	}
	if err := rr.Err(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func (c *converter) put(name string, data []byte) error {
	return c.out.Put(c.ctx, name, bytes.NewReader(data), int64(len(data)))
}

// toMDS writes the source as MDS shards, index.json last.
func (c *converter) toMDS(opts mds.WriterOptions) (samples int64, shards int, err error) {
	var w *mds.Writer
	opts.Put = c.put
	err = c.each(func(rec arrow.RecordBatch, shard string) error {
		if w == nil {
			opts.Columns = mds.ColumnsFor(rec.Schema())
			if w, err = mds.NewWriter(opts); err != nil {
				return err
			}
		}
		for row := range int(rec.NumRows()) {
			vals, err := mds.RowValues(rec, row)
			if err == nil {
				err = w.Write(vals)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", shard, err)
			}
			samples++
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	if w == nil {
		return 0, 0, fmt.Errorf("%s has no records", c.in.URI())
	}
	if err := w.Close(); err != nil {
		return 0, 0, err
	}
	return samples, len(w.Index().Shards), nil
}

// rowGroupsPerFile is how many row groups a converted Parquet object holds.
const rowGroupsPerFile = 16

// checkParquetWritable refuses, naming the column and row, a null
// fixed-size list: arrow-go's Parquet writer fails on one with a message
// that names neither ("lists with non-zero length null components").
func checkParquetWritable(rec arrow.RecordBatch, shard string) error {
	for i, col := range rec.Columns() {
		if _, ok := col.DataType().(*arrow.FixedSizeListType); !ok || col.NullN() == 0 {
			continue
		}
		for r := range col.Len() {
			if col.IsNull(r) {
				return fmt.Errorf("%s: column %q is a null fixed-size list in row %d, which the Parquet writer cannot write; fill the nulls, or project the column out (--columns)", shard, rec.ColumnName(i), r)
			}
		}
	}
	return nil
}

// unslicedFSL copies the fixed-size list columns of a slice into arrays of
// their own: arrow-go's Parquet writer writes a sliced fixed-size list
// from its child's first value, not the slice's (a row group after the
// first would repeat the first rows' tensors).
func unslicedFSL(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	cols := rec.Columns()
	var copied []arrow.Array
	for i, col := range cols {
		if _, ok := col.DataType().(*arrow.FixedSizeListType); !ok || col.Data().Offset() == 0 {
			continue
		}
		c, err := array.Concatenate([]arrow.Array{col}, memory.DefaultAllocator)
		if err != nil {
			rec.Release()
			return nil, err
		}
		if copied == nil {
			cols = slices.Clone(cols)
		}
		cols[i] = c
		copied = append(copied, c)
	}
	if copied == nil {
		return rec, nil
	}
	out := array.NewRecordBatch(rec.Schema(), cols, rec.NumRows())
	rec.Release()
	for _, c := range copied {
		c.Release()
	}
	return out, nil
}

// toParquet writes the source as Parquet objects of row groups of about
// shardBytes, then their shardfeed index (index.json last).
func (c *converter) toParquet(shardBytes int64, compression, hashAlgo string) (samples int64, shards int, err error) {
	props, err := parquetProps(compression)
	if err != nil {
		return 0, 0, err
	}
	var (
		buf          bytes.Buffer
		w            *pqarrow.FileWriter
		rowsPerGroup int64
		inFile       int64
		files        int
	)
	flush := func() error {
		if w == nil {
			return nil
		}
		if err := w.Close(); err != nil {
			return err
		}
		w = nil
		name := fmt.Sprintf("part-%05d.parquet", files)
		files++
		return c.put(name, buf.Bytes())
	}
	err = c.each(func(rec arrow.RecordBatch, shard string) error {
		if err := checkParquetWritable(rec, shard); err != nil {
			return err
		}
		if rowsPerGroup == 0 {
			var size int64
			for _, col := range rec.Columns() {
				size += arrowsize.Data(col.Data())
			}
			perRow := max(1, size/max(1, rec.NumRows()))
			rowsPerGroup = max(1, shardBytes/perRow)
		}
		for off := int64(0); off < rec.NumRows(); {
			if w == nil {
				buf.Reset()
				var err error
				if w, err = pqarrow.NewFileWriter(rec.Schema(), &buf, pq.NewWriterProperties(append(props, pq.WithMaxRowGroupLength(rowsPerGroup))...), pqarrow.DefaultWriterProps()); err != nil {
					return err
				}
				inFile = 0
			}
			// One row group at a time: the writer cuts a longer write into
			// row groups itself, as slices unslicedFSL does not see.
			n := min(rec.NumRows()-off, rowsPerGroup-inFile%rowsPerGroup)
			part, err := unslicedFSL(rec.NewSlice(off, off+n))
			if err != nil {
				return err
			}
			err = w.WriteBuffered(part)
			part.Release()
			if err != nil {
				return err
			}
			off += n
			inFile += n
			samples += n
			if inFile == rowsPerGroup*rowGroupsPerFile {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return 0, 0, err
	}
	if files == 0 {
		return 0, 0, fmt.Errorf("%s has no records", c.in.URI())
	}
	f, err := c.formats.Index(c.ctx, c.out, datav1alpha1.FormatParquet, format.IndexOptions{Hash: hashAlgo})
	if err != nil {
		return 0, 0, err
	}
	if err := index.Write(c.ctx, c.out, f); err != nil {
		return 0, 0, err
	}
	return samples, len(f.Shards), nil
}

// parquetProps maps MDS-style compression names to Parquet codecs.
func parquetProps(compression string) ([]pq.WriterProperty, error) {
	algo, levelText, hasLevel := strings.Cut(compression, ":")
	codecs := map[string]compress.Compression{
		"": compress.Codecs.Uncompressed, "zstd": compress.Codecs.Zstd, "gz": compress.Codecs.Gzip,
		"snappy": compress.Codecs.Snappy, "br": compress.Codecs.Brotli,
	}
	codec, ok := codecs[algo]
	if !ok {
		return nil, fmt.Errorf("--compression %q is not supported for Parquet: use zstd, gz, snappy or br", compression)
	}
	props := []pq.WriterProperty{pq.WithCompression(codec)}
	if hasLevel {
		level, err := strconv.Atoi(levelText)
		if err != nil {
			return nil, fmt.Errorf("--compression %q: level %q is not a number", compression, levelText)
		}
		props = append(props, pq.WithCompressionLevel(level))
	}
	return props, nil
}

func readAll(ctx context.Context, st store.Store, key string, off, n int64) ([]byte, error) {
	r, err := st.Get(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Close() }()
	return io.ReadAll(r)
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/spf13/cobra"

	"github.com/shardfeed/shardfeed/sidecar/format/mds"
	"github.com/shardfeed/shardfeed/sidecar/format/parquet"
	"github.com/shardfeed/shardfeed/sidecar/format/text"
	"github.com/shardfeed/shardfeed/sidecar/index"
	"github.com/shardfeed/shardfeed/sidecar/store"
)

func newConvertCommand() *cobra.Command {
	var (
		src                         sourceFlags
		from, to, out, shardSize    string
		compression, hashes, outDir string
	)
	cmd := &cobra.Command{
		Use:   "convert SOURCE_URI --from jsonl|csv|tsv|parquet --to mds --out OUT_URI",
		Short: "Convert a stream's JSON Lines, CSV, TSV or Parquet objects to MDS shards",
		Long: `convert reads every object of the source stream (s3:// or file://) in order
and writes MDS shards (readable by mosaicml-streaming and by shardfeed) to
OUT_URI, with index.json written last: an interrupted conversion leaves no
index that names missing shards. Arrow types map to MDS encodings as
docs/formats.md says; MDS has no nulls, so a null value stops the
conversion with the column and row.`,
		Example: `  shardfeed convert file:///data/chat/ --from jsonl --to mds --out s3://datasets/chat-mds/ --compression zstd:3 --hashes xxh64`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			if to != "mds" {
				return fmt.Errorf("--to %q is not supported: use mds", to)
			}
			limit, err := parseBytes(shardSize)
			if err != nil {
				return fmt.Errorf("--shard-size: %w", err)
			}
			source := store.Source{Endpoint: src.endpoint, Region: src.region, Insecure: src.insecure, CredentialsDir: src.credentialsDir}
			in := source
			in.URI = args[0]
			inStore, err := store.Open(ctx, in)
			if err != nil {
				return err
			}
			dst := source
			dst.URI = out
			outStore, err := store.Open(ctx, dst)
			if err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			c := &converter{ctx: ctx, in: inStore, out: outStore, format: from, stderr: cmd.ErrOrStderr(), tmp: outDir}
			var hashList []string
			if hashes != "" {
				hashList = strings.Split(hashes, ",")
			}
			start := time.Now()
			samples, shards, err := c.run(mds.WriterOptions{Compression: compression, Hashes: hashList, SizeLimit: limit})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %d samples in %d MDS shards (%s)\n", outStore.URI(), samples, shards, time.Since(start).Round(time.Millisecond))
			return err
		},
	}
	src.add(cmd)
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "format of the source objects: jsonl, csv, tsv or parquet")
	f.StringVar(&to, "to", "mds", "output format: mds")
	f.StringVar(&out, "out", "", "output stream URI (s3:// or file://), reached with the same endpoint and credentials")
	f.StringVar(&shardSize, "shard-size", "64MiB", "raw size at which an MDS shard is closed")
	f.StringVar(&compression, "compression", "", "shard compression: zstd, gz, br or snappy, with an optional :level (zstd:3)")
	f.StringVar(&hashes, "hashes", "xxh64", "comma-separated hash algorithms recorded per shard")
	f.StringVar(&outDir, "temp-dir", "", "directory for source objects while they are scanned")
	_ = cmd.MarkFlagRequired("from")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

// converter streams a source's records into an MDS writer.
type converter struct {
	ctx     context.Context
	in, out store.Store
	format  string
	stderr  io.Writer
	tmp     string
	// The Parquet object last read: its row groups come one after another.
	lastKey  string
	lastData []byte
}

func (c *converter) run(opts mds.WriterOptions) (samples int64, shards int, err error) {
	f, err := index.Build(c.ctx, c.in, c.format, index.BuildOptions{TempDir: c.tmp, Progress: func(done, total int, _ string) {
		if done == total {
			_, _ = fmt.Fprintf(c.stderr, "scanned %d objects\n", total)
		}
	}})
	if err != nil {
		return 0, 0, err
	}
	progress := progressPrinter(c.stderr)
	var w *mds.Writer
	opts.Put = func(name string, data []byte) error {
		return c.out.Put(c.ctx, name, bytes.NewReader(data), int64(len(data)))
	}
	for i, e := range f.Shards {
		recs, err := c.decode(f, e)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", e.Name, err)
		}
		for _, rec := range recs {
			if w == nil {
				opts.Columns = mds.ColumnsFor(rec.Schema())
				if w, err = mds.NewWriter(opts); err != nil {
					return 0, 0, err
				}
			}
			for row := range int(rec.NumRows()) {
				vals, err := mds.RowValues(rec, row)
				if err == nil {
					err = w.Write(vals)
				}
				if err != nil {
					return 0, 0, fmt.Errorf("%s: %w", e.Name, err)
				}
				samples++
			}
			rec.Release()
		}
		progress(i+1, len(f.Shards), e.Name)
	}
	if w == nil {
		return 0, 0, fmt.Errorf("%s has no records", c.in.URI())
	}
	if err := w.Close(); err != nil {
		return 0, 0, err
	}
	return samples, len(w.Index().Shards), nil
}

func (c *converter) decode(f *index.File, e index.Entry) ([]arrow.RecordBatch, error) {
	if f.Format == "parquet" {
		if c.lastKey != e.Object {
			data, err := readAll(c.ctx, c.in, e.Object, 0, -1)
			if err != nil {
				return nil, err
			}
			c.lastKey, c.lastData = e.Object, data
		}
		return parquet.ReadRowGroup(c.ctx, c.lastData, e.Part, nil)
	}
	data, err := readAll(c.ctx, c.in, e.Object, e.Offset, e.Length)
	if err != nil {
		return nil, err
	}
	return text.Decode(data, f.Format, f.Schema, nil)
}

func readAll(ctx context.Context, st store.Store, key string, off, n int64) ([]byte, error) {
	r, err := st.Get(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Close() }()
	return io.ReadAll(r)
}

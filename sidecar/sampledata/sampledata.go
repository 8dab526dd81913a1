// Package sampledata writes small datasets whose every value says which
// sample it is, in each shard format, for the tests and benchmarks of the
// data plane: sample i of stream s has id i, text "s-i" and tokens
// [10i, 10i+1, 10i+2, 10i+3].
package sampledata

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	"image/jpeg"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
	"github.com/shardfeed/shardfeed/sidecar/format/mds"
)

// Text is the text of sample i of stream.
func Text(stream string, i int64) string { return fmt.Sprintf("%s-%d", stream, i) }

// Token is token j of sample i.
func Token(i int64, j int) int32 { return int32(i*10 + int64(j)) } //nolint:gosec // test data stays small

// MDS writes n samples of stream as MDS shards of about shardBytes raw
// bytes into dir, with tokens as ndarray:int32:4.
func MDS(dir, stream string, n int, shardBytes int64, compression string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	w, err := mds.NewWriter(mds.WriterOptions{
		Columns:     []mds.Column{{Name: "id", Encoding: "int64"}, {Name: "text", Encoding: "str"}, {Name: "tokens", Encoding: "ndarray:int32:4"}},
		Compression: compression, Hashes: []string{"xxh64"}, SizeLimit: shardBytes,
		Put: func(name string, data []byte) error { return os.WriteFile(filepath.Join(dir, name), data, 0o644) },
	})
	if err != nil {
		return err
	}
	for i := range int64(n) {
		tok := make([]byte, 16)
		for j := range 4 {
			binary.LittleEndian.PutUint32(tok[4*j:], uint32(Token(i, j))) //nolint:gosec // bit pattern
		}
		if err := w.Write(map[string]any{"id": i, "text": Text(stream, i), "tokens": mds.NDArray{DType: "int32", Shape: []int64{4}, Data: tok}}); err != nil {
			return err
		}
	}
	return w.Close()
}

// Parquet writes n samples of stream as files of filesRows rows in row
// groups of groupRows into dir, tokens as list<int32>, and indexes them.
func Parquet(ctx context.Context, dir, stream string, n, fileRows, groupRows int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "text", Type: arrow.BinaryTypes.String},
		{Name: "tokens", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)},
	}, nil)
	for f := 0; f*fileRows < n; f++ {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		lb := b.Field(2).(*array.ListBuilder)
		vb := lb.ValueBuilder().(*array.Int32Builder)
		for i := int64(f * fileRows); i < int64(min(n, (f+1)*fileRows)); i++ {
			b.Field(0).(*array.Int64Builder).Append(i)
			b.Field(1).(*array.StringBuilder).Append(Text(stream, i))
			lb.Append(true)
			for j := range 4 {
				vb.Append(Token(i, j))
			}
		}
		rec := b.NewRecordBatch()
		b.Release()
		var buf bytes.Buffer
		w, err := pqarrow.NewFileWriter(schema, &buf, pq.NewWriterProperties(pq.WithMaxRowGroupLength(int64(groupRows))), pqarrow.DefaultWriterProps())
		if err == nil {
			err = w.Write(rec)
		}
		rec.Release()
		if err == nil {
			err = w.Close()
		}
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%05d.parquet", f)), buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return buildIndex(ctx, dir, datav1alpha1.FormatParquet, 0)
}

// JSONL writes n samples of stream (id and text) as one JSON Lines file
// cut into shards of about shardBytes, and indexes it.
func JSONL(ctx context.Context, dir, stream string, n int, shardBytes int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i := range int64(n) {
		if err := enc.Encode(map[string]any{"id": i, "text": Text(stream, i)}); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "data.jsonl"), buf.Bytes(), 0o644); err != nil {
		return err
	}
	return buildIndex(ctx, dir, datav1alpha1.FormatJSONL, shardBytes)
}

func buildIndex(ctx context.Context, dir string, kind datav1alpha1.ShardFormat, shardBytes int64) error {
	st, err := stores.Open(ctx, store.Source{URI: "file://" + dir + "/"})
	if err != nil {
		return err
	}
	f, err := formats.Default().Index(ctx, st, kind, format.IndexOptions{ShardBytes: shardBytes, TempDir: dir})
	if err != nil {
		return err
	}
	return index.Write(ctx, st, f)
}

// Stream is one stream of a Manifest.
type Stream struct {
	Name, URI, Format string
	// Endpoint of an S3 store over plain HTTP (MinIO), if any.
	Endpoint string
	// Extra is YAML added to the stream, e.g. "proportion: \"0.5\"".
	Extra string
}

// Manifest returns a TrainingDataset manifest; spec is YAML added to the
// spec after the streams (numSplits, globalBatchSize, …).
func Manifest(name string, streams []Stream, spec string) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "apiVersion: data.shardfeed.io/v1alpha1\nkind: TrainingDataset\nmetadata: {name: %s}\nspec:\n  streams:\n", name)
	for _, s := range streams {
		src := fmt.Sprintf("uri: %q", s.URI)
		if s.Endpoint != "" {
			src += fmt.Sprintf(", endpoint: %q, insecure: true", s.Endpoint)
		}
		fmt.Fprintf(&b, "  - name: %s\n    format: %s\n    source: {%s}\n", s.Name, s.Format, src)
		if s.Extra != "" {
			fmt.Fprintf(&b, "    %s\n", s.Extra)
		}
	}
	b.WriteString(spec)
	return b.String()
}

// Tokens writes n samples of width int32 tokens (as ndarray:int32:width)
// and an id as raw MDS shards of about shardBytes into dir.
func Tokens(dir string, n, width int, shardBytes int64) error {
	return writeMDS(dir, shardBytes, []mds.Column{{Name: "id", Encoding: "int64"}, {Name: "tokens", Encoding: fmt.Sprintf("ndarray:int32:%d", width)}},
		n, func(i int64) map[string]any {
			tok := make([]byte, 4*width)
			for j := range width {
				binary.LittleEndian.PutUint32(tok[4*j:], uint32(i)+uint32(j)) //nolint:gosec // bit pattern
			}
			return map[string]any{"id": i, "tokens": mds.NDArray{DType: "int32", Shape: []int64{int64(width)}, Data: tok}}
		})
}

// Blobs writes n samples of a size-byte blob (as MDS bytes) and an id as
// raw MDS shards of about shardBytes into dir.
func Blobs(dir string, n, size int, shardBytes int64) error {
	return writeMDS(dir, shardBytes, []mds.Column{{Name: "id", Encoding: "int64"}, {Name: "blob", Encoding: "bytes"}},
		n, func(i int64) map[string]any {
			blob := make([]byte, size)
			for j := range blob {
				blob[j] = byte(i) ^ byte(j)
			}
			return map[string]any{"id": i, "blob": blob}
		})
}

// ImageColor is the flat colour of image sample i (Images).
func ImageColor(i int64) [3]byte { return [3]byte{byte(i * 37), byte(i * 11), byte(255 - i*5)} } //nolint:gosec // a bit pattern

// Images writes n samples of a w×h JPEG of one flat colour (ImageColor) as
// MDS jpeg, and an id, as raw MDS shards of about shardBytes into dir.
func Images(dir string, n, w, h int, shardBytes int64) error {
	return writeMDS(dir, shardBytes, []mds.Column{{Name: "id", Encoding: "int64"}, {Name: "jpg", Encoding: "jpeg"}},
		n, func(i int64) map[string]any {
			c := ImageColor(i)
			img := image.NewRGBA(image.Rect(0, 0, w, h))
			for p := 0; p < len(img.Pix); p += 4 {
				img.Pix[p], img.Pix[p+1], img.Pix[p+2], img.Pix[p+3] = c[0], c[1], c[2], 255
			}
			var b bytes.Buffer
			if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 95}); err != nil {
				panic(err)
			}
			return map[string]any{"id": i, "jpg": b.Bytes()}
		})
}

func writeMDS(dir string, shardBytes int64, cols []mds.Column, n int, sample func(int64) map[string]any) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	w, err := mds.NewWriter(mds.WriterOptions{Columns: cols, Hashes: []string{"xxh3_64"}, SizeLimit: shardBytes,
		Put: func(name string, data []byte) error { return os.WriteFile(filepath.Join(dir, name), data, 0o644) }})
	if err != nil {
		return err
	}
	for i := range int64(n) {
		if err := w.Write(sample(i)); err != nil {
			return err
		}
	}
	return w.Close()
}

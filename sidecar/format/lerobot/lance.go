package lerobot

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/lance"
)

// LeRobot's Lance layout (info.json's storage_format "lance", as
// lerobot-lancedb's converter writes it and its LanceDBDataset, a copy of
// LeRobot's own Lance reader, reads it): meta/ as in the v3.0 layout, and
//
//	frames.lance/  a row per frame, row N the dataset's frame N: the
//	               data files' columns, dots in names made underscores,
//	               vectors fixed-size lists
//	videos.lance/  a row per MP4 file of the v3.0 layout (video_key,
//	               chunk_index, file_index), its bytes verbatim in the
//	               blob v2 column video_bytes
//
// A shard's data rows are the frames table's pieces of its episode (a
// piece per fragment), its clips ranges of the videos' blobs: the MP4's
// offsets shifted by where its blob begins.
const (
	StorageLance = "lance"
	FramesTable  = "frames.lance/"
	VideosTable  = "videos.lance/"
	videoBlob    = "video_bytes"
)

// lanceName is a feature's column in the frames table.
func lanceName(key string) string { return strings.ReplaceAll(key, ".", "_") }

// lanceLayout is a dataset's Lance tables, opened for indexing.
type lanceLayout struct {
	frames *lance.Table
	// videos locates each video file (by its v3.0 path) in the videos
	// table's blobs.
	videos map[string]lance.BlobLocation
	// keys maps the frames table's columns to the features they hold.
	keys map[string]string
}

func (l *lanceLayout) close() {
	if l != nil && l.frames != nil {
		l.frames.Close()
	}
}

// openLance opens a dataset's frames and videos tables.
func openLance(ctx context.Context, st store.Store, info *Info, opts format.IndexOptions) (*lanceLayout, error) {
	if keys := info.ImageKeys(); len(keys) > 0 {
		return nil, fmt.Errorf("image features %v in LeRobot's Lance layout: its frames table holds no images LeRobot's Lance reader reads (LanceDBDataset refuses them too); store the cameras as video", keys)
	}
	l := &lanceLayout{keys: map[string]string{}}
	for _, k := range info.Keys() {
		l.keys[lanceName(k)] = k
		if f := info.Features[k]; f.DType != DTypeVideo && f.DType != DTypeImage && len(f.Shape) > 1 {
			return nil, fmt.Errorf("feature %q of shape %v: LeRobot's Lance layout stores it as lists of lists (Hugging Face's Array%dD), which shardfeed's Lance reader does not read (one list level); leave it out of the dataset, or read the dataset in LeRobot's Parquet layout", k, f.Shape, len(f.Shape))
		}
	}
	var err error
	if l.frames, err = lance.OpenTable(ctx, st, FramesTable, nil, opts); err != nil {
		return nil, fmt.Errorf("the frames table: %w", err)
	}
	if rows := l.frames.Rows(); info.TotalFrames != int64(rows) { //nolint:gosec // a table's rows
		l.close()
		return nil, fmt.Errorf("the frames table %s holds %d rows, and %s says %d frames: its row N is frame N", FramesTable, rows, InfoPath, info.TotalFrames)
	}
	if info.VideoPath == nil || len(info.VideoKeys()) == 0 {
		return l, nil
	}
	if l.videos, err = videoBlobs(ctx, st, info, opts); err != nil {
		l.close()
		return nil, fmt.Errorf("the videos table: %w", err)
	}
	return l, nil
}

// videoBlobs locates each video file of the videos table, by the path
// the v3.0 layout would give it.
func videoBlobs(ctx context.Context, st store.Store, info *Info, opts format.IndexOptions) (map[string]lance.BlobLocation, error) {
	t, err := lance.OpenTable(ctx, st, VideosTable, []string{"video_key", "chunk_index", "file_index", videoBlob}, opts)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	rec, err := t.Read(ctx, 0, t.Rows())
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	keys, ok1 := rec.Column(0).(*array.String)
	chunks, ok2 := rec.Column(1).(*array.Int64)
	files, ok3 := rec.Column(2).(*array.Int64)
	if !ok1 || !ok2 || !ok3 {
		return nil, fmt.Errorf("video_key, chunk_index and file_index are %s, %s and %s, not a string and two int64s", rec.Column(0).DataType(), rec.Column(1).DataType(), rec.Column(2).DataType())
	}
	locs, err := t.Blobs(ctx, videoBlob, 0, t.Rows())
	if err != nil {
		return nil, err
	}
	out := make(map[string]lance.BlobLocation, len(locs))
	for i, loc := range locs {
		if keys.IsNull(i) || chunks.IsNull(i) || files.IsNull(i) || loc.Null {
			return nil, fmt.Errorf("row %d names no video file, or holds none", i)
		}
		path, err := Expand(*info.VideoPath, chunks.Value(i), files.Value(i), keys.Value(i))
		if err != nil {
			return nil, fmt.Errorf("video_path: %w", err)
		}
		if _, dup := out[path]; dup {
			return nil, fmt.Errorf("rows name %s twice", path)
		}
		out[path] = loc
	}
	return out, nil
}

// dataSchema is the frames table's schema named by the features.
func (l *lanceLayout) dataSchema() *arrow.Schema {
	in := l.frames.Schema()
	fields := make([]arrow.Field, in.NumFields())
	for i, f := range in.Fields() {
		if k, ok := l.keys[f.Name]; ok {
			f.Name = k
		}
		fields[i] = arrow.Field{Name: f.Name, Type: f.Type, Nullable: f.Nullable}
	}
	return arrow.NewSchema(fields, nil)
}

// readPieces decodes an episode's data rows from its frames table pieces
// (parts: each piece's, in order), of the columns (features) asked for.
func (d *decoder) readPieces(parts [][]byte, columns []string) (map[string]arrow.Array, error) {
	ep := d.e.Episode
	names := make([]string, len(columns))
	for i, c := range columns {
		names[i] = lanceName(c)
	}
	chunks := make([][]arrow.Array, len(columns))
	defer func() {
		for _, cs := range chunks {
			for _, c := range cs {
				c.Release()
			}
		}
	}()
	for j := range ep.Pieces {
		p := &ep.Pieces[j]
		n := len(p.Ranges) + len(p.Files)
		if len(parts) < n {
			return nil, fmt.Errorf("frames table piece %d: %d parts, want %d", j, len(parts), n)
		}
		recs, err := d.r.frames.Read(p, parts[:n], names)
		parts = parts[n:]
		if err != nil {
			return nil, fmt.Errorf("frames table piece %d: %w", j, err)
		}
		for _, rec := range recs {
			for k := range columns {
				col := rec.Column(k)
				col.Retain()
				chunks[k] = append(chunks[k], col)
			}
			rec.Release()
		}
	}
	out := map[string]arrow.Array{}
	for k, c := range columns {
		all, err := array.Concatenate(chunks[k], memory.DefaultAllocator)
		if err != nil {
			for _, a := range out {
				a.Release()
			}
			return nil, fmt.Errorf("column %q: %w", c, err)
		}
		if int64(all.Len()) != ep.Length {
			all.Release()
			return nil, fmt.Errorf("the frames table's pieces hold %d rows, the episode %d frames", all.Len(), ep.Length)
		}
		out[c] = all
	}
	return out, nil
}

// pieceParts are the parts of an episode's frames table pieces.
func (r *reader) pieceParts(ep *indexfile.LeRobotEpisode) []format.Part {
	var out []format.Part
	for j := range ep.Pieces {
		out = append(out, r.frames.ShardParts(&ep.Pieces[j])...)
	}
	return out
}

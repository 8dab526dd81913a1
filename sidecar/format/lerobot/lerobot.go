// Package lerobot reads LeRobot datasets (format: lerobot): robot
// episodes as LeRobot's v3.0 layout stores them, data Parquet files of
// many episodes' frames and, per camera, MP4 files of many episodes'
// video. A sample is one frame of an episode, as LeRobotDataset's item
// is: its data columns, its task string, each camera's frame (a video's,
// or an image feature's PNG in the data files) decoded to
// uint8 (C, H, W), and, for the keys a stream windows
// (spec.streams[].lerobot.deltaTimestamps), the frames at the window's
// offsets, held at the episode's edges, with a KEY_is_pad mask
// (docs/formats.md, LeRobot).
//
// A shard is one episode, or a run of its frames where its decoded frames
// would be large: its parts are the data file's row groups that hold the
// episode and the file's footer, and per camera the video file's movie
// box and the episode's samples, never a whole video file.
package lerobot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/lance"
	"github.com/shardfeed/shardfeed/sidecar/format/parquet"
	"github.com/shardfeed/shardfeed/sidecar/images"
	"github.com/shardfeed/shardfeed/sidecar/video"
)

// Format is the lerobot format.
type Format struct{}

// TaskColumn is the column of each frame's task string, as
// LeRobotDataset's item "task".
const TaskColumn = "task"

const episodesOption = "episodes"

// Kind is the format's name in the API.
func (Format) Kind() datav1alpha1.ShardFormat { return datav1alpha1.FormatLeRobot }

// IndexHelp is shardfeed index's help of a lerobot stream.
func (Format) IndexHelp() string {
	return `URI is a LeRobot dataset's root (meta/info.json, LeRobot's v3.0
layout): one shard per episode, or per run of an episode's frames where
its decoded frames (every camera's, RGB) pass --shard-size (64 MiB), each
with the data file's row groups that hold its frames and, per camera, the
video file's movie box and the episode's samples from the keyframe its
first frame decodes from. --episodes selects episodes by episode_index
("0-9,15"). A dataset in LeRobot's Lance layout (storage_format "lance":
frames.lance/ and videos.lance/, lerobot-lancedb's converter) is read
from its frames table's rows and its videos' blobs, by range.`
}

// Options lists the format's own index option: the episodes to index.
func (Format) Options() []format.Option {
	return []format.Option{{Flag: episodesOption, Field: "spec.streams[].lerobot.episodes",
		Help: `the episodes to index, by episode_index: "0-9,15" (default: every one)`,
		For:  "a LeRobot dataset's episodes",
		Spec: func(s *datav1alpha1.Stream) string {
			if s.LeRobot == nil {
				return ""
			}
			return s.LeRobot.Episodes
		},
		Indexed: func(f *indexfile.File) string {
			if f.LeRobot == nil {
				return ""
			}
			return f.LeRobot.Episodes
		}}}
}

// Open reads the dataset's columns from its index.
func (Format) Open(l *index.Layout) (format.Reader, error) {
	f, err := format.FileOf(l)
	if err != nil {
		return nil, err
	}
	if f.LeRobot == nil {
		return nil, fmt.Errorf("a lerobot index names its dataset: re-run shardfeed index --format lerobot")
	}
	data, err := format.DecodeSchema(f.LeRobot.ArrowSchema)
	if err != nil {
		return nil, fmt.Errorf("%w; re-run shardfeed index", err)
	}
	r := &reader{file: f, data: data, tolerance: DefaultTolerance}
	if lx := f.LeRobot.Frames; lx != nil {
		if r.frames, err = lance.NewRows(lx); err != nil {
			return nil, fmt.Errorf("the frames table: %w", err)
		}
	}
	if err := r.setSchema(); err != nil {
		return nil, err
	}
	return r, nil
}

// encodeSchema is the data files' schema as the index holds it.
func encodeSchema(s *arrow.Schema) (string, error) {
	if s == nil {
		return "", fmt.Errorf("no data file was read")
	}
	return format.EncodeSchema(s)
}

type reader struct {
	file *indexfile.File
	// data is the data files' columns; schema what a shard decodes to.
	data, schema *arrow.Schema
	windows      *Windows
	// Tolerance is how far a decoded frame's time may be from the one
	// asked for, in seconds.
	tolerance float64
	// frameSize, when set, is the size every camera's frames are
	// resized and cropped to.
	frameSize *images.Spec
	// clips serves the cameras as clips for the trainer to decode.
	clips bool
	// arrays are the fixed-size types the features of two or more axes
	// are served as (arrayType), by name.
	arrays map[string]arrow.DataType
	// torch are the data columns whose values are cast to the types
	// LeRobotDataset gives them (torchType), by name.
	torch map[string]arrow.DataType
	// frames reads the frames table of LeRobot's Lance layout (nil: the
	// data rows are Parquet row groups).
	frames *lance.Rows
}

// SetWindows serves windows of the keys deltas names (seconds, as
// LeRobotDataset's delta_timestamps), decoded frames within tolerance
// seconds of their times (0: LeRobot's default).
func (r *reader) SetWindows(deltas map[string][]float64, tolerance float64) error {
	if tolerance == 0 {
		tolerance = DefaultTolerance
	}
	w, err := NewWindows(deltas, r.file.LeRobot.FPS, tolerance)
	if err != nil {
		return err
	}
	r.windows, r.tolerance = w, tolerance
	return r.setSchema()
}

// SetFrameSize serves every camera's frames resized and cropped as
// spec says, as an image column's are.
func (r *reader) SetFrameSize(spec images.Spec) error {
	if r.clips {
		return errors.New("frames: the stream serves clips (cameras: Clips), which the trainer decodes")
	}
	if spec.Draft {
		return errors.New("frames: draft decodes JPEGs smaller; video frames are decoded whole")
	}
	if err := spec.Check(); err != nil {
		return fmt.Errorf("frames: %w", err)
	}
	r.frameSize = &spec
	return r.setSchema()
}

// frameShape is the height and width a camera's frames or an image
// feature's images of height × width are served at.
func (r *reader) frameShape(height, width int) (int, int) {
	if r.frameSize != nil {
		return r.frameSize.Height, r.frameSize.Width
	}
	return height, width
}

// CheckColumns refuses, before any shard is read, a served camera this
// binary cannot decode: a build without FFmpeg, or a codec it lacks (a
// stream of clips, which the trainer decodes, needs no decoder here).
// A codec no build decodes is named before a decoder this build lacks.
func (r *reader) CheckColumns(columns []string) error {
	for _, m := range r.file.LeRobot.Images {
		if m.Depth && (columns == nil || slices.Contains(columns, m.Key)) {
			return fmt.Errorf("image feature %q is a single-channel image (a depth map): shardfeed serves RGB images only yet; leave it out with spec.streams[].columns", m.Key)
		}
	}
	var noDecoder error
	for _, v := range r.file.LeRobot.Videos {
		if columns != nil && !slices.Contains(columns, v.Key) {
			continue
		}
		if v.Depth {
			return fmt.Errorf("camera %q is a depth map (LeRobot's is_depth_map): shardfeed does not serve depth maps yet; leave it out with spec.streams[].columns", v.Key)
		}
		if r.clips {
			continue // the trainer decodes clips: this binary need not
		}
		err := video.CanDecode(v.Codec)
		if err == nil {
			continue
		}
		err = fmt.Errorf("camera %q (%s, %dx%d): %w", v.Key, v.Codec, v.Width, v.Height, err)
		if !errors.Is(err, video.ErrNoDecoder) {
			return err
		}
		noDecoder = cmp.Or(noDecoder, err)
	}
	return noDecoder
}

// video returns camera key's index in the dataset's videos, or -1.
func (r *reader) video(key string) int {
	return slices.IndexFunc(r.file.LeRobot.Videos, func(v indexfile.LeRobotVideo) bool { return v.Key == key })
}

// setSchema sets the served schema: the data columns, the task, each
// camera's frames; windowed keys as windows, with their masks.
func (r *reader) setSchema() error {
	var fields []arrow.Field
	r.arrays, r.torch = map[string]arrow.DataType{}, map[string]arrow.DataType{}
	add := func(f arrow.Field, inner []int) error {
		offsets := r.offsets(f.Name)
		if offsets == nil {
			if len(inner) > 1 {
				f.Metadata = shapeMeta(inner)
			}
			fields = append(fields, f)
			return nil
		}
		elem, dims, err := windowElem(f.Type)
		if err != nil {
			return fmt.Errorf("deltaTimestamps[%q]: %w", f.Name, err)
		}
		size := 1
		for _, n := range dims {
			size *= n
		}
		if inner == nil {
			inner = dims
		}
		shape := append([]int{len(offsets)}, inner...)
		fields = append(fields,
			arrow.Field{Name: f.Name, Type: arrow.FixedSizeListOf(int32(len(offsets)*size), elem), Metadata: shapeMeta(shape)},                                               //nolint:gosec // bounded by MaxWindow and the shapes
			arrow.Field{Name: f.Name + PadSuffix, Type: arrow.FixedSizeListOf(int32(len(offsets)), arrow.FixedWidthTypes.Boolean), Metadata: shapeMeta([]int{len(offsets)})}) //nolint:gosec // bounded by MaxWindow
		return nil
	}
	for _, f := range r.data.Fields() {
		if strings.HasSuffix(f.Name, PadSuffix) || f.Name == TaskColumn {
			return fmt.Errorf("the data files have a column %q: shardfeed serves its own by that name", f.Name)
		}
		var inner []int
		if shape, ok := r.file.LeRobot.Shapes[f.Name]; ok {
			t, err := arrayType(f.Type, shape)
			if err != nil {
				return fmt.Errorf("feature %q of shape %v: the data files hold %w", f.Name, shape, err)
			}
			r.arrays[f.Name] = t
			f, inner = arrow.Field{Name: f.Name, Type: t}, shape
		}
		// LeRobotDataset's tensors are float32 and int64 whatever the
		// Parquet stores; LeRobot's Lance reader gives the stored types.
		if t := torchType(f.Type); r.frames == nil && r.image(f.Name) < 0 && !arrow.TypeEqual(t, f.Type) {
			r.torch[f.Name] = t
			f = arrow.Field{Name: f.Name, Type: t, Metadata: f.Metadata}
		}
		if k := r.image(f.Name); k >= 0 && !r.file.LeRobot.Images[k].Depth {
			// Served decoded, as a camera's frames (a depth map is
			// refused by CheckColumns where it is served).
			if err := checkImageColumn(f.Type); err != nil {
				return fmt.Errorf("image feature %q: the data files hold %w", f.Name, err)
			}
			m := r.file.LeRobot.Images[k]
			h, w := r.frameShape(m.Height, m.Width)
			f = arrow.Field{Name: f.Name, Type: arrow.FixedSizeListOf(int32(3*h*w), arrow.PrimitiveTypes.Uint8)} //nolint:gosec // sizes checked by the index and images.Spec
			inner = []int{3, h, w}
		}
		if err := add(f, inner); err != nil {
			return err
		}
	}
	fields = append(fields, arrow.Field{Name: TaskColumn, Type: arrow.BinaryTypes.String})
	for _, v := range r.file.LeRobot.Videos {
		if r.clips {
			if len(r.data.FieldIndices(v.Key+TimeSuffix)) > 0 {
				return fmt.Errorf("the data files have a column %q: shardfeed serves its clips' times by that name", v.Key+TimeSuffix)
			}
			fields = append(fields, r.clipFields(v.Key)...)
			continue
		}
		h, w := r.frameShape(v.Height, v.Width)
		f := arrow.Field{Name: v.Key, Type: arrow.FixedSizeListOf(int32(3*h*w), arrow.PrimitiveTypes.Uint8)} //nolint:gosec // sizes checked by the index and images.Spec
		if err := add(f, []int{3, h, w}); err != nil {
			return err
		}
	}
	if r.windows != nil {
		for _, k := range r.windows.Keys {
			if !slices.ContainsFunc(fields, func(f arrow.Field) bool { return f.Name == k }) {
				return fmt.Errorf("deltaTimestamps names %q, which the dataset does not have: its keys are %s", k, names(fields))
			}
		}
	}
	r.schema = arrow.NewSchema(fields, nil)
	return nil
}

func names(fields []arrow.Field) string {
	var out []string
	for _, f := range fields {
		out = append(out, f.Name)
	}
	return strings.Join(out, ", ")
}

func shapeMeta(shape []int) arrow.Metadata {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.Itoa(d)
	}
	return arrow.NewMetadata([]string{format.MetaShape}, []string{strings.Join(dims, ",")})
}

// windowElem is the element type of a windowed column and its shape
// per frame: a number is one value (no axes), a fixed-size list of them
// its length, fixed-size lists of those (a 2-D feature, as Hugging Face's
// Array2D stores it) their lengths.
func windowElem(t arrow.DataType) (arrow.DataType, []int, error) {
	switch t := t.(type) {
	case *arrow.FixedSizeListType:
		if elem, dims, err := windowElem(t.Elem()); err == nil && len(dims) < maxWindowAxes {
			return elem, append([]int{int(t.Len())}, dims...), nil
		}
	case arrow.FixedWidthDataType:
		if t.ID() != arrow.BOOL {
			return t, nil, nil
		}
	}
	return nil, nil, fmt.Errorf("a window of a %s column is not served: windows are of numbers and fixed-size lists of them (nested up to %d deep)", t, maxWindowAxes)
}

// maxWindowAxes bounds the axes of a windowed feature's frame.
const maxWindowAxes = 8

func (r *reader) offsets(key string) []int {
	if r.windows == nil {
		return nil
	}
	return r.windows.Offsets[key]
}

// Parts are the row groups, the data file's footer, then each camera's
// movie box and samples.
func (r *reader) Parts(i int) []format.Part {
	e := r.file.Shard(i)
	out := make([]format.Part, 0, len(e.Ranges)+1+2*len(e.Episode.Clips))
	if r.frames != nil {
		out = r.pieceParts(e.Episode)
	} else {
		for _, g := range e.Ranges {
			out = append(out, format.Part{Key: g.Object, Size: g.Length, Hash: g.Hash, Range: true, Offset: g.Offset})
		}
		out = append(out, format.Part{Key: e.Object, Size: e.FooterLength, Range: true, Offset: e.FooterOffset, Version: e.Hash})
	}
	for _, c := range e.Episode.Clips {
		out = append(out,
			format.Part{Key: c.Movie.Object, Size: c.Movie.Length, Hash: c.Movie.Hash, Range: true, Offset: c.Movie.Offset},
			format.Part{Key: c.Samples.Object, Size: c.Samples.Length, Hash: c.Samples.Hash, Range: true, Offset: c.Samples.Offset})
	}
	return out
}

// Schema is the served schema, from the index.
func (r *reader) Schema(context.Context, format.ReadFunc) (*arrow.Schema, error) {
	return r.schema, nil
}

// Records decodes shard i: its frames' data rows, windows and videos.
func (r *reader) Records(ctx context.Context, i int, parts [][]byte, columns []string) (array.RecordReader, error) {
	e := r.file.Shard(i)
	ep := e.Episode
	data := len(e.Ranges) + 1
	if r.frames != nil {
		data = 0
		for _, p := range ep.Pieces {
			data += len(p.Ranges) + len(p.Files)
		}
	}
	if want := data + 2*len(ep.Clips); len(parts) != want {
		return nil, fmt.Errorf("shard %s has %d parts, want %d", e.Name, len(parts), want)
	}
	schema := r.schema
	if columns != nil {
		var fields []arrow.Field
		for _, c := range columns {
			k := schema.FieldIndices(c)
			if len(k) == 0 {
				return nil, fmt.Errorf("no column %q: the stream's columns are %s", c, names(schema.Fields()))
			}
			fields = append(fields, schema.Field(k[0]))
		}
		schema = arrow.NewSchema(fields, nil)
	}
	d := &decoder{r: r, e: e, ctx: ctx}
	defer d.release()
	if err := d.readData(parts[:data], schema); err != nil {
		return nil, err
	}
	d.clips = parts[data:]
	cols := make([]arrow.Array, 0, schema.NumFields())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for _, f := range schema.Fields() {
		col, err := d.column(f)
		if err != nil {
			return nil, fmt.Errorf("shard %s, column %q: %w", e.Name, f.Name, err)
		}
		cols = append(cols, col)
	}
	rec := array.NewRecordBatch(schema, cols, e.Samples)
	defer rec.Release()
	return array.NewRecordReader(schema, []arrow.RecordBatch{rec})
}

// decoder decodes one shard.
type decoder struct {
	r   *reader
	e   *indexfile.Entry
	ctx context.Context
	// rows are the episode's data rows, by frame within the episode.
	rows  map[string]arrow.Array
	clips [][]byte
	// resizer and packed resize frames where the stream sets their size.
	resizer *images.Decoder
	packed  []byte
	// decoded is an image feature's image, decoded at its own size.
	decoded []byte
	// clipCols are each camera's clips and times, where it serves clips.
	clipCols map[string][2]arrow.Array
}

func (d *decoder) release() {
	for _, c := range d.rows {
		c.Release()
	}
	for _, c := range d.clipCols {
		c[0].Release()
		c[1].Release()
	}
}

// dataColumns are the data columns the served columns need.
func (d *decoder) dataColumns(schema *arrow.Schema) []string {
	var out []string
	need := func(c string) {
		if !slices.Contains(out, c) && len(d.r.data.FieldIndices(c)) > 0 {
			out = append(out, c)
		}
	}
	for _, f := range schema.Fields() {
		name := strings.TrimSuffix(f.Name, PadSuffix)
		if key, ok := strings.CutSuffix(name, TimeSuffix); ok && d.r.clips && d.r.video(key) >= 0 {
			name = key
		}
		switch {
		case name == TaskColumn:
			need("task_index")
		case d.r.video(name) >= 0:
			need("timestamp")
		default:
			need(name)
		}
	}
	return out
}

// readData decodes the row groups (parts, then the footer) and keeps
// the episode's rows of the columns needed.
func (d *decoder) readData(parts [][]byte, schema *arrow.Schema) error {
	e, ep := d.e, d.e.Episode
	columns := d.dataColumns(schema)
	d.rows = map[string]arrow.Array{}
	if len(columns) == 0 {
		return nil
	}
	if d.r.frames != nil {
		rows, err := d.readPieces(parts, columns)
		if err != nil {
			return err
		}
		for k, c := range columns {
			if d.rows[c], err = d.r.asServed(d.ctx, c, rows[c], ep.Index); err != nil {
				delete(d.rows, c)
				for _, later := range columns[k+1:] {
					rows[later].Release()
				}
				return err
			}
		}
		return nil
	}
	tail := parts[len(parts)-1]
	chunks := map[string][]arrow.Array{}
	defer func() {
		for _, cs := range chunks {
			for _, c := range cs {
				c.Release()
			}
		}
	}()
	var rows int64
	for g, rg := range e.Ranges {
		recs, err := parquet.ReadRowGroupRange(d.ctx, format.FootedPart{Size: e.ObjectSize, Tail: tail, Index: ep.RowGroups[g], Offset: rg.Offset, Data: parts[g]}, columns)
		if err != nil {
			return fmt.Errorf("%s: %w", rg.Object, err)
		}
		for _, rec := range recs {
			for k, c := range columns {
				col := rec.Column(k)
				col.Retain()
				chunks[c] = append(chunks[c], col)
			}
			rows += rec.NumRows()
			rec.Release()
		}
	}
	from := ep.Row - ep.RowGroupRow
	if from+ep.Length > rows {
		return fmt.Errorf("the row groups hold %d rows from row %d of %s, short of the episode's %d frames from row %d", rows, ep.RowGroupRow, e.Object, ep.Length, ep.Row)
	}
	for _, c := range columns {
		all, err := array.Concatenate(chunks[c], memory.DefaultAllocator)
		if err != nil {
			return fmt.Errorf("column %q: %w", c, err)
		}
		rows := array.NewSlice(all, from, from+ep.Length)
		all.Release()
		if d.rows[c], err = d.r.asServed(d.ctx, c, rows, ep.Index); err != nil {
			return err
		}
	}
	return nil
}

// asServed is column c of an episode's data rows as it is served: a
// feature of two or more axes as fixed-size lists of its shape, in the
// type LeRobotDataset's tensors have. It takes rows over.
func (r *reader) asServed(ctx context.Context, c string, rows arrow.Array, episode int64) (arrow.Array, error) {
	if t, ok := r.arrays[c]; ok {
		fixed, err := asArray(rows, t)
		rows.Release()
		if err != nil {
			return nil, fmt.Errorf("column %q of episode %d: %w", c, episode, err)
		}
		rows = fixed
	}
	if t, ok := r.torch[c]; ok {
		cast, err := castLeaves(ctx, rows, t)
		rows.Release()
		if err != nil {
			return nil, fmt.Errorf("column %q of episode %d: %w", c, episode, err)
		}
		rows = cast
	}
	return rows, nil
}

// column builds one served column of the shard's frames.
func (d *decoder) column(f arrow.Field) (arrow.Array, error) {
	ep, n := d.e.Episode, d.e.Samples
	if key, ok := strings.CutSuffix(f.Name, PadSuffix); ok && d.r.offsets(key) != nil {
		return d.pad(d.r.offsets(key)), nil
	}
	if d.r.clips {
		if key, ok := strings.CutSuffix(f.Name, TimeSuffix); ok && d.r.video(key) >= 0 {
			return d.clipColumn(key, true)
		}
		if d.r.video(f.Name) >= 0 {
			return d.clipColumn(f.Name, false)
		}
	}
	frames := make([]int64, n) // the frames within the episode each row shows
	for j := range frames {
		frames[j] = ep.Start + int64(j)
	}
	if offsets := d.r.offsets(f.Name); offsets != nil {
		frames = d.windowRows(offsets)
	}
	switch {
	case f.Name == TaskColumn:
		return d.tasks(frames)
	case d.r.video(f.Name) >= 0:
		return d.frames(f, frames)
	case d.r.image(f.Name) >= 0 && !d.r.file.LeRobot.Images[d.r.image(f.Name)].Depth:
		return d.images(f, frames)
	}
	src, ok := d.rows[f.Name]
	if !ok {
		return nil, fmt.Errorf("the data files have no column %q", f.Name)
	}
	idx := array.NewInt64Builder(memory.DefaultAllocator)
	defer idx.Release()
	idx.AppendValues(frames, nil)
	indices := idx.NewInt64Array()
	defer indices.Release()
	taken, err := compute.TakeArray(d.ctx, src, indices)
	if err != nil {
		return nil, err
	}
	if d.r.offsets(f.Name) == nil {
		return taken, nil
	}
	defer taken.Release()
	return rewrap(taken, f.Type.(*arrow.FixedSizeListType), int(n))
}

// windowRows are, for each of the shard's frames, the frames its window
// reads, held at the episode's edges: len(offsets) per frame.
func (d *decoder) windowRows(offsets []int) []int64 {
	ep, n := d.e.Episode, d.e.Samples
	out := make([]int64, int(n)*len(offsets))
	pad := make([]bool, len(offsets))
	for j := range n {
		Query(ep.Start+j, 0, ep.Length, offsets, out[int(j)*len(offsets):int(j+1)*len(offsets)], pad)
	}
	return out
}

func (d *decoder) pad(offsets []int) arrow.Array {
	ep, n := d.e.Episode, d.e.Samples
	b := array.NewFixedSizeListBuilder(memory.DefaultAllocator, int32(len(offsets)), arrow.FixedWidthTypes.Boolean) //nolint:gosec // bounded by MaxWindow
	defer b.Release()
	vb := b.ValueBuilder().(*array.BooleanBuilder)
	rows, pad := make([]int64, len(offsets)), make([]bool, len(offsets))
	for j := range n {
		Query(ep.Start+j, 0, ep.Length, offsets, rows, pad)
		b.Append(true)
		vb.AppendValues(pad, nil)
	}
	return b.NewArray()
}

func (d *decoder) tasks(frames []int64) (arrow.Array, error) {
	src, ok := d.rows["task_index"].(*array.Int64)
	if !ok {
		return nil, fmt.Errorf("the data files' task_index is not int64")
	}
	tasks := d.r.file.LeRobot.Tasks
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	for _, f := range frames {
		t := src.Value(int(f))
		if t < 0 || t >= int64(len(tasks)) {
			return nil, fmt.Errorf("frame %d of episode %d has task_index %d, and %s lists %d tasks", f, d.e.Episode.Index, t, TasksPath, len(tasks))
		}
		b.Append(tasks[t])
	}
	return b.NewArray(), nil
}

// rewrap turns n*T values taken of a column (T per frame) into n windows
// of type t.
func rewrap(taken arrow.Array, t *arrow.FixedSizeListType, n int) (arrow.Array, error) {
	values := taken
	values.Retain()
	for {
		fl, ok := values.(*array.FixedSizeList)
		if !ok {
			break
		}
		size := int64(fl.DataType().(*arrow.FixedSizeListType).Len())
		inner := array.NewSlice(fl.ListValues(), int64(fl.Offset())*size, int64(fl.Offset()+fl.Len())*size)
		values.Release()
		values = inner
	}
	defer values.Release()
	if values.Len() != n*int(t.Len()) {
		return nil, fmt.Errorf("%d frames' windows of %d values each took %d values", n, t.Len(), values.Len())
	}
	data := array.NewData(t, n, []*memory.Buffer{nil}, []arrow.ArrayData{values.Data()}, 0, 0)
	defer data.Release()
	return array.MakeFromData(data), nil
}

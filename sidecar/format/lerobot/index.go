package lerobot

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/lerobot/mp4"
	"github.com/shardfeed/shardfeed/sidecar/format/parquet"
)

// The metadata files of a v3.0 dataset, under its root.
const (
	TasksPath   = "meta/tasks.parquet"
	EpisodesDir = "meta/episodes/"
)

// ShardFrameBytes is the decoded frames a shard of a dataset with cameras
// holds (every camera's frames, RGB) unless shardfeed index --shard-size
// says otherwise: an episode longer is cut into shards of that many
// frames.
const ShardFrameBytes = 64 << 20

// episode is one row of the episodes metadata.
type episode struct {
	index, from, to       int64
	dataChunk, dataFile   int64
	videoChunk, videoFile []int64
	videoFrom, videoTo    []float64
}

// IndexTable indexes the LeRobot dataset at st (source.uri, the
// dataset's root): one shard per episode, or per run of an episode's
// frames where its decoded frames would exceed opts.ShardBytes
// (ShardFrameBytes by default).
func (Format) IndexTable(ctx context.Context, st store.Store, opts format.IndexOptions) (*indexfile.File, error) {
	sel, err := ParseSelection(opts.Own[episodesOption])
	if err != nil {
		return nil, err
	}
	objects, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	sizes := make(map[string]int64, len(objects))
	for _, o := range objects {
		sizes[o.Key] = o.Size
	}
	raw, err := readWhole(ctx, st, sizes, InfoPath, MaxInfoBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (is source.uri a LeRobot dataset's root?)", st.URI(), err)
	}
	info, err := ParseInfo(raw)
	if err != nil {
		return nil, err
	}
	tasks, err := readTasks(ctx, st, sizes)
	if err != nil {
		return nil, err
	}
	episodes, err := readEpisodes(ctx, st, objects, sizes, info)
	if err != nil {
		return nil, err
	}
	ix := &indexer{st: st, opts: opts, info: info, sizes: sizes, movies: map[string]*movie{}, footers: map[string]*footer{}, rgHash: map[string]string{}}
	out := &indexfile.File{Shardfeed: indexfile.Version, Format: datav1alpha1.FormatLeRobot}
	lx := &indexfile.LeRobot{Root: st.URI(), Codebase: info.CodebaseVersion, FPS: info.FPS, Tasks: tasks, Episodes: opts.Own[episodesOption]}
	if !info.Lance(func(prefix string) bool { return hasPrefix(objects, prefix) }) && hasPrefix(objects, FramesTable) && !hasPrefix(objects, "data/") {
		return nil, fmt.Errorf("%s has a frames table (%s, LeRobot's Lance layout) and no data files, and %s says storage_format %q, which LeRobot's readers read as the Parquet and MP4 layout: set it to %q", st.URI(), FramesTable, InfoPath, *info.StorageFormat, StorageLance)
	}
	if info.Lance(func(prefix string) bool { return hasPrefix(objects, prefix) }) {
		if ix.lance, err = openLance(ctx, st, info, opts); err != nil {
			return nil, fmt.Errorf("%s (LeRobot's Lance layout): %w", st.URI(), err)
		}
		defer ix.lance.close()
		ix.schema, lx.Frames = ix.lance.dataSchema(), ix.lance.frames.Descriptor()
	}
	frameBytes := int64(0)
	for _, k := range info.VideoKeys() {
		f := info.Features[k]
		h, w := f.FrameSize()
		lx.Videos = append(lx.Videos, indexfile.LeRobotVideo{Key: k, Height: h, Width: w, Depth: f.Depth()})
		frameBytes += int64(h) * int64(w) * 3
	}
	for _, k := range info.ImageKeys() {
		f := info.Features[k]
		h, w := f.FrameSize()
		depth := f.Depth() || f.Channels() != 3
		lx.Images = append(lx.Images, indexfile.LeRobotImage{Key: k, Height: h, Width: w, Depth: depth})
		if !depth {
			frameBytes += int64(h) * int64(w) * 3
		}
	}
	for _, k := range info.Keys() {
		if f := info.Features[k]; f.DType != DTypeVideo && f.DType != DTypeImage && len(f.Shape) > 1 {
			if lx.Shapes == nil {
				lx.Shapes = map[string][]int{}
			}
			lx.Shapes[k] = f.Shape
		}
	}
	perShard := int64(math.MaxInt64)
	if frameBytes > 0 {
		perShard = max(1, cmp.Or(opts.ShardBytes, ShardFrameBytes)/frameBytes)
	}
	fileStart := dataFileStarts(episodes)
	var chosen []episode
	for _, ep := range episodes {
		if sel.Has(ep.index) {
			chosen = append(chosen, ep)
		}
	}
	if len(chosen) == 0 {
		return nil, fmt.Errorf("%s: no episode of the %d is selected by %q", st.URI(), len(episodes), opts.Own[episodesOption])
	}
	for n, ep := range chosen {
		shards, err := ix.episode(ctx, ep, fileStart, perShard, lx)
		if err != nil {
			return nil, fmt.Errorf("%s: episode %d: %w", st.URI(), ep.index, err)
		}
		out.Shards = append(out.Shards, shards...)
		if opts.Progress != nil {
			opts.Progress(n+1, len(chosen), fmt.Sprintf("episode %d", ep.index))
		}
	}
	if lx.ArrowSchema, err = encodeSchema(ix.schema); err != nil {
		return nil, err
	}
	out.LeRobot = lx
	return out, nil
}

// hasPrefix says whether an object's key begins with prefix.
func hasPrefix(objects []store.Object, prefix string) bool {
	k, _ := slices.BinarySearchFunc(objects, prefix, func(o store.Object, p string) int { return strings.Compare(o.Key, p) })
	return k < len(objects) && strings.HasPrefix(objects[k].Key, prefix)
}

// readWhole reads the object at key, of at most limit bytes.
func readWhole(ctx context.Context, st store.Store, sizes map[string]int64, key string, limit int64) ([]byte, error) {
	size, ok := sizes[key]
	if !ok {
		return nil, fmt.Errorf("there is no %s", key)
	}
	if size > limit {
		return nil, fmt.Errorf("%s is %d bytes, over the %d shardfeed reads", key, size, limit)
	}
	return format.ReadRange(ctx, st, key, 0, size)
}

// readTasks reads the task strings by task_index: pandas writes them as
// the table's index (LeRobot reads them back by position, tasks.iloc).
func readTasks(ctx context.Context, st store.Store, sizes map[string]int64) ([]string, error) {
	raw, err := readWhole(ctx, st, sizes, TasksPath, MaxMetaBytes)
	if err != nil {
		return nil, err
	}
	col, err := pandasIndex(TasksPath, raw)
	if err != nil {
		return nil, err
	}
	t, err := readTable(context.WithoutCancel(ctx), TasksPath, raw, []string{col}, []string{col})
	if err != nil {
		return nil, err
	}
	defer t.release()
	tasks, _, err := t.strs(col)
	return tasks, err
}

// pandasIndex names the column holding a pandas-written table's index.
func pandasIndex(name string, raw []byte) (string, error) {
	if len(raw) < 12 {
		return "", fmt.Errorf("%s: %d bytes is too short for Parquet", name, len(raw))
	}
	md, err := parquet.ParseFooter(name, raw[len(raw)-8-int(footerLen(raw)):len(raw)-8], int64(len(raw)))
	if err != nil {
		return "", err
	}
	pandas := md.KeyValueMetadata().FindValue("pandas")
	if pandas == nil {
		return "", fmt.Errorf("%s has no pandas metadata: its task strings are not where LeRobot writes them", name)
	}
	var meta struct {
		IndexColumns []json.RawMessage `json:"index_columns"`
	}
	if err := json.Unmarshal([]byte(*pandas), &meta); err != nil || len(meta.IndexColumns) != 1 {
		return "", fmt.Errorf("%s: its pandas metadata names no one index column of task strings", name)
	}
	var col string
	if err := json.Unmarshal(meta.IndexColumns[0], &col); err != nil {
		return "", fmt.Errorf("%s: its index is not a column of task strings", name)
	}
	return col, nil
}

// footerLen is the footer length a Parquet file's last 8 bytes give, 0
// when they do not fit.
func footerLen(raw []byte) int64 {
	n := int64(raw[len(raw)-8]) | int64(raw[len(raw)-7])<<8 | int64(raw[len(raw)-6])<<16 | int64(raw[len(raw)-5])<<24
	if n < 0 || n > int64(len(raw))-12 || string(raw[len(raw)-4:]) != "PAR1" {
		return 0
	}
	return n
}

// readEpisodes reads every episode's row of the episodes metadata, in
// episode order, and checks they tile the dataset's frames.
func readEpisodes(ctx context.Context, st store.Store, objects []store.Object, sizes map[string]int64, info *Info) ([]episode, error) {
	videos := info.VideoKeys()
	columns := []string{"episode_index", "data/chunk_index", "data/file_index", "dataset_from_index", "dataset_to_index"}
	for _, k := range videos {
		columns = append(columns, "videos/"+k+"/chunk_index", "videos/"+k+"/file_index", "videos/"+k+"/from_timestamp", "videos/"+k+"/to_timestamp")
	}
	var out []episode
	for _, o := range objects {
		if !strings.HasPrefix(o.Key, EpisodesDir) || !strings.HasSuffix(o.Key, ".parquet") {
			continue
		}
		raw, err := readWhole(ctx, st, sizes, o.Key, MaxMetaBytes)
		if err != nil {
			return nil, err
		}
		t, err := readTable(ctx, o.Key, raw, columns, columns)
		if err != nil {
			return nil, err
		}
		eps, err := episodesOf(t, videos)
		t.release()
		if err != nil {
			return nil, err
		}
		out = append(out, eps...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no episodes under %s", st.URI(), EpisodesDir)
	}
	slices.SortFunc(out, func(a, b episode) int { return int(a.index - b.index) })
	var next int64
	for i, ep := range out {
		switch {
		case ep.index != int64(i):
			return nil, fmt.Errorf("the episodes metadata lists episode %d where episode %d belongs (each once, from 0)", ep.index, i)
		case ep.from != next || ep.to <= ep.from:
			return nil, fmt.Errorf("episode %d spans dataset indexes [%d, %d), not an interval from %d: the episodes metadata is corrupt", ep.index, ep.from, ep.to, next)
		}
		for k, key := range videos {
			if !(ep.videoTo[k] > ep.videoFrom[k]) || ep.videoFrom[k] < 0 {
				return nil, fmt.Errorf("episode %d: camera %s spans [%v, %v) s of its video", ep.index, key, ep.videoFrom[k], ep.videoTo[k])
			}
		}
		next = ep.to
	}
	if info.TotalFrames != 0 && next != info.TotalFrames {
		return nil, fmt.Errorf("the episodes hold %d frames, %s says total_frames %d", next, InfoPath, info.TotalFrames)
	}
	return out, nil
}

func episodesOf(t *table, videos []string) ([]episode, error) {
	c := columns{t: t}
	idx, from, to := c.ints("episode_index"), c.ints("dataset_from_index"), c.ints("dataset_to_index")
	dc, df := c.ints("data/chunk_index"), c.ints("data/file_index")
	vc, vf := make([][]int64, len(videos)), make([][]int64, len(videos))
	vfrom, vto := make([][]float64, len(videos)), make([][]float64, len(videos))
	for k, key := range videos {
		vc[k], vf[k] = c.ints("videos/"+key+"/chunk_index"), c.ints("videos/"+key+"/file_index")
		vfrom[k], vto[k] = c.floats("videos/"+key+"/from_timestamp"), c.floats("videos/"+key+"/to_timestamp")
	}
	if c.err != nil {
		return nil, c.err
	}
	out := make([]episode, t.rows)
	for r := range out {
		ep := episode{index: idx[r], from: from[r], to: to[r], dataChunk: dc[r], dataFile: df[r]}
		for k := range videos {
			ep.videoChunk = append(ep.videoChunk, vc[k][r])
			ep.videoFile = append(ep.videoFile, vf[k][r])
			ep.videoFrom = append(ep.videoFrom, vfrom[k][r])
			ep.videoTo = append(ep.videoTo, vto[k][r])
		}
		out[r] = ep
	}
	return out, nil
}

// columns reads a table's columns, keeping the first error.
type columns struct {
	t   *table
	err error
}

func (c *columns) ints(name string) []int64 {
	v, _, err := c.t.ints(name)
	if c.err == nil {
		c.err = err
	}
	return v
}

func (c *columns) floats(name string) []float64 {
	v, _, err := c.t.floats(name)
	if c.err == nil {
		c.err = err
	}
	return v
}

// dataFileStarts is, per data file (chunk, file), the dataset index of
// its first row: the first frame of its first episode.
func dataFileStarts(eps []episode) map[[2]int64]int64 {
	out := map[[2]int64]int64{}
	for _, ep := range eps {
		k := [2]int64{ep.dataChunk, ep.dataFile}
		if s, ok := out[k]; !ok || ep.from < s {
			out[k] = ep.from
		}
	}
	return out
}

// indexer indexes a dataset's episodes, reading each data file's footer
// and each video file's movie box once.
type indexer struct {
	st      store.Store
	opts    format.IndexOptions
	info    *Info
	sizes   map[string]int64
	schema  *arrow.Schema
	movies  map[string]*movie
	footers map[string]*footer
	rgHash  map[string]string
	// lance is the dataset's Lance tables, in LeRobot's Lance layout.
	lance *lanceLayout
}

type footer struct {
	md       *metadata.FileMetaData
	rgs      []parquet.RowGroup
	off, n   int64
	firstRow []int64 // each row group's first row
}

type movie struct {
	track *mp4.Track
	file  videoFile
	box   indexfile.Range
}

func (ix *indexer) footer(ctx context.Context, key string) (*footer, error) {
	if f, ok := ix.footers[key]; ok {
		return f, nil
	}
	size, ok := ix.sizes[key]
	if !ok {
		return nil, fmt.Errorf("its data file %s is missing", key)
	}
	md, off, n, err := parquet.ReadFooter(ctx, ix.st, key, size)
	if err != nil {
		return nil, err
	}
	rgs, err := parquet.RowGroups(key, md, size)
	if err != nil {
		return nil, err
	}
	schema, err := func() (s *arrow.Schema, err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("%s: corrupt Parquet schema: %v", key, p)
			}
		}()
		return pqarrow.FromParquet(md.Schema, nil, md.KeyValueMetadata())
	}()
	if err != nil {
		return nil, err
	}
	if ix.schema == nil {
		ix.schema = schema
	} else if !ix.schema.Equal(schema) {
		return nil, fmt.Errorf("data file %s has columns %v, an earlier one %v: every data file of a dataset has the same", key, schema, ix.schema)
	}
	f := &footer{md: md, rgs: rgs, off: off, n: n}
	var row int64
	for _, rg := range rgs {
		f.firstRow = append(f.firstRow, row)
		row += rg.Rows
	}
	ix.footers[key] = f
	return f, nil
}

// videoFile is where a video file's bytes are: an object, or a part of
// one (a Lance blob) from base.
type videoFile struct {
	object     string
	base, size int64
}

// videoFile finds the video file at key (its path in the v3.0 layout).
func (ix *indexer) videoFile(key string) (videoFile, error) {
	if ix.lance != nil {
		loc, ok := ix.lance.videos[key]
		if !ok {
			return videoFile{}, fmt.Errorf("its video file %s is not in %s", key, VideosTable)
		}
		return videoFile{object: loc.Object, base: loc.Offset, size: loc.Size}, nil
	}
	size, ok := ix.sizes[key]
	if !ok {
		return videoFile{}, fmt.Errorf("its video file %s is missing", key)
	}
	return videoFile{object: key, size: size}, nil
}

func (ix *indexer) movie(ctx context.Context, key string) (*movie, error) {
	if m, ok := ix.movies[key]; ok {
		return m, nil
	}
	vf, err := ix.videoFile(key)
	if err != nil {
		return nil, err
	}
	size := vf.size
	read := func(off, n int64) ([]byte, error) { return format.ReadRange(ctx, ix.st, vf.object, vf.base+off, n) }
	box, err := mp4.FindMovie(read, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	raw, err := read(box.Offset, box.Size)
	if err != nil {
		return nil, err
	}
	mv, err := mp4.ParseMovie(raw, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	tr, err := mv.Video()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	sum, err := checksum.Of(ix.hash(), raw)
	if err != nil {
		return nil, err
	}
	m := &movie{track: tr, file: vf, box: indexfile.Range{Object: vf.object, Offset: vf.base + box.Offset, Length: box.Size, Hash: sum.String()}}
	ix.movies[key] = m
	return m, nil
}

func (ix *indexer) hash() string { return cmp.Or(ix.opts.Hash, "xxh64") }

// episode indexes one episode's shards.
func (ix *indexer) episode(ctx context.Context, ep episode, fileStart map[[2]int64]int64, perShard int64, lx *indexfile.LeRobot) ([]indexfile.Entry, error) {
	if ix.lance != nil {
		return ix.lanceEpisode(ctx, ep, perShard, lx)
	}
	dataKey, err := Expand(ix.info.DataPath, ep.dataChunk, ep.dataFile, "")
	if err != nil {
		return nil, fmt.Errorf("data_path: %w", err)
	}
	f, err := ix.footer(ctx, dataKey)
	if err != nil {
		return nil, err
	}
	row := ep.from - fileStart[[2]int64{ep.dataChunk, ep.dataFile}]
	length := ep.to - ep.from
	if total := f.md.NumRows; row+length > total {
		return nil, fmt.Errorf("its frames are rows [%d, %d) of %s, which has %d", row, row+length, dataKey, total)
	}
	first := -1
	var ranges []indexfile.Range
	var groups []int
	for g, rg := range f.rgs {
		if f.firstRow[g]+rg.Rows <= row || f.firstRow[g] >= row+length || rg.Rows == 0 {
			continue
		}
		if first < 0 {
			first = g
		}
		h, err := ix.rowGroupHash(ctx, dataKey, g, rg)
		if err != nil {
			return nil, err
		}
		ranges = append(ranges, indexfile.Range{Object: dataKey, Offset: rg.Offset, Length: rg.Length, Hash: h})
		groups = append(groups, g)
	}
	clips, err := ix.clips(ctx, ep, lx)
	if err != nil {
		return nil, err
	}
	return ix.runs(ep, perShard, indexfile.Entry{
		Object: dataKey, Offset: ranges[0].Offset, Length: ranges[0].Length,
		ObjectSize: ix.sizes[dataKey], FooterOffset: f.off, FooterLength: f.n, Ranges: ranges,
		Episode: &indexfile.LeRobotEpisode{Row: row, RowGroupRow: f.firstRow[first], RowGroups: groups, Clips: clips},
	})
}

// runs cuts an episode into shards of perShard frames, each like e (its
// data parts and clips).
func (ix *indexer) runs(ep episode, perShard int64, e indexfile.Entry) ([]indexfile.Entry, error) {
	length := ep.to - ep.from
	var out []indexfile.Entry
	for start := int64(0); start < length; start += perShard {
		run, episode := e, *e.Episode
		episode.Index, episode.From, episode.Length, episode.Start = ep.index, ep.from, length, start
		run.Episode, run.Part, run.Samples = &episode, int(ep.index), min(perShard, length-start)
		run.Name = fmt.Sprintf("episode-%06d", ep.index)
		if start > 0 || run.Samples < length {
			run.Name = fmt.Sprintf("episode-%06d@%d", ep.index, start)
		}
		var err error
		if run.Hash, err = ix.shardHash(run); err != nil {
			return nil, err
		}
		out = append(out, run)
	}
	return out, nil
}

// clips are an episode's clips, a camera each.
func (ix *indexer) clips(ctx context.Context, ep episode, lx *indexfile.LeRobot) ([]indexfile.LeRobotClip, error) {
	var clips []indexfile.LeRobotClip
	for k, key := range ix.info.VideoKeys() {
		c, err := ix.clip(ctx, ep, k, key, lx)
		if err != nil {
			return nil, fmt.Errorf("camera %s: %w", key, err)
		}
		clips = append(clips, c)
	}
	return clips, nil
}

// lanceEpisode indexes one episode's shards in LeRobot's Lance layout:
// its data rows are the frames table's rows [from, to).
func (ix *indexer) lanceEpisode(ctx context.Context, ep episode, perShard int64, lx *indexfile.LeRobot) ([]indexfile.Entry, error) {
	if ep.from < 0 || ep.to <= ep.from {
		return nil, fmt.Errorf("frames [%d, %d) are not a run of frames", ep.from, ep.to)
	}
	pieces, err := ix.lance.frames.Index(ctx, uint64(ep.from), uint64(ep.to))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", FramesTable, err)
	}
	clips, err := ix.clips(ctx, ep, lx)
	if err != nil {
		return nil, err
	}
	return ix.runs(ep, perShard, indexfile.Entry{
		Object:  pieces[0].Files[0].Tail.Object,
		Episode: &indexfile.LeRobotEpisode{Clips: clips, Pieces: pieces},
	})
}

func (ix *indexer) rowGroupHash(ctx context.Context, key string, g int, rg parquet.RowGroup) (string, error) {
	id := fmt.Sprintf("%s#%d", key, g)
	if h, ok := ix.rgHash[id]; ok {
		return h, nil
	}
	h, err := format.HashRange(ctx, ix.st, key, rg.Offset, rg.Length, ix.hash())
	if err != nil {
		return "", err
	}
	ix.rgHash[id] = h
	return h, nil
}

// shardHash is the digest of the shard's ranges' digests, in order: it
// changes when any of its bytes do.
func (ix *indexer) shardHash(e indexfile.Entry) (string, error) {
	var b strings.Builder
	for _, r := range e.Ranges {
		fmt.Fprintf(&b, "%s@%d+%d=%s;", r.Object, r.Offset, r.Length, r.Hash)
	}
	for _, p := range e.Episode.Pieces {
		fmt.Fprintf(&b, "piece %d@%d+%d=%s;", p.Part, p.RowStart, p.Rows, p.Hash)
	}
	for _, c := range e.Episode.Clips {
		for _, r := range []indexfile.Range{c.Movie, c.Samples} {
			fmt.Fprintf(&b, "%s@%d+%d=%s;", r.Object, r.Offset, r.Length, r.Hash)
		}
	}
	fmt.Fprintf(&b, "frames %d+%d", e.Episode.Start, e.Samples)
	sum, err := checksum.Of(ix.hash(), []byte(b.String()))
	if err != nil {
		return "", err
	}
	return sum.String(), nil
}

// clip finds an episode's samples of camera k in its video file.
func (ix *indexer) clip(ctx context.Context, ep episode, k int, key string, lx *indexfile.LeRobot) (indexfile.LeRobotClip, error) {
	videoKey, err := Expand(*ix.info.VideoPath, ep.videoChunk[k], ep.videoFile[k], key)
	if err != nil {
		return indexfile.LeRobotClip{}, fmt.Errorf("video_path: %w", err)
	}
	m, err := ix.movie(ctx, videoKey)
	if err != nil {
		return indexfile.LeRobotClip{}, err
	}
	v := &lx.Videos[k]
	if v.Codec == "" {
		v.Codec = m.track.Codec
	} else if v.Codec != m.track.Codec {
		return indexfile.LeRobotClip{}, fmt.Errorf("%s is %s, an earlier file of the camera %s", videoKey, m.track.Codec, v.Codec)
	}
	if int(m.track.Width) != v.Width || int(m.track.Height) != v.Height {
		return indexfile.LeRobotClip{}, fmt.Errorf("%s is %dx%d, %s says %dx%d", videoKey, m.track.Width, m.track.Height, InfoPath, v.Width, v.Height)
	}
	// The frames shown from the episode's start (less the tolerance a
	// decoded frame's time may be off by) to half a frame before its end.
	scale := float64(m.track.Timescale)
	lo := int64(math.Floor((ep.videoFrom[k] - DefaultTolerance) * scale))
	hi := int64(math.Ceil((ep.videoTo[k] - 0.5/ix.info.FPS) * scale))
	first, last, ok, err := m.track.Span(lo, hi)
	if err != nil {
		return indexfile.LeRobotClip{}, fmt.Errorf("%s: %w", videoKey, err)
	}
	if !ok {
		return indexfile.LeRobotClip{}, fmt.Errorf("%s shows no frame in the episode's [%v, %v) s", videoKey, ep.videoFrom[k], ep.videoTo[k])
	}
	off, end := m.track.Bytes(first, last)
	vf := m.file
	h, err := format.HashRange(ctx, ix.st, vf.object, vf.base+off, end-off, ix.hash())
	if err != nil {
		return indexfile.LeRobotClip{}, err
	}
	return indexfile.LeRobotClip{
		Size: vf.size, Base: vf.base, Movie: m.box,
		Samples: indexfile.Range{Object: vf.object, Offset: vf.base + off, Length: end - off, Hash: h},
		From:    ep.videoFrom[k], To: ep.videoTo[k],
	}, nil
}

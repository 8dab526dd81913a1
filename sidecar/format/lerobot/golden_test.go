package lerobot_test

// LeRobot datasets written by LeRobot's own writer, and what its own
// reader (LeRobotDataset with delta_timestamps) returns of them (the
// recording in testdata/golden: test/oracle/lerobot_oracle.py record;
// make golden), indexed by shardfeed index and read shard by shard as a
// pod reads them (their parts only): every item's data windows, masks,
// indexes and task equal LeRobot's. The frames are checked where FFmpeg
// is linked in (golden_video_test.go).

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
	"github.com/shardfeed/shardfeed/sidecar/format/lerobot"
	"github.com/shardfeed/shardfeed/sidecar/images"
)

type manifest struct {
	Tolerance   float64                                   `json:"tolerance_s"`
	FrameStride int                                       `json:"frame_stride"`
	Cameras     map[string]map[string][]int               `json:"cameras"`
	Cases       map[string]goldenCase                     `json:"cases"`
	Backends    map[string]map[string]int                 `json:"pyav_vs_torchcodec_max_difference"`
	Datasets    map[string]struct{ Frames, Episodes int } `json:"datasets"`
	// Images are each dataset's image features (cameras stored as
	// images in its data files).
	Images map[string][]string `json:"images"`
}

type goldenCase struct {
	Dataset string `json:"dataset"`
	// Source is the dataset Dataset was converted from (LeRobot's Lance
	// layout), whose frames the recording holds ("": Dataset).
	Source   string               `json:"source"`
	Delta    map[string][]float64 `json:"delta"`
	Episodes string               `json:"episodes"`
	Items    int                  `json:"items"`
	// Frames, where set, is the size the case's cameras are resized and
	// cropped to (spec.streams[].lerobot.frames), each recorded frame
	// being torchvision's Resize and CenterCrop of LeRobot's
	// (CASE.frames/KEY.u8).
	Frames *datav1alpha1.ImageDecode `json:"frames"`
	// ShardBytes, where set, cuts the episodes into shards of that many
	// decoded bytes (shardfeed index --shard-size), not the recording's.
	ShardBytes int64 `json:"-"`
	// Clips serves the cameras as clips (cameras: Clips).
	Clips bool `json:"-"`
	// root, where set, is the dataset to read instead of a copy of
	// Dataset's recording (a copy a test changed).
	root string
}

// shardings are case c as indexed by default (a shard an episode) and
// cut into shards of three frames: the runs of an episode start at
// frames of every kind (an open GOP's leading pictures among them).
func (m manifest) shardings(name string, c goldenCase) map[string]goldenCase {
	var frame int64
	for _, shape := range m.Cameras[c.Dataset] {
		frame += int64(shape[0] * shape[1] * shape[2])
	}
	cut := c
	cut.ShardBytes = 3 * frame
	return map[string]goldenCase{name: c, name + "/3-frame-shards": cut}
}

// item is one line of a case's answers: one item of LeRobotDataset.
type item struct {
	Index        int64                `json:"index"`
	EpisodeIndex int64                `json:"episode_index"`
	FrameIndex   int64                `json:"frame_index"`
	TaskIndex    int64                `json:"task_index"`
	Task         string               `json:"task"`
	Values       map[string][]float64 `json:"values"`
	Shapes       map[string][]int     `json:"shapes"`
	Dtypes       map[string]string    `json:"dtypes"`
	Pads         map[string][]bool    `json:"pads"`
	Frames       map[string][]int64   `json:"frames"`
}

func golden(t testing.TB) (string, manifest) {
	t.Helper()
	dir := testenv.GoldenAt(t, filepath.Join("testdata", "golden"))
	var m manifest
	if err := json.Unmarshal(testenv.GoldenFile(t, dir, "manifest.json"), &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Cases) < 4 {
		t.Fatalf("the recording has %d cases (make golden)", len(m.Cases))
	}
	return dir, m
}

func answers(t *testing.T, dir, kase string) []item {
	t.Helper()
	var out []item
	sc := bufio.NewScanner(bytes.NewReader(testenv.GoldenFile(t, dir, kase+".jsonl")))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var it item
		if err := json.Unmarshal(sc.Bytes(), &it); err != nil {
			t.Fatal(err)
		}
		out = append(out, it)
	}
	return out
}

// served indexes a copy of the case's dataset and reads every shard of it
// from its parts alone, with the case's windows, keeping columns (nil:
// all): the rows in shard order.
func served(t *testing.T, dir string, c goldenCase, columns func(*arrow.Schema) []string) (*indexfile.File, []arrow.RecordBatch, *arrow.Schema) {
	t.Helper()
	ctx := context.Background()
	st, f, r := opened(t, dir, c)
	schema, err := r.Schema(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	if columns != nil {
		cols = columns(schema)
	}
	var out []arrow.RecordBatch
	for i, e := range f.Shards {
		var parts [][]byte
		for _, p := range r.Parts(i) {
			b, err := format.StoreRead(st)(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, b)
		}
		rr, err := r.Records(ctx, i, parts, cols)
		if err != nil {
			t.Fatalf("shard %s: %v", e.Name, err)
		}
		for rr.Next() {
			rec := rr.RecordBatch()
			rec.Retain()
			out = append(out, rec)
			t.Cleanup(rec.Release)
		}
		rr.Release()
	}
	return f, out, schema
}

// opened indexes case c's dataset (a copy of it) and opens its reader,
// with c's windows.
func opened(t testing.TB, dir string, c goldenCase) (store.Store, *indexfile.File, format.Reader) {
	t.Helper()
	ctx := context.Background()
	root := c.root
	if root == "" {
		root = testenv.GoldenCopy(t, dir, c.Dataset)
	}
	st, err := stores.Open(ctx, store.Source{URI: "file://" + root + "/"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := formats.Default().Index(ctx, st, datav1alpha1.FormatLeRobot, format.IndexOptions{Own: map[string]string{"episodes": c.Episodes}, ShardBytes: c.ShardBytes, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	l, err := index.ReadLayout(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("the index does not read back: %v", err)
	}
	r, err := formats.Default().Open(l)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Delta) > 0 {
		if err := r.(format.Windowed).SetWindows(c.Delta, 0); err != nil {
			t.Fatal(err)
		}
	}
	if c.Frames != nil {
		if err := r.(format.FrameSizer).SetFrameSize(images.SpecOf(*c.Frames)); err != nil {
			t.Fatal(err)
		}
	}
	if c.Clips {
		if err := r.(format.ClipServer).ServeClips(); err != nil {
			t.Fatal(err)
		}
	}
	return st, f, r
}

// dataColumns are the served columns but the cameras and their masks.
func dataColumns(cameras map[string][]int) func(*arrow.Schema) []string {
	return func(s *arrow.Schema) []string {
		var out []string
		for _, f := range s.Fields() {
			if _, cam := cameras[strings.TrimSuffix(f.Name, lerobot.PadSuffix)]; !cam {
				out = append(out, f.Name)
			}
		}
		return out
	}
}

func TestLeRobotItemsAreLeRobotDatasets(t *testing.T) {
	dir, m := golden(t)
	for kase, c := range m.Cases {
		for name, c := range m.shardings(kase, c) {
			t.Run(name, func(t *testing.T) { checkItems(t, dir, kase, c, m) })
		}
	}
}

// checkItems checks every item of the case's recording against what
// shardfeed serves of it.
func checkItems(t *testing.T, dir, name string, c goldenCase, m manifest) {
	want := answers(t, dir, name)
	if len(want) != c.Items || len(want) == 0 {
		t.Fatalf("%d answers, the manifest says %d", len(want), c.Items)
	}
	f, recs, schema := served(t, dir, c, dataColumns(m.Cameras[c.Dataset]))
	var samples int64
	for _, e := range f.Shards {
		samples += e.Samples
	}
	if samples != int64(len(want)) {
		t.Fatalf("the index has %d samples, LeRobotDataset %d items", samples, len(want))
	}
	k := 0
	for _, rec := range recs {
		for j := range int(rec.NumRows()) {
			compareItem(t, k, rec, j, want[k], schema)
			k++
		}
	}
	if k != len(want) {
		t.Fatalf("served %d rows, LeRobotDataset has %d items", k, len(want))
	}
}

func compareItem(t *testing.T, k int, rec arrow.RecordBatch, j int, w item, schema *arrow.Schema) {
	t.Helper()
	ints := map[string]int64{"index": w.Index, "episode_index": w.EpisodeIndex, "frame_index": w.FrameIndex, "task_index": w.TaskIndex}
	for name, v := range ints {
		if got := column(t, rec, name).(*array.Int64).Value(j); got != v {
			t.Fatalf("item %d: %s %d, LeRobot %d", k, name, got, v)
		}
	}
	if got := column(t, rec, lerobot.TaskColumn).(*array.String).Value(j); got != w.Task {
		t.Fatalf("item %d: task %q, LeRobot %q", k, got, w.Task)
	}
	for name, vals := range w.Values {
		got := floats(t, column(t, rec, name), j)
		if !slices.Equal(got, vals) {
			t.Fatalf("item %d (episode %d frame %d): %s = %v, LeRobot %v", k, w.EpisodeIndex, w.FrameIndex, name, got, vals)
		}
		// A vector without a window carries no shape: its length is it.
		vector := len(w.Shapes[name]) == 1 && len(vals) == w.Shapes[name][0]
		if shape := shapeOf(t, schema, name); !slices.Equal(shape, w.Shapes[name]) && (shape != nil || !vector) {
			t.Fatalf("%s has shape %v, LeRobot's %v", name, shape, w.Shapes[name])
		}
		if got := leafType(column(t, rec, name).DataType()); got.String() != w.Dtypes[name] {
			t.Fatalf("%s holds %s, LeRobot's %s", name, got, w.Dtypes[name])
		}
	}
	for name, pads := range w.Pads {
		if _, cam := w.Frames[name]; cam {
			continue
		}
		got := column(t, rec, name+lerobot.PadSuffix).(*array.FixedSizeList)
		b := got.ListValues().(*array.Boolean)
		n := len(pads)
		for x := range n {
			if b.Value(j*n+x) != pads[x] {
				t.Fatalf("item %d: %s%s = %v at %d, LeRobot %v", k, name, lerobot.PadSuffix, b.Value(j*n+x), x, pads)
			}
		}
	}
}

// leafType is the type of t's values, inside its lists.
func leafType(t arrow.DataType) arrow.DataType {
	for {
		l, ok := t.(arrow.ListLikeType)
		if !ok {
			return t
		}
		t = l.Elem()
	}
}

func column(t *testing.T, rec arrow.RecordBatch, name string) arrow.Array {
	t.Helper()
	k := rec.Schema().FieldIndices(name)
	if len(k) == 0 {
		t.Fatalf("no column %q in %v", name, rec.Schema())
	}
	return rec.Column(k[0])
}

// floats is row j of a float (or int64, int32) column, or of a
// fixed-size list of them.
func floats(t *testing.T, a arrow.Array, j int) []float64 {
	t.Helper()
	switch a := a.(type) {
	case *array.Float32:
		return []float64{float64(a.Value(j))}
	case *array.Float64:
		return []float64{a.Value(j)}
	case *array.Int64:
		return []float64{float64(a.Value(j))}
	case *array.Int32:
		return []float64{float64(a.Value(j))}
	case *array.FixedSizeList:
		n := int(a.DataType().(*arrow.FixedSizeListType).Len())
		vals := a.ListValues()
		var out []float64
		for x := range n {
			out = append(out, floats(t, vals, (a.Offset()+j)*n+x)...)
		}
		return out
	}
	t.Fatalf("a %s column is not floats", a.DataType())
	return nil
}

func shapeOf(t *testing.T, schema *arrow.Schema, name string) []int {
	t.Helper()
	f := schema.Field(schema.FieldIndices(name)[0])
	v, ok := f.Metadata.GetValue(format.MetaShape)
	if !ok {
		if _, list := f.Type.(*arrow.FixedSizeListType); list {
			return nil
		}
		return []int{}
	}
	var out []int
	for _, d := range strings.Split(v, ",") {
		n, err := strconv.Atoi(d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// TestLeRobotDeltasAreLeRobots: the windows' offsets and the tolerance
// check give LeRobot's answers over a spread of deltas and frame rates.
// An image feature's images (PNGs in the data files) are LeRobot's
// exactly, in every build: its float32 values are these bytes divided by
// 255 (the recording checks it); windows of them too, resized ones being
// torchvision's Resize and CenterCrop of LeRobot's.
func TestLeRobotImagesAreLeRobotDatasets(t *testing.T) {
	dir, m := golden(t)
	cases := 0
	for kase, c := range m.Cases {
		keys := m.Images[c.Dataset]
		if keys == nil {
			continue
		}
		cases++
		for name, c := range m.shardings(kase, c) {
			t.Run(name, func(t *testing.T) { checkFrames(t, dir, kase, c, m, m.cameras(c, keys...), 0) })
		}
	}
	if cases < 2 {
		t.Fatalf("%d cases of image features recorded (make golden)", cases)
	}
}

func TestLeRobotDeltasAreLeRobots(t *testing.T) {
	dir, m := golden(t)
	sc := bufio.NewScanner(bytes.NewReader(testenv.GoldenFile(t, dir, "deltas.jsonl")))
	n, refused := 0, 0
	for sc.Scan() {
		var d struct {
			FPS   float64 `json:"fps"`
			Delta float64 `json:"delta"`
			OK    bool    `json:"ok"`
			Index int     `json:"index"`
		}
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		got, ok := lerobot.DeltaFrames(d.Delta, d.FPS, m.Tolerance)
		if got != d.Index || ok != d.OK {
			t.Errorf("%v s at %v fps: %d frames (whole: %t), LeRobot %d (%t)", d.Delta, d.FPS, got, ok, d.Index, d.OK)
		}
		_, err := lerobot.NewWindows(map[string][]float64{"k": {d.Delta}}, d.FPS, m.Tolerance)
		if (err == nil) != d.OK {
			t.Errorf("%v s at %v fps: NewWindows %v, LeRobot's check %t", d.Delta, d.FPS, err, d.OK)
		}
		if !d.OK {
			refused++
		}
		n++
	}
	if n < 1000 || refused == 0 || refused == n {
		t.Fatalf("%d deltas, %d refused: the recording should hold both kinds", n, refused)
	}
}

// checkFrames checks the frames shardfeed serves of the case's cameras
// (key: its frames' shape) against the recording's, within tolerance
// levels: each window slot shows the frame LeRobot's does (the same
// dataset index), padded where LeRobot's is, and each recorded frame is
// LeRobot's.
func checkFrames(t *testing.T, dir, kase string, c goldenCase, m manifest, cameras map[string][]int, tolerance int) {
	recording := cmp.Or(c.Source, c.Dataset) + ".frames"
	if c.Frames != nil {
		recording = kase + ".frames" // torchvision's resize of LeRobot's frames
	}
	want := answers(t, dir, kase)
	_, recs, schema := served(t, dir, c, func(*arrow.Schema) []string {
		var out []string
		for k := range cameras {
			out = append(out, k)
		}
		for k := range cameras {
			if c.Delta[k] != nil {
				out = append(out, k+lerobot.PadSuffix)
			}
		}
		return append(out, "index")
	})
	for cam, shape := range cameras {
		if c.Delta[cam] != nil {
			shape = append([]int{len(c.Delta[cam])}, shape...)
		}
		if got := shapeOf(t, schema, cam); !slices.Equal(got, shape) {
			t.Fatalf("%s has shape %v, LeRobot's %v", cam, got, shape)
		}
	}
	// ours[cam][index]: the frame shardfeed served at each
	// dataset index (the window's slot of offset 0, or the
	// camera's frame where it is not windowed).
	ours := map[string]map[int64][]byte{}
	type slot struct {
		cam   string
		index int64
		frame []byte
		item  int
	}
	var slots []slot
	k := 0
	for _, rec := range recs {
		for j := range int(rec.NumRows()) {
			w := want[k]
			for cam, shape := range cameras {
				size := shape[0] * shape[1] * shape[2]
				col := column(t, rec, cam).(*array.FixedSizeList)
				vals := col.ListValues().(*array.Uint8).Uint8Values()
				n := len(w.Frames[cam])
				row := vals[(col.Offset()+j)*n*size : (col.Offset()+j+1)*n*size]
				if pads := w.Pads[cam]; pads != nil {
					b := column(t, rec, cam+lerobot.PadSuffix).(*array.FixedSizeList).ListValues().(*array.Boolean)
					for x := range pads {
						if b.Value(j*len(pads)+x) != pads[x] {
							t.Fatalf("item %d: %s%s at %d is %t, LeRobot's %v", k, cam, lerobot.PadSuffix, x, b.Value(j*len(pads)+x), pads)
						}
					}
				}
				for x, idx := range w.Frames[cam] {
					f := row[x*size : (x+1)*size]
					slots = append(slots, slot{cam, idx, f, k})
					offsets := c.Delta[cam]
					if (offsets == nil || offsets[x] == 0) && idx == w.Index {
						if ours[cam] == nil {
							ours[cam] = map[int64][]byte{}
						}
						ours[cam][idx] = f
					}
				}
			}
			k++
		}
	}
	for _, s := range slots {
		f, ok := ours[s.cam][s.index]
		if !ok {
			continue // an index outside the selected episodes' own frames cannot be a slot
		}
		if string(f) != string(s.frame) {
			t.Fatalf("item %d, %s: a window slot LeRobot fills with index %d's frame is not that frame", s.item, s.cam, s.index)
		}
	}
	worst := 0
	for cam, shape := range cameras {
		size := shape[0] * shape[1] * shape[2]
		theirs := testenv.GoldenFile(t, dir, filepath.Join(recording, cam+".u8"))
		compared := 0
		for idx, f := range ours[cam] {
			if int(idx)%m.FrameStride != 0 {
				continue
			}
			at := int(idx) / m.FrameStride * size
			if at+size > len(theirs) {
				t.Fatalf("%s: the recording has no frame %d", cam, idx)
			}
			d := maxDifference(f, theirs[at:at+size])
			worst = max(worst, d)
			if d > tolerance {
				t.Errorf("%s frame %d differs from LeRobot's by up to %d levels, over %d", cam, idx, d, tolerance)
			}
			compared++
		}
		if compared == 0 {
			t.Fatalf("%s: no frame compared", cam)
		}
	}
	t.Logf("largest RGB difference from LeRobot's frames: %d levels", worst)
}

// cameras are the case's cameras' frame shapes, (3, H, W): keys, or
// every camera.
func (m manifest) cameras(c goldenCase, keys ...string) map[string][]int {
	out := map[string][]int{}
	for k, shape := range m.Cameras[c.Dataset] {
		if keys != nil && !slices.Contains(keys, k) {
			continue
		}
		if c.Frames != nil {
			shape = []int{3, int(c.Frames.Height), int(c.Frames.Width)}
		}
		out[k] = shape
	}
	return out
}

func maxDifference(a, b []byte) int {
	if len(a) != len(b) {
		panic(fmt.Sprintf("%d and %d bytes", len(a), len(b)))
	}
	worst := 0
	for i := range a {
		d := int(a[i]) - int(b[i])
		worst = max(worst, d, -d)
	}
	return worst
}

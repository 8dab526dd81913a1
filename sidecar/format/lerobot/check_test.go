package lerobot_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
	"github.com/shardfeed/shardfeed/sidecar/images"
	"github.com/shardfeed/shardfeed/sidecar/video"
)

// A served camera this binary cannot decode is refused when the stream
// opens, naming the camera, not shard by shard (which onCorruptShard: skip
// would turn into an epoch of pad rows): in a build without FFmpeg every
// camera, in any build a codec shardfeed does not decode. The data
// columns alone are served by every build.
func TestACameraThisBuildCannotDecodeIsRefusedAtStart(t *testing.T) {
	dir, m := golden(t)
	c := m.Cases["multicam-plain"]
	_, f, r := opened(t, dir, c)
	check := r.(format.ColumnChecker)
	cameras := m.Cameras[c.Dataset]
	var data []string
	for _, fl := range mustSchema(t, r).Fields() {
		if _, camera := cameras[strings.TrimSuffix(fl.Name, "_is_pad")]; !camera {
			data = append(data, fl.Name)
		}
	}
	err := check.CheckColumns(nil)
	switch {
	case video.Available && err != nil:
		t.Fatalf("a build with FFmpeg refused the AV1 cameras: %v", err)
	case !video.Available && (!errors.Is(err, video.ErrNoDecoder) || !strings.Contains(err.Error(), `camera "observation.images.`)):
		t.Fatalf("a build without FFmpeg served the cameras: %v", err)
	}
	if err := check.CheckColumns(data); err != nil {
		t.Fatalf("the data columns %v alone: %v", data, err)
	}
	if err := check.CheckColumns([]string{"observation.images.top"}); (err == nil) != video.Available {
		t.Fatalf("one camera asked for: %v (FFmpeg linked: %v)", err, video.Available)
	}

	f.LeRobot.Videos[2].Depth = true
	err = reopened(t, f).(format.ColumnChecker).CheckColumns(nil)
	if err == nil || !strings.Contains(err.Error(), `camera "`+f.LeRobot.Videos[2].Key+`" is a depth map`) {
		t.Fatalf("a depth camera: %v", err)
	}
	if err := reopened(t, f).(format.ColumnChecker).CheckColumns(data); err != nil {
		t.Fatalf("the data columns of a dataset with a depth camera: %v", err)
	}
	f.LeRobot.Videos[2].Depth = false

	f.LeRobot.Videos[1].Codec = "vp09"
	err = reopened(t, f).(format.ColumnChecker).CheckColumns(nil)
	if err == nil || !strings.Contains(err.Error(), `camera "`+f.LeRobot.Videos[1].Key+`" (vp09,`) || !strings.Contains(err.Error(), `codec "vp09" is not one shardfeed decodes`) {
		t.Fatalf("a VP9 camera: %v", err)
	}
}

// An image feature is served decoded, (3, H, W), or refused clearly: a
// single-channel one (a depth map) where it is served, an image whose
// size is not info.json's naming the frame.
func TestImageFeaturesAreServedAsTheirShapeOrRefused(t *testing.T) {
	dir, m := golden(t)
	c := m.Cases["images-windows"]
	st, f, r := opened(t, dir, c)
	keys := m.Images[c.Dataset]
	if len(keys) != 2 || f.LeRobot.Images[0].Key != keys[0] || f.LeRobot.Images[1].Key != keys[1] {
		t.Fatalf("the index's images are %+v, the recording's %v", f.LeRobot.Images, keys)
	}
	schema := mustSchema(t, r)
	for _, k := range keys {
		fl, _ := schema.FieldsByName(k)
		shape, _ := fl[0].Metadata.GetValue(format.MetaShape)
		want := m.Cameras[c.Dataset][k]
		if n := len(c.Delta[k]); n > 0 {
			want = append([]int{n}, want...)
		}
		if shape != strings.Trim(strings.Join(strings.Fields(fmt.Sprint(want)), ","), "[]") || fl[0].Type.ID() != arrow.FIXED_SIZE_LIST {
			t.Errorf("%s is %s of shape %q, LeRobot's %v", k, fl[0].Type, shape, want)
		}
	}

	f.LeRobot.Images[1].Depth = true
	depth := reopened(t, f)
	err := depth.(format.ColumnChecker).CheckColumns(nil)
	if err == nil || !strings.Contains(err.Error(), `image feature "`+keys[1]+`" is a single-channel image`) {
		t.Fatalf("a depth image served: %v", err)
	}
	if err := depth.(format.ColumnChecker).CheckColumns([]string{keys[0], "index"}); err != nil {
		t.Fatalf("the other image of a dataset with a depth image: %v", err)
	}
	f.LeRobot.Images[1].Depth = false

	f.LeRobot.Images[0].Height--
	short := reopened(t, f)
	ctx := context.Background()
	var parts [][]byte
	for _, p := range short.Parts(0) {
		b, err := format.StoreRead(st)(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, b)
	}
	_, err = short.Records(ctx, 0, parts, []string{keys[0]})
	if want := fmt.Sprintf("frame 0 of episode 0: the image is %dx%d, and meta/info.json's shape says %dx%d", f.LeRobot.Images[0].Width, f.LeRobot.Images[0].Height+1, f.LeRobot.Images[0].Width, f.LeRobot.Images[0].Height); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("an image of another size than info.json's: %v, want %q", err, want)
	}
}

// reopened opens a reader of index f as the sidecar does: from its JSON.
func reopened(t *testing.T, f *indexfile.File) format.Reader {
	t.Helper()
	raw, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	l, err := index.ReadLayout(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	r, err := formats.Default().Open(l)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Resized frames change each camera's served shape, windows included; a
// size that is no image's, or draft (JPEGs only), is refused.
func TestFrameSizeSetsTheCamerasShapes(t *testing.T) {
	dir, m := golden(t)
	c := m.Cases["multicam-windows"]
	_, _, r := opened(t, dir, c)
	sized := r.(format.FrameSizer)
	for _, tc := range []struct {
		spec images.Spec
		want string
	}{
		{images.Spec{Resize: 64, Height: 64, Width: 72}, "crop 64×72 is larger"},
		{images.Spec{Resize: 80, Height: 64, Width: 72, Draft: true}, "draft decodes JPEGs"},
		{images.Spec{Resize: 80, Height: 0, Width: 72}, "must all be at least 1"},
	} {
		if err := sized.SetFrameSize(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error saying %q", tc.spec, err, tc.want)
		}
	}
	if err := sized.SetFrameSize(images.Spec{Resize: 80, Height: 64, Width: 72}); err != nil {
		t.Fatal(err)
	}
	schema := mustSchema(t, r)
	for cam := range m.Cameras[c.Dataset] {
		n := len(c.Delta[cam])
		shape := "3,64,72"
		if n > 0 {
			shape = strconv.Itoa(n) + "," + shape
		}
		f, _ := schema.FieldsByName(cam)
		if len(f) != 1 {
			t.Fatalf("no column %s", cam)
		}
		got, _ := f[0].Metadata.GetValue(format.MetaShape)
		size := max(n, 1) * 3 * 64 * 72
		if got != shape || f[0].Type.(*arrow.FixedSizeListType).Len() != int32(size) {
			t.Errorf("%s is %s of shape %q, want %d values of shape %q", cam, f[0].Type, got, size, shape)
		}
	}
}

func mustSchema(t *testing.T, r format.Reader) *arrow.Schema {
	t.Helper()
	s, err := r.Schema(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// FuzzRecords decodes a shard of LeRobot's multicam dataset (windows of
// the state and the cameras) from damaged parts: its data file's row
// groups and footer, and each camera's movie box and samples. Each call
// gives the shard's rows or an error, never a crash; in the cgo build
// the frames are decoded too.
func FuzzRecords(f *testing.F) { fuzzShard(f, "multicam-windows") }

// FuzzImageRecords is FuzzRecords of a dataset whose image features are
// PNGs in its data files (windows of them): a damaged PNG is an error.
func FuzzImageRecords(f *testing.F) { fuzzShard(f, "images-windows") }

// fuzzShard fuzzes the second shard of a case's dataset.
func fuzzShard(f *testing.F, kase string) {
	dir, m := golden(f)
	st, idx, r := opened(f, dir, m.Cases[kase])
	ctx := context.Background()
	var parts [][]byte
	for _, p := range r.Parts(1) {
		b, err := format.StoreRead(st)(ctx, p)
		if err != nil {
			f.Fatal(err)
		}
		parts = append(parts, b)
	}
	f.Add(uint8(0), uint32(0), []byte{0xff})
	for k, p := range parts {
		f.Add(uint8(k), uint32(len(p)/2), []byte{0})
		f.Add(uint8(k), uint32(len(p)-1), []byte("\x00\x00\x00\x00"))
	}
	want := idx.Shards[1].Samples
	f.Fuzz(func(t *testing.T, part uint8, at uint32, patch []byte) {
		damaged := slices.Clone(parts)
		k := int(part) % len(damaged)
		p := slices.Clone(damaged[k])
		if len(patch) > 0 && len(p) > 0 {
			at := int(at) % len(p)
			p = append(p[:at], append(patch, p[min(at+len(patch), len(p)):]...)...)
		} else {
			p = p[:int(at)%(len(p)+1)] // cut short
		}
		damaged[k] = p
		rr, err := r.Records(ctx, 1, damaged, nil)
		if err != nil {
			return
		}
		defer rr.Release()
		var rows int64
		for rr.Next() {
			rows += rr.RecordBatch().NumRows()
		}
		if rr.Err() == nil && rows != want {
			t.Fatalf("a damaged shard decoded to %d rows, the index says %d", rows, want)
		}
	})
}

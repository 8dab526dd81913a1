package lerobot

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shardfeed/shardfeed/internal/bufpool"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/sidecar/format/lerobot/mp4"
	"github.com/shardfeed/shardfeed/sidecar/images"
	"github.com/shardfeed/shardfeed/sidecar/video"
)

// frames decodes camera f's frame for each of frames (within the
// episode): the frame shown closest to the row's timestamp, within the
// tolerance, as LeRobotDataset's decode_video_frames picks it, as RGB
// planes (3, H, W) of type f.Type.
func (d *decoder) frames(f arrow.Field, frames []int64) (arrow.Array, error) {
	k := d.r.video(f.Name)
	v, c := d.r.file.LeRobot.Videos[k], d.e.Episode.Clips[k]
	cam, err := d.camera(k)
	if err != nil {
		return nil, err
	}
	tr := cam.track
	// want[sample] lists the output slots that show it.
	want := map[int][]int{}
	for slot, fr := range frames {
		s, err := cam.sample(fr)
		if err != nil {
			return nil, err
		}
		want[s] = append(want[s], slot)
	}
	packets, err := packetsFor(tr, want, c, cam.samples)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Samples.Object, err)
	}
	height, width := d.r.frameShape(v.Height, v.Width)
	size := 3 * height * width
	buf, out := slotsBuffer(size * len(frames))
	defer buf.Release()
	byPTS := map[int64][]int{}
	for s, slots := range want {
		byPTS[tr.Samples[s].PTS()] = slots
	}
	filled := 0
	err = video.Decode(video.Track{Codec: tr.Codec, Config: tr.Config, Width: int(tr.Width), Height: int(tr.Height)}, packets, func(fr video.Frame) error {
		slots := byPTS[fr.PTS()]
		if len(slots) == 0 {
			return nil
		}
		first := out[slots[0]*size : (slots[0]+1)*size]
		if err := d.rgb(fr, first, width, height); err != nil {
			return err
		}
		for _, s := range slots[1:] {
			copy(out[s*size:(s+1)*size], first)
		}
		filled += len(slots)
		delete(byPTS, fr.PTS())
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Samples.Object, err)
	}
	if filled != len(frames) {
		var missing []int64
		for p := range byPTS {
			missing = append(missing, p)
		}
		slices.Sort(missing)
		return nil, fmt.Errorf("%s: the decoder gave no frame at pts %v (of %d/s): the video is corrupt", c.Samples.Object, missing, tr.Timescale)
	}
	return planesColumn(f, buf), nil
}

// slotsBuffer is a buffer of n bytes for a column's frames, from the
// buffer pool. Every byte is written by its caller (or the shard fails):
// the pool's buffers, reused from shard to shard, are not zeroed first.
func slotsBuffer(n int) (*memory.Buffer, []byte) {
	buf := memory.NewResizableBuffer(bufpool.Shared)
	buf.Resize(n)
	return buf, buf.Bytes()
}

// planesColumn is column f (fixed-size lists of uint8) of the frames in
// buf, each a window's or a frame's planes.
func planesColumn(f arrow.Field, buf *memory.Buffer) arrow.Array {
	values := array.NewData(arrow.PrimitiveTypes.Uint8, buf.Len(), []*memory.Buffer{nil, buf}, nil, 0, 0)
	defer values.Release()
	data := array.NewData(f.Type, buf.Len()/int(f.Type.(*arrow.FixedSizeListType).Len()), []*memory.Buffer{nil}, []arrow.ArrayData{values}, 0, 0)
	defer data.Release()
	return array.MakeFromData(data)
}

// camera is one camera's video track in a shard, and what finds the
// sample each frame of the episode shows.
type camera struct {
	track *mp4.Track
	clip  indexfile.LeRobotClip
	// shown is the track's samples in presentation order; samples the
	// clip's fetched bytes.
	shown   []int
	samples []byte
	ts      arrow.Array
	d       *decoder
}

// camera parses camera k's movie box.
func (d *decoder) camera(k int) (*camera, error) {
	c := d.e.Episode.Clips[k]
	ts, ok := d.rows["timestamp"]
	if !ok {
		return nil, fmt.Errorf("the data files have no timestamp column to find frames by")
	}
	mv, err := mp4.ParseMovie(d.clips[2*k], c.Size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Movie.Object, err)
	}
	tr, err := mv.Video()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Movie.Object, err)
	}
	return &camera{track: tr, clip: c, shown: showOrder(tr), samples: d.clips[2*k+1], ts: ts, d: d}, nil
}

// sample is the sample frame fr of the episode shows: the one shown
// closest to its row's timestamp, within the tolerance.
func (cam *camera) sample(fr int64) (int, error) {
	t, err := timestamp(cam.ts, fr)
	if err != nil {
		return 0, err
	}
	c := cam.clip
	s, err := closest(cam.track, cam.shown, c.From+t, cam.d.r.tolerance)
	if err != nil {
		return 0, fmt.Errorf("%s: frame %d of episode %d (%v s): %w", c.Movie.Object, fr, cam.d.e.Episode.Index, c.From+t, err)
	}
	return s, nil
}

// bytesOf is sample s's bytes, from the clip's fetched samples.
func (cam *camera) bytesOf(s int) ([]byte, error) {
	smp, c := cam.track.Samples[s], cam.clip
	off := c.Base + smp.Offset - c.Samples.Offset
	if off < 0 || off+int64(smp.Size) > int64(len(cam.samples)) {
		return nil, fmt.Errorf("sample %d at [%d, +%d) is outside the episode's indexed samples [%d, +%d): re-run shardfeed index", s+1, smp.Offset, smp.Size, c.Samples.Offset, c.Samples.Length)
	}
	return cam.samples[off : off+int64(smp.Size)], nil
}

// rgb writes frame fr as RGB planes (3, height, width) into dst: converted
// at that size, or, where the stream resizes its frames, converted at
// its own and resized and cropped as an image is.
func (d *decoder) rgb(fr video.Frame, dst []byte, width, height int) error {
	if d.r.frameSize == nil {
		return fr.RGB(dst, width, height)
	}
	rows, stride, err := fr.RGBRows()
	if err != nil {
		return err
	}
	if d.resizer == nil {
		d.resizer = images.NewDecoder(*d.r.frameSize)
	}
	d.packed = slices.Grow(d.packed[:0], len(dst))[:len(dst)]
	fw, fh := fr.Size()
	if err := d.resizer.ResizeRGB(d.packed, rows, fw, fh, stride); err != nil {
		return err
	}
	planar(dst, d.packed, width*height)
	return nil
}

// planar writes n packed RGB pixels as R, G and B planes.
func planar(dst, packed []byte, n int) {
	r, g, b := dst[:n], dst[n:2*n], dst[2*n:3*n]
	for i := range n {
		p := packed[3*i : 3*i+3 : 3*i+3]
		r[i], g[i], b[i] = p[0], p[1], p[2]
	}
}

// timestamp is the timestamp column's value of frame fr.
func timestamp(ts arrow.Array, fr int64) (float64, error) {
	switch a := ts.(type) {
	case *array.Float32:
		return float64(a.Value(int(fr))), nil
	case *array.Float64:
		return a.Value(int(fr)), nil
	}
	return 0, fmt.Errorf("the timestamp column is %s, not a float", ts.DataType())
}

// showOrder is the track's samples sorted by the time they are shown.
func showOrder(tr *mp4.Track) []int {
	out := make([]int, len(tr.Samples))
	for i := range out {
		out[i] = i
	}
	sort.SliceStable(out, func(a, b int) bool { return tr.Samples[out[a]].PTS() < tr.Samples[out[b]].PTS() })
	return out
}

// closest is the sample shown closest to t seconds; an error when it is
// tolerance or further from it, as LeRobot's decoders refuse it.
func closest(tr *mp4.Track, shown []int, t, tolerance float64) (int, error) {
	at := func(i int) float64 { return float64(tr.Samples[shown[i]].PTS()-tr.Edit) / float64(tr.Timescale) }
	j := sort.Search(len(shown), func(i int) bool { return at(i) >= t })
	best := -1
	for _, c := range []int{j - 1, j} {
		if c >= 0 && c < len(shown) && (best < 0 || math.Abs(at(c)-t) < math.Abs(at(best)-t)) {
			best = c
		}
	}
	if best < 0 {
		return 0, fmt.Errorf("the track has no frames")
	}
	if dist := math.Abs(at(best) - t); !(dist < tolerance) {
		return 0, fmt.Errorf("its closest frame is shown at %v s, %v s away, beyond the tolerance of %v s (LeRobot's FrameTimestampError)", at(best), dist, tolerance)
	}
	return shown[best], nil
}

// packetsFor lists the packets that decode the wanted samples: from the
// keyframe mp4's DecodeStart gives for them, in decode order, to the
// last, each read from the clip's fetched samples.
func packetsFor(tr *mp4.Track, want map[int][]int, c indexfile.LeRobotClip, samples []byte) ([]video.Packet, error) {
	cam := &camera{track: tr, clip: c, samples: samples}
	lo, hi := len(tr.Samples), -1
	shown := int64(math.MaxInt64)
	for s := range want {
		lo, hi = min(lo, s), max(hi, s)
		shown = min(shown, tr.Samples[s].PTS())
	}
	lo, err := tr.DecodeStart(lo, shown)
	if err != nil {
		return nil, err
	}
	out := make([]video.Packet, 0, hi-lo+1)
	for s := lo; s <= hi; s++ {
		data, err := cam.bytesOf(s)
		if err != nil {
			return nil, err
		}
		smp := tr.Samples[s]
		out = append(out, video.Packet{Data: data, PTS: smp.PTS(), Key: smp.Key})
	}
	return out, nil
}

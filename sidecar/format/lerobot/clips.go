package lerobot

import (
	"errors"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TimeSuffix names a camera's column of times where the stream serves
// clips (cameras: Clips): KEY_time, the second each of the sample's
// frames is shown at in its clip.
const TimeSuffix = "_time"

// ServeClips serves each camera as clips of its compressed video, for the
// trainer to decode: per sample an MP4 of the frames its window shows,
// from the keyframe they decode from (mp4's Track.Clip), and KEY_time,
// the second each frame is shown at in it.
func (r *reader) ServeClips() error {
	if r.frameSize != nil {
		return errors.New("cameras: Clips: frames sizes the frames the sidecar decodes; with clips the trainer decodes them")
	}
	r.clips = true
	return r.setSchema()
}

// clipFields are camera key's columns where the stream serves clips: the
// clips, their times, and the window's mask where key is windowed.
func (r *reader) clipFields(key string) []arrow.Field {
	clips := arrow.Field{Name: key, Type: arrow.BinaryTypes.Binary}
	offsets := r.offsets(key)
	if offsets == nil {
		return []arrow.Field{clips, {Name: key + TimeSuffix, Type: arrow.PrimitiveTypes.Float64}}
	}
	n := int32(len(offsets)) //nolint:gosec // bounded by MaxWindow
	return []arrow.Field{clips,
		{Name: key + TimeSuffix, Type: arrow.FixedSizeListOf(n, arrow.PrimitiveTypes.Float64), Metadata: shapeMeta([]int{len(offsets)})},
		{Name: key + PadSuffix, Type: arrow.FixedSizeListOf(n, arrow.FixedWidthTypes.Boolean), Metadata: shapeMeta([]int{len(offsets)})}}
}

// clipColumn is camera key's clips (which times false) or their times
// (true) for the shard's rows; both are made together, the other kept
// for its column.
func (d *decoder) clipColumn(key string, times bool) (arrow.Array, error) {
	cols, ok := d.clipCols[key]
	if !ok {
		var err error
		if cols, err = d.makeClips(key); err != nil {
			return nil, err
		}
		if d.clipCols == nil {
			d.clipCols = map[string][2]arrow.Array{}
		}
		d.clipCols[key] = cols
	}
	out := cols[0]
	if times {
		out = cols[1]
	}
	out.Retain()
	return out, nil
}

// makeClips cuts a clip per row of the frames its window (or its own
// frame) shows.
func (d *decoder) makeClips(key string) ([2]arrow.Array, error) {
	k := d.r.video(key)
	cam, err := d.camera(k)
	if err != nil {
		return [2]arrow.Array{}, err
	}
	offsets := d.r.offsets(key)
	frames := make([]int64, d.e.Samples)
	for j := range frames {
		frames[j] = d.e.Episode.Start + int64(j)
	}
	if offsets != nil {
		frames = d.windowRows(offsets)
	}
	per := max(1, len(offsets))
	clips := array.NewBinaryBuilder(memory.DefaultAllocator, arrow.BinaryTypes.Binary)
	defer clips.Release()
	times := make([]float64, 0, len(frames))
	tr := cam.track
	for j := 0; j < len(frames); j += per {
		slots := make([]int, per)
		lo, hi, shown := len(tr.Samples), -1, int64(math.MaxInt64)
		for x, fr := range frames[j : j+per] {
			s, err := cam.sample(fr)
			if err != nil {
				return [2]arrow.Array{}, err
			}
			slots[x] = s
			lo, hi, shown = min(lo, s), max(hi, s), min(shown, tr.Samples[s].PTS())
		}
		first, err := tr.DecodeStart(lo, shown)
		if err != nil {
			return [2]arrow.Array{}, fmt.Errorf("%s: %w", cam.clip.Movie.Object, err)
		}
		clip, err := tr.Clip(first, hi, cam.bytesOf)
		if err != nil {
			return [2]arrow.Array{}, fmt.Errorf("%s: %w", cam.clip.Samples.Object, err)
		}
		clips.Append(clip)
		for _, s := range slots {
			times = append(times, tr.ClipTime(first, hi, s))
		}
	}
	t := array.NewFloat64Builder(memory.DefaultAllocator)
	defer t.Release()
	t.AppendValues(times, nil)
	flat := t.NewFloat64Array()
	var timeCol arrow.Array = flat
	if offsets != nil {
		defer flat.Release()
		var err error
		if timeCol, err = rewrap(flat, arrow.FixedSizeListOf(int32(per), arrow.PrimitiveTypes.Float64), int(d.e.Samples)); err != nil { //nolint:gosec // bounded by MaxWindow
			return [2]arrow.Array{}, err
		}
	}
	return [2]arrow.Array{clips.NewArray(), timeCol}, nil
}

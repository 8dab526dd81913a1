//go:build ffmpeg

package lerobot_test

// The frames, where FFmpeg is linked in (make test's video pass): every
// window slot shows the frame LeRobot's shows (the same dataset index),
// and each frame is within maxRGBDifference of LeRobot's RGB of it (its
// decoders bundle another FFmpeg, whose RGB conversion rounds otherwise);
// resized frames (spec.streams[].lerobot.frames) of torchvision's Resize
// and CenterCrop of LeRobot's, as a user's transform would make them.

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shardfeed/shardfeed/internal/testenv"
)

// maxRGBDifference is the largest difference, in 8-bit levels, allowed
// between a frame's RGB and LeRobot's (docs/formats.md, LeRobot).
const maxRGBDifference = 2

func TestLeRobotFramesAreLeRobotDatasets(t *testing.T) {
	dir, m := golden(t)
	for kase, c := range m.Cases {
		for name, c := range m.shardings(kase, c) {
			t.Run(name, func(t *testing.T) { checkFrames(t, dir, kase, c, m) })
		}
	}
}

// checkFrames checks every frame shardfeed serves of the case against
// the recording's.
func checkFrames(t *testing.T, dir, kase string, c goldenCase, m manifest) {
	cameras := m.cameras(c)
	recording := c.Dataset + ".frames"
	if c.Frames != nil {
		recording = kase + ".frames" // torchvision's resize of LeRobot's frames
	}
	want := answers(t, dir, kase)
	_, recs, _ := served(t, dir, c, func(*arrow.Schema) []string {
		var out []string
		for k := range cameras {
			out = append(out, k)
		}
		return append(out, "index")
	})
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
			if d > maxRGBDifference {
				t.Errorf("%s frame %d differs from LeRobot's by up to %d levels, over %d", cam, idx, d, maxRGBDifference)
			}
			compared++
		}
		if compared == 0 {
			t.Fatalf("%s: no frame compared", cam)
		}
	}
	t.Logf("largest RGB difference from LeRobot's frames: %d levels", worst)
}

// cameras are the case's cameras' frame shapes, (3, H, W).
func (m manifest) cameras(c goldenCase) map[string][]int {
	out := map[string][]int{}
	for k, shape := range m.Cameras[c.Dataset] {
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

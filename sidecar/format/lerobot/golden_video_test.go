//go:build ffmpeg

package lerobot_test

// The frames, where FFmpeg is linked in (make test's video pass): every
// window slot shows the frame LeRobot's shows (the same dataset index),
// and each frame is within maxRGBDifference of LeRobot's RGB of it (its
// decoders bundle another FFmpeg, whose RGB conversion rounds otherwise);
// resized frames (spec.streams[].lerobot.frames) of torchvision's Resize
// and CenterCrop of LeRobot's, as a user's transform would make them.

import (
	"testing"
)

// maxRGBDifference is the largest difference, in 8-bit levels, allowed
// between a frame's RGB and LeRobot's (docs/formats.md, LeRobot).
const maxRGBDifference = 2

func TestLeRobotFramesAreLeRobotDatasets(t *testing.T) {
	dir, m := golden(t)
	for kase, c := range m.Cases {
		for name, c := range m.shardings(kase, c) {
			t.Run(name, func(t *testing.T) { checkFrames(t, dir, kase, c, m, m.cameras(c), maxRGBDifference) })
		}
	}
}

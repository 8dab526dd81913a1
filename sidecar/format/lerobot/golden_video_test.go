//go:build ffmpeg

package lerobot_test

// The frames, where FFmpeg is linked in (make test's video pass): every
// window slot shows the frame LeRobot's shows (the same dataset index),
// and each frame is within maxRGBDifference of LeRobot's RGB of it (its
// decoders bundle another FFmpeg, whose RGB conversion rounds otherwise);
// resized frames (spec.streams[].lerobot.frames) of torchvision's Resize
// and CenterCrop of LeRobot's, as a user's transform would make them.

import (
	"runtime"
	"testing"
)

// maxRGBDifference is the largest difference, in 8-bit levels, allowed
// between a frame's RGB and LeRobot's (docs/formats.md, LeRobot): 2 where
// the conversion is x86's, as the recording's was (measured 0); 3 on
// arm64, whose FFmpeg converts with NEON code that rounds otherwise
// (measured 3 under qemu-user, hack/test-arm64.sh; the YUV planes are
// the same bits on both).
var maxRGBDifference = rgbTolerance(runtime.GOARCH)

func rgbTolerance(arch string) int {
	if arch == "arm64" {
		return 3
	}
	return 2
}

func TestLeRobotFramesAreLeRobotDatasets(t *testing.T) {
	dir, m := golden(t)
	for kase, c := range m.Cases {
		for name, c := range m.shardings(kase, c) {
			t.Run(name, func(t *testing.T) { checkFrames(t, dir, kase, c, m, m.cameras(c), maxRGBDifference) })
		}
	}
}

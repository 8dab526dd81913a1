//go:build ffmpeg

package video_test

// The decoder against the reference decode of the same pinned FFmpeg
// build (bin/ffmpeg-lgpl's ffmpeg command, its own demuxer): every frame
// of every video LeRobot wrote for the lerobot format's recording, its
// YUV planes bit-equal, in presentation order, at the times the sample
// tables give.

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/format/lerobot/mp4"
	"github.com/shardfeed/shardfeed/sidecar/video"
)

func reference(t *testing.T) string {
	t.Helper()
	bin := filepath.Join("..", "..", "bin", "ffmpeg-lgpl", "bin", "ffmpeg")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the pinned FFmpeg build is not in bin/ (make tools-video): %v", err)
	}
	return bin
}

func videos(t *testing.T) []string {
	t.Helper()
	return testenv.GoldenFiles(t, filepath.Join("..", "format", "lerobot", "testdata", "golden"), ".mp4", 8)
}

func TestYUVPlanesAreTheReferenceDecodes(t *testing.T) {
	ffmpeg := reference(t)
	for _, path := range videos(t) {
		t.Run(path, func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			tr := track(t, raw)
			var packets []video.Packet
			for _, s := range tr.Samples {
				packets = append(packets, video.Packet{Data: raw[s.Offset : s.Offset+int64(s.Size)], PTS: s.PTS(), Key: s.Key})
			}
			var got bytes.Buffer
			var pts []int64
			err = video.Decode(video.Track{Codec: tr.Codec, Config: tr.Config, Width: int(tr.Width), Height: int(tr.Height)}, packets, func(f video.Frame) error {
				if f.PixelFormat() != "yuv420p" {
					return errors.New("not yuv420p: " + f.PixelFormat())
				}
				for _, p := range f.Planes() {
					got.Write(p)
				}
				pts = append(pts, f.PTS())
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			want, err := exec.Command(ffmpeg, "-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", "yuv420p", "-").Output()
			if err != nil {
				t.Fatal(err)
			}
			if len(pts) != len(tr.Samples) || !slices.IsSorted(pts) {
				t.Fatalf("%d frames decoded of %d samples, at %v", len(pts), len(tr.Samples), pts)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("the YUV planes differ from the reference decode (%d and %d bytes)", got.Len(), len(want))
			}
		})
	}
}

func track(t *testing.T, raw []byte) *mp4.Track {
	t.Helper()
	read := func(off, n int64) ([]byte, error) { return raw[off : off+n], nil }
	box, err := mp4.FindMovie(read, int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	mv, err := mp4.ParseMovie(raw[box.Offset:box.Offset+box.Size], int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := mv.Video()
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestRefusesWhatItCannotDecode: a codec the build lacks, a stream that
// starts past its keyframe, and damaged frames are errors, not pictures.
func TestRefusesWhatItCannotDecode(t *testing.T) {
	raw, err := os.ReadFile(videos(t)[0])
	if err != nil {
		t.Fatal(err)
	}
	tr := track(t, raw)
	vt := video.Track{Codec: tr.Codec, Config: tr.Config, Width: int(tr.Width), Height: int(tr.Height)}
	packets := func() []video.Packet {
		var out []video.Packet
		for _, s := range tr.Samples {
			out = append(out, video.Packet{Data: bytes.Clone(raw[s.Offset : s.Offset+int64(s.Size)]), PTS: s.PTS(), Key: s.Key})
		}
		return out
	}
	keep := func(video.Frame) error { return nil }
	vp9 := vt
	vp9.Codec = "vp09"
	if err := video.Decode(vp9, packets(), keep); err == nil || !strings.Contains(err.Error(), "not one shardfeed decodes") {
		t.Errorf("a VP9 track: %v", err)
	}
	ps := packets()
	if len(ps) < 3 || ps[1].Key {
		t.Fatalf("the video's second frame should not be a keyframe (%d frames)", len(ps))
	}
	if err := video.Decode(vt, ps[1:], keep); err == nil || !strings.Contains(err.Error(), "keyframe") {
		t.Errorf("decoding from a frame that is not a keyframe: %v", err)
	}
	ps = packets()
	for i := range ps[0].Data {
		ps[0].Data[i] ^= 0x5a
	}
	if err := video.Decode(vt, ps, keep); err == nil {
		t.Error("a scrambled keyframe decoded without an error")
	}
	ps = packets()
	ps[0].Data = ps[0].Data[:len(ps[0].Data)/3]
	frames := 0
	err = video.Decode(vt, ps, func(video.Frame) error { frames++; return nil })
	if err == nil {
		t.Errorf("a keyframe cut to a third decoded without an error (%d frames)", frames)
	}
	// Pictures larger than the track says (a sequence header the sample
	// entry does not match: a memory bomb's shape) are refused; the
	// track's own size decodes.
	small := vt
	small.Width, small.Height = 1, 1
	frames = 0
	if err := video.Decode(small, packets(), func(video.Frame) error { frames++; return nil }); err == nil {
		t.Errorf("%dx%d pictures decoded on a %dx%d track (%d frames)", vt.Width, vt.Height, small.Width, small.Height, frames)
	}
	if err := video.Decode(vt, packets(), keep); err != nil {
		t.Errorf("the video on its own track: %v", err)
	}
}

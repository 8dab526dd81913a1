//go:build ffmpeg

package video_test

import (
	"os"
	"slices"
	"testing"

	"github.com/shardfeed/shardfeed/sidecar/video"
)

// FuzzDecode feeds the decoders (dav1d's AV1, FFmpeg's H.264 and HEVC)
// damaged configuration records and frames: each call ends with frames or
// an error, never a crash, a frame no packet gave, or a picture larger
// than the track allows. Seeds: the first frames of LeRobot's AV1 videos.
func FuzzDecode(f *testing.F) {
	for _, path := range videos(&testing.T{})[:3] {
		raw, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		tr := track(&testing.T{}, raw)
		if len(tr.Samples) < 3 {
			f.Fatalf("%s has %d frames", path, len(tr.Samples))
		}
		sample := func(i int) []byte { s := tr.Samples[i]; return raw[s.Offset : s.Offset+int64(s.Size)] }
		f.Add(uint8(0), tr.Width, tr.Height, tr.Config, sample(0), sample(1), sample(2))
	}
	codecs := []string{"av01", "avc1", "hvc1"}
	f.Fuzz(func(t *testing.T, codec uint8, width, height uint16, config, key, next, last []byte) {
		tr := video.Track{Codec: codecs[int(codec)%len(codecs)], Config: config, Width: int(width%512) + 1, Height: int(height%512) + 1}
		var packets []video.Packet
		for i, data := range [][]byte{key, next, last} {
			if len(data) > 0 {
				packets = append(packets, video.Packet{Data: data, PTS: int64(100 + i), Key: i == 0})
			}
		}
		rgb := make([]byte, 3*16*16)
		_ = video.Decode(tr, packets, func(fr video.Frame) error {
			if !slices.ContainsFunc(packets, func(p video.Packet) bool { return p.PTS == fr.PTS() }) {
				t.Fatalf("a frame at pts %d, which no packet has", fr.PTS())
			}
			var pixels int
			for _, p := range fr.Planes() {
				pixels += len(p)
			}
			if limit := 6 * (2*tr.Width + 64) * (tr.Height + 64); pixels > limit { // 16-bit 4:4:4 at most
				t.Fatalf("a %s picture of %d plane bytes on a %dx%d track", fr.PixelFormat(), pixels, tr.Width, tr.Height)
			}
			return fr.RGB(rgb, 16, 16)
		})
	})
}

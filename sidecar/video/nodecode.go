//go:build !ffmpeg

package video

// Available says this build decodes video.
const Available = false

// Decoder names the decoder this binary links: none.
const Decoder = "none (this build has no FFmpeg: the image's amd64 sidecar and make build-video link it)"

// Decode decodes packets (decode order, from a keyframe) and calls fn
// with each frame, in presentation order. This build has no decoder.
func Decode(t Track, packets []Packet, _ func(Frame) error) error {
	if _, err := check(t, packets); err != nil {
		return err
	}
	return ErrNoDecoder
}

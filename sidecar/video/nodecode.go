//go:build !ffmpeg

package video

// Available says this build decodes video.
const Available = false

// Decode decodes packets (decode order, from a keyframe) and calls fn
// with each frame, in presentation order. This build has no decoder.
func Decode(t Track, packets []Packet, _ func(Frame) error) error {
	if _, err := check(t, packets); err != nil {
		return err
	}
	return ErrNoDecoder
}

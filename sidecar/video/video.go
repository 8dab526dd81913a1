// Package video decodes the frames of a video track in the sidecar: the
// samples of an MP4 track (sidecar/format/lerobot/mp4 finds them), handed
// to FFmpeg's decoders (H.264, HEVC, and AV1 through dav1d) through cgo,
// and converted to RGB planes (C, H, W) as LeRobot serves them.
//
// A build without the ffmpeg tag (the portable binary, and the tests'
// build without cgo) has no decoder: Decode returns ErrNoDecoder, and a
// stream that serves video says so. make build-video builds the one with
// FFmpeg linked in (hack/ffmpeg.sh).
package video

import (
	"errors"
	"fmt"
)

// ErrNoDecoder is returned by a build without FFmpeg.
var ErrNoDecoder = errors.New("this shardfeed binary decodes no video: it was built without FFmpeg (make build-video builds one with it, -tags ffmpeg); serve the stream's other columns with spec.streams[].columns")

// MaxPacketBytes bounds one compressed frame.
const MaxPacketBytes = 64 << 20

// MaxSide bounds a frame's width and height.
const MaxSide = 1 << 14

// Track is what opens a decoder: the codec, its configuration record and
// the frame size.
type Track struct {
	// Codec is the MP4 sample entry's four-character code.
	Codec string
	// Config is the payload of its avcC, hvcC or av1C box.
	Config        []byte
	Width, Height int
}

// Packet is one compressed frame, in decode order.
type Packet struct {
	Data []byte
	// PTS is its presentation time, in any unit: a decoded frame carries
	// its packet's.
	PTS int64
	Key bool
}

// Frame is a decoded picture, valid only during the callback that gets
// it.
type Frame interface {
	// PTS is its packet's.
	PTS() int64
	// Planes are its planes as decoded (Y, U, V for YUV), cropped to the
	// picture, each row of Width()>>shift bytes (without padding);
	// PixelFormat names their layout ("yuv420p").
	Planes() [][]byte
	PixelFormat() string
	// RGB writes the frame as RGB planes, 3 × height × width bytes
	// (C, H, W), into dst, scaled to width × height where they differ
	// from the picture's.
	RGB(dst []byte, width, height int) error
	// Size is the picture's width and height.
	Size() (width, height int)
	// RGBRows converts the frame to packed RGB at its own size: rows of
	// stride bytes, 3 × width bytes of pixels each, valid until the next
	// conversion (what a resize of its own reads).
	RGBRows() (rows []byte, stride int, err error)
}

// codecs are the sample entries shardfeed decodes, by decoder name.
var codecs = map[string]string{
	"avc1": "h264", "avc3": "h264",
	"hvc1": "hevc", "hev1": "hevc",
	"av01": "libdav1d",
}

// CanDecode says whether this binary decodes a track of codec (its MP4
// sample entry): nil, ErrNoDecoder in a build without FFmpeg, or an
// error naming a codec shardfeed does not decode.
func CanDecode(codec string) error {
	if _, ok := codecs[codec]; !ok {
		return codecError(codec)
	}
	if !Available {
		return ErrNoDecoder
	}
	return nil
}

func codecError(codec string) error {
	return fmt.Errorf("codec %q is not one shardfeed decodes (H.264 avc1/avc3, HEVC hvc1/hev1, AV1 av01): re-encode the videos (LeRobot writes AV1 by default)", codec)
}

// check refuses a track or packets no decoder should see.
func check(t Track, packets []Packet) (decoder string, err error) {
	decoder, ok := codecs[t.Codec]
	if !ok {
		return "", codecError(t.Codec)
	}
	if t.Width < 1 || t.Height < 1 || t.Width > MaxSide || t.Height > MaxSide {
		return "", fmt.Errorf("a %dx%d video: each side must be 1 to %d pixels", t.Width, t.Height, MaxSide)
	}
	if len(packets) > 0 && !packets[0].Key {
		return "", errors.New("decoding must start at a keyframe")
	}
	for i, p := range packets {
		if len(p.Data) == 0 || len(p.Data) > MaxPacketBytes {
			return "", fmt.Errorf("frame %d (pts %d) is %d bytes: 1 to %d are decoded", i, p.PTS, len(p.Data), MaxPacketBytes)
		}
	}
	return decoder, nil
}

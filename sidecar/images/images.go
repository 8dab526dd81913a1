// Package images decodes an image column's values (JPEG or PNG) into
// fixed-size tensors, as training code does with torchvision: the image in
// RGB, its shorter side resized (antialiased bilinear, Pillow's filter),
// then centre-cropped; uint8, height × width × 3.
package images

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"math"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
)

// MaxPixels bounds the pixels of an image decoded: a few bytes can declare
// a huge image (a decompression bomb). Pillow warns above 89 million.
const MaxPixels = 64 << 20

// Spec is what one column's images become.
type Spec struct {
	// Resize is the length the shorter side is resized to, the longer
	// side keeping the aspect ratio (truncated, as torchvision does).
	Resize int
	// Height and Width of the centre crop taken from the resized image;
	// at most Resize each.
	Height, Width int
	// Draft decodes a JPEG at 1/2, 1/4 or 1/8 of its size in libjpeg-turbo's
	// inverse DCT where the resized image is no larger (Pillow's
	// Image.draft), then resizes that: fewer pixels transformed, converted
	// and resized, a few levels from a full decode. The portable build
	// (Go's image/jpeg) always decodes at full size.
	Draft bool
}

// SpecOf is the spec an API decode (spec.decode[].image, a lerobot
// stream's frames) says: resize defaults to the larger of height and
// width.
func SpecOf(d datav1alpha1.ImageDecode) Spec {
	spec := Spec{Height: int(d.Height), Width: int(d.Width), Draft: d.Draft}
	spec.Resize = max(spec.Height, spec.Width)
	if d.Resize != nil {
		spec.Resize = int(*d.Resize)
	}
	return spec
}

// Check says what is wrong with the spec.
func (s Spec) Check() error {
	switch {
	case s.Height < 1 || s.Width < 1 || s.Resize < 1:
		return fmt.Errorf("resize %d and crop %d×%d must all be at least 1", s.Resize, s.Height, s.Width)
	case s.Height > s.Resize || s.Width > s.Resize:
		return fmt.Errorf("the crop %d×%d is larger than the resized shorter side %d: resize to at least %d", s.Height, s.Width, s.Resize, max(s.Height, s.Width))
	}
	return nil
}

// Bytes is the size of one decoded image.
func (s Spec) Bytes() int { return s.Height * s.Width * 3 }

// Decoder decodes images of a spec; one per goroutine (it keeps scratch
// buffers).
type Decoder struct {
	spec    Spec
	rgb     []byte // the decoded image, RGB rows
	scratch scratch
}

// NewDecoder returns a decoder of spec.
func NewDecoder(spec Spec) *Decoder { return &Decoder{spec: spec} }

// ErrFormat is an image that is neither JPEG nor PNG.
var ErrFormat = errors.New("not a JPEG or PNG image")

// Decode decodes the image src into dst (Spec.Bytes long).
func (d *Decoder) Decode(dst, src []byte) error {
	s := d.spec
	if len(dst) != s.Bytes() {
		return fmt.Errorf("images: destination of %d bytes for a %d×%d×3 image", len(dst), s.Height, s.Width)
	}
	switch {
	case bytes.HasPrefix(src, []byte{0xff, 0xd8}):
		return d.decodeJPEG(dst, src)
	case bytes.HasPrefix(src, []byte("\x89PNG\r\n\x1a\n")):
		return d.resizeInGo(dst, src, decodePNGInGo)
	}
	return ErrFormat
}

// ResizeRGB resizes and crops a picture already decoded to RGB (w×h
// pixels, rows of stride bytes: a video frame) into dst (Spec.Bytes
// long) as Decode does an image's.
func (d *Decoder) ResizeRGB(dst, src []byte, w, h, stride int) error {
	s := d.spec
	if len(dst) != s.Bytes() {
		return fmt.Errorf("images: destination of %d bytes for a %d×%d×3 image", len(dst), s.Height, s.Width)
	}
	if err := checkSize(w, h); err != nil {
		return err
	}
	if stride < 3*w || len(src) < (h-1)*stride+3*w {
		return fmt.Errorf("images: %d bytes in rows of %d do not hold a %d×%d RGB picture", len(src), stride, w, h)
	}
	kx, ky := d.kernels(w, h)
	resizeCrop(dst, src, stride, &kx, &ky, &d.scratch)
	return nil
}

// Size reads an image's height and width from its header (JPEG's frame,
// PNG's IHDR), decoding no pixel: what bucketing by shape measures. EXIF
// orientation is not applied (a rotated photo keeps its stored shape), as
// the decoders here do not apply it either.
func Size(src []byte) (height, width int, err error) {
	var g goDecoder
	switch {
	case bytes.HasPrefix(src, []byte{0xff, 0xd8}):
		g = decodeJPEGInGo
	case bytes.HasPrefix(src, []byte("\x89PNG\r\n\x1a\n")):
		g = decodePNGInGo
	default:
		return 0, 0, ErrFormat
	}
	cfg, err := g.config(bytes.NewReader(src))
	if err != nil {
		return 0, 0, err
	}
	if cfg.Width < 1 || cfg.Height < 1 {
		return 0, 0, fmt.Errorf("the image is %d×%d pixels", cfg.Width, cfg.Height)
	}
	return cfg.Height, cfg.Width, nil
}

// PNGRGB decodes src, an 8-bit RGB PNG (colour type 2: what Pillow opens
// as mode "RGB", and LeRobot's writer makes of a colour image), at its own
// size into packed RGB rows, in buf where it is large enough. A PNG of
// another kind is refused, naming Pillow's mode for it: torchvision's
// ToTensor gives those other channels (RGBA 4, L and P 1, I;16 a depth
// map), which an RGB image of 3 would not be.
func PNGRGB(buf, src []byte) (rgb []byte, width, height int, err error) {
	// The signature, then IHDR: length, type, width, height, bit depth,
	// colour type.
	const ihdrEnd = 8 + 8 + 13
	if !bytes.HasPrefix(src, []byte("\x89PNG\r\n\x1a\n")) {
		return nil, 0, 0, errors.New("not a PNG image")
	}
	if len(src) < ihdrEnd || string(src[12:16]) != "IHDR" {
		return nil, 0, 0, errors.New("a PNG image without its IHDR header")
	}
	if depth, kind := src[24], src[25]; depth != 8 || kind != 2 {
		return nil, 0, 0, fmt.Errorf("a PNG of colour type %d at %d bits (Pillow's mode %s): only 8-bit RGB PNGs (colour type 2, mode RGB) are served as RGB images", kind, depth, pillowMode(kind, depth))
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(src))
	if err != nil {
		return nil, 0, 0, err
	}
	if err := checkSize(cfg.Width, cfg.Height); err != nil {
		return nil, 0, 0, err
	}
	img, err := png.Decode(bytes.NewReader(src))
	if err != nil {
		return nil, 0, 0, err
	}
	return toRGB(buf, img), cfg.Width, cfg.Height, nil
}

// pillowMode is the mode Pillow opens a PNG of that colour type and bit
// depth in.
func pillowMode(kind, depth byte) string {
	switch {
	case kind == 0 && depth == 16:
		return "I;16"
	case kind == 0 && depth == 1:
		return "1"
	case kind == 0:
		return "L"
	case kind == 2:
		return "RGB"
	case kind == 3:
		return "P"
	case kind == 4:
		return "LA"
	case kind == 6:
		return "RGBA"
	}
	return "none: not a valid PNG"
}

// A Go decoder of one format, with its header reader.
type goDecoder struct {
	decode func(io.Reader) (image.Image, error)
	config func(io.Reader) (image.Config, error)
}

var (
	decodeJPEGInGo = goDecoder{jpeg.Decode, jpeg.DecodeConfig}
	decodePNGInGo  = goDecoder{png.Decode, png.DecodeConfig}
)

// resizeInGo decodes src with a Go decoder, its header checked first, and
// resizes it into dst.
func (d *Decoder) resizeInGo(dst, src []byte, g goDecoder) error {
	cfg, err := g.config(bytes.NewReader(src))
	if err != nil {
		return err
	}
	if err := checkSize(cfg.Width, cfg.Height); err != nil {
		return err
	}
	img, err := g.decode(bytes.NewReader(src))
	if err != nil {
		return err
	}
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	d.rgb = toRGB(d.rgb, img)
	kx, ky := d.kernels(w, h)
	resizeCrop(dst, d.rgb, w*3, &kx, &ky, &d.scratch)
	return nil
}

// kernels are the resize's weights for a w×h image: torchvision's Resize
// of the shorter side, then the centre crop's window of it.
func (d *Decoder) kernels(w, h int) (kx, ky kernel) { return d.kernelsFrom(w, h, w, h) }

// kernelsFrom are the weights of the resize of a w×h image when it was
// decoded at dw×dh (reduced by the DCT): the output is the full image's.
func (d *Decoder) kernelsFrom(w, h, dw, dh int) (kx, ky kernel) {
	s := d.spec
	rw, rh := resizedSize(w, h, s.Resize)
	return newKernel(dw, rw, centre(rw, s.Width), s.Width), newKernel(dh, rh, centre(rh, s.Height), s.Height)
}

func checkSize(w, h int) error {
	if w < 1 || h < 1 {
		return fmt.Errorf("the image is %d×%d pixels", w, h)
	}
	if int64(w)*int64(h) > MaxPixels {
		return fmt.Errorf("the image is %d×%d pixels, above the limit of %d million", w, h, MaxPixels>>20)
	}
	return nil
}

// resizedSize is torchvision's Resize(size) of a w×h image: the shorter
// side becomes size, the longer one size·long/short truncated.
func resizedSize(w, h, size int) (int, int) {
	if w <= h {
		return size, int(float64(size) * float64(h) / float64(w))
	}
	return int(float64(size) * float64(w) / float64(h)), size
}

// centre is torchvision's CenterCrop offset: round((n-c)/2), half to
// even as Python's round.
func centre(n, c int) int {
	return int(math.RoundToEven(float64(n-c) / 2))
}

// toRGB writes img's pixels as RGB rows into buf (grown as needed), alpha
// dropped as Pillow's convert("RGB") does.
func toRGB(buf []byte, img image.Image) []byte {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if cap(buf) < w*h*3 {
		buf = make([]byte, w*h*3)
	}
	buf = buf[:w*h*3]
	switch m := img.(type) {
	case *image.YCbCr:
		ycbcrToRGB(buf, m)
	case *image.Gray:
		for y := range h {
			row := m.Pix[y*m.Stride : y*m.Stride+w]
			out := buf[y*w*3:]
			for x, v := range row {
				out[x*3], out[x*3+1], out[x*3+2] = v, v, v
			}
		}
	case *image.RGBA: // an opaque PNG's pixels (with alpha, Go's decoder gives NRGBA)
		for y := range h {
			row := m.Pix[y*m.Stride:]
			out := buf[y*w*3:]
			for x := range w {
				if row[x*4+3] != 0xff {
					c := color.NRGBAModel.Convert(m.RGBAAt(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
					out[x*3], out[x*3+1], out[x*3+2] = c.R, c.G, c.B
					continue
				}
				out[x*3], out[x*3+1], out[x*3+2] = row[x*4], row[x*4+1], row[x*4+2]
			}
		}
	case *image.NRGBA:
		for y := range h {
			row := m.Pix[y*m.Stride:]
			out := buf[y*w*3:]
			for x := range w {
				out[x*3], out[x*3+1], out[x*3+2] = row[x*4], row[x*4+1], row[x*4+2]
			}
		}
	default:
		for y := range h {
			out := buf[y*w*3:]
			for x := range w {
				c := color.NRGBAModel.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
				out[x*3], out[x*3+1], out[x*3+2] = c.R, c.G, c.B
			}
		}
	}
	return buf
}

package images

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"
)

func TestSpecCheckSaysWhatIsWrong(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		want string
	}{
		{Spec{Resize: 256, Height: 224, Width: 224}, ""},
		{Spec{Resize: 224, Height: 224, Width: 224}, ""},
		{Spec{Resize: 0, Height: 224, Width: 224}, "at least 1"},
		{Spec{Resize: 200, Height: 224, Width: 100}, "resize to at least 224"},
	} {
		err := tc.spec.Check()
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.spec, err, tc.want)
		}
	}
}

func jpegOf(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), uint8(x + y), 255})
		}
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A hostile or damaged value is refused with an error, never a panic or
// an allocation it dictates.
func TestBadImagesAreRefused(t *testing.T) {
	good := jpegOf(t, 40, 30)
	// A JPEG whose frame header declares 60000×60000 pixels: its SOF0
	// segment's height and width are rewritten.
	bomb := bytes.Clone(good)
	sof := bytes.Index(bomb, []byte{0xff, 0xc0})
	if sof < 0 {
		t.Fatal("no SOF0 in the encoded JPEG")
	}
	bomb[sof+5], bomb[sof+6], bomb[sof+7], bomb[sof+8] = 0xea, 0x60, 0xea, 0x60
	for _, tc := range []struct {
		name string
		src  []byte
		want string
	}{
		{"empty", nil, ErrFormat.Error()},
		{"text", []byte("hello"), ErrFormat.Error()},
		{"truncated", good[:len(good)/2], "unexpected EOF"},
		{"bomb", bomb, "above the limit"},
		{"png header only", []byte("\x89PNG\r\n\x1a\n"), "EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecoder(Spec{Resize: 16, Height: 16, Width: 16})
			err := d.Decode(make([]byte, 16*16*3), tc.src)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want an error with %q", err, tc.want)
			}
		})
	}
	d := NewDecoder(Spec{Resize: 16, Height: 16, Width: 16})
	if err := d.Decode(make([]byte, 16*16*3), good); err != nil {
		t.Fatalf("the good JPEG: %v", err)
	}
	if err := d.Decode(make([]byte, 10), good); err == nil {
		t.Fatal("a destination of the wrong size was written")
	}
	if !errors.Is(d.Decode(make([]byte, 16*16*3), []byte("GIF89a")), ErrFormat) {
		t.Fatal("a GIF is not ErrFormat")
	}
}

// The resize keeps a flat colour flat and puts the centre of the image at
// the centre of the crop.
func TestResizeCropOfAFlatAndASplitImage(t *testing.T) {
	w, h := 50, 20
	src := make([]byte, w*h*3)
	for y := range h {
		for x := range w {
			v := byte(200)
			if x >= w/2 {
				v = 10
			}
			src[(y*w+x)*3], src[(y*w+x)*3+1], src[(y*w+x)*3+2] = v, 77, 255
		}
	}
	if rw, rh := resizedSize(w, h, 8); rw != 20 || rh != 8 {
		t.Fatalf("resized to %d×%d, want 20×8", rw, rh)
	}
	dst := make([]byte, 8*8*3)
	kx, ky := NewDecoder(Spec{Resize: 8, Height: 8, Width: 8}).kernels(w, h)
	resizeCrop(dst, src, w*3, &kx, &ky, &scratch{})
	for y := range 8 {
		for x := range 8 {
			p := dst[(y*8+x)*3:]
			if p[1] != 77 || p[2] != 255 {
				t.Fatalf("(%d,%d) = %v: a flat channel changed", x, y, p[:3])
			}
			if x < 3 && p[0] != 200 || x > 4 && p[0] != 10 {
				t.Fatalf("(%d,%d) red %d: the split is not at the centre", x, y, p[0])
			}
		}
	}
}

// A photo-sized JPEG (448×360, noisy: the bench's images) and a larger
// one to 224×224, the larger also in draft mode.
func BenchmarkDecodeResizeCrop(b *testing.B) {
	for _, tc := range []struct {
		w, h  int
		draft bool
	}{{448, 360, false}, {1024, 768, false}, {1024, 768, true}} {
		name := fmt.Sprintf("%dx%d", tc.w, tc.h)
		if tc.draft {
			name += "/draft" // decoded at 1/2 by the DCT in the cgo build
		}
		b.Run(name, func(b *testing.B) { benchDecode(b, tc.w, tc.h, tc.draft) })
	}
}

func benchDecode(b *testing.B, w, h int, draft bool) {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = byte(i*7 + i/1000*13)
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90}); err != nil {
		b.Fatal(err)
	}
	d := NewDecoder(Spec{Resize: 256, Height: 224, Width: 224, Draft: draft})
	dst := make([]byte, 224*224*3)
	b.SetBytes(int64(buf.Len()))
	for b.Loop() {
		if err := d.Decode(dst, buf.Bytes()); err != nil {
			b.Fatal(err)
		}
	}
}

// Size reads the frame header only: the declared size of a bomb is what
// it says (bucketing then refuses sides above its bound), a cut or foreign
// value is an error.
func TestSizeReadsTheHeaderOnly(t *testing.T) {
	good := jpegOf(t, 40, 30)
	bomb := bytes.Clone(good)
	sof := bytes.Index(bomb, []byte{0xff, 0xc0})
	bomb[sof+5], bomb[sof+6], bomb[sof+7], bomb[sof+8] = 0xea, 0x60, 0xea, 0x61
	for _, tc := range []struct {
		name string
		src  []byte
		h, w int
		want string
	}{
		{"jpeg", good, 30, 40, ""},
		{"bomb", bomb, 60000, 60001, ""},
		{"jpeg cut before its frame", good[:sof], 0, 0, "EOF"},
		{"empty", nil, 0, 0, ErrFormat.Error()},
		{"gif", []byte("GIF89a"), 0, 0, ErrFormat.Error()},
		{"png header only", []byte("\x89PNG\r\n\x1a\n"), 0, 0, "EOF"},
	} {
		h, w, err := Size(tc.src)
		if h != tc.h || w != tc.w || (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %d×%d, %v; want %d×%d, %q", tc.name, h, w, err, tc.h, tc.w, tc.want)
		}
	}
}

// FuzzSize: any bytes give a size of at least 1×1 or an error; nothing
// panics.
func FuzzSize(f *testing.F) {
	img := image.NewGray(image.Rect(0, 0, 3, 2))
	var b bytes.Buffer
	_ = jpeg.Encode(&b, img, nil)
	f.Add(b.Bytes())
	f.Add([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x05\x00\x00\x00\x07\x08\x02\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, src []byte) {
		h, w, err := Size(src)
		if err == nil && (h < 1 || w < 1) {
			t.Fatalf("%d×%d without an error", h, w)
		}
	})
}

// ResizeRGB of a picture's pixels (rows padded, as a video decoder's
// are) is Decode of the same picture as a lossless PNG; a buffer that
// cannot hold the picture is refused.
func TestResizeRGBIsDecodeOfTheSamePixels(t *testing.T) {
	w, h, stride := 70, 45, 70*3+17
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	rows := make([]byte, h*stride)
	for y := range h {
		for x := range w {
			c := color.NRGBA{byte(x*3 + y), byte(y*5 - x), byte(x * y), 255}
			img.SetNRGBA(x, y, c)
			copy(rows[y*stride+x*3:], []byte{c.R, c.G, c.B})
		}
	}
	var encoded bytes.Buffer
	if err := png.Encode(&encoded, img); err != nil {
		t.Fatal(err)
	}
	for _, spec := range []Spec{{Resize: 32, Height: 32, Width: 32}, {Resize: 40, Height: 30, Width: 36}, {Resize: 90, Height: 80, Width: 64}} {
		want, got := make([]byte, spec.Bytes()), make([]byte, spec.Bytes())
		if err := NewDecoder(spec).Decode(want, encoded.Bytes()); err != nil {
			t.Fatal(err)
		}
		if err := NewDecoder(spec).ResizeRGB(got, rows, w, h, stride); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%+v: ResizeRGB differs from Decode of the same pixels", spec)
		}
	}
	d := NewDecoder(Spec{Resize: 32, Height: 32, Width: 32})
	dst := make([]byte, 32*32*3)
	for _, tc := range []struct {
		name         string
		src          []byte
		w, h, stride int
		want         string
	}{
		{"short rows", rows, w, h, 3*w - 1, "do not hold"},
		{"a cut buffer", rows[:len(rows)-stride], w, h, stride, "do not hold"},
		{"no pixels", rows, 0, h, stride, "0×45"},
	} {
		if err := d.ResizeRGB(dst, tc.src, tc.w, tc.h, tc.stride); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// PNGRGB decodes 8-bit RGB PNGs at their own size, pixel for pixel, and
// refuses every other kind naming the mode Pillow would open it in.
func TestPNGRGB(t *testing.T) {
	encode := func(img image.Image) []byte {
		var b bytes.Buffer
		if err := png.Encode(&b, img); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	rgb := image.NewRGBA(image.Rect(0, 0, 5, 3))
	for i := range rgb.Pix {
		rgb.Pix[i] = byte(i * 7)
		if i%4 == 3 {
			rgb.Pix[i] = 0xff
		}
	}
	translucent := image.NewNRGBA(image.Rect(0, 0, 2, 2))
	translucent.Pix[3] = 0x80
	palette := image.NewPaletted(image.Rect(0, 0, 2, 2), color.Palette{color.Black, color.White})
	var jpg bytes.Buffer
	_ = jpeg.Encode(&jpg, rgb, nil)
	whole := encode(rgb)
	for _, tc := range []struct {
		name string
		src  []byte
		want string // "" for a decode
	}{
		{"rgb", whole, ""},
		{"grey", encode(image.NewGray(image.Rect(0, 0, 2, 2))), "mode L"},
		{"16-bit grey (a depth map)", encode(image.NewGray16(image.Rect(0, 0, 2, 2))), "mode I;16"},
		{"rgba", encode(translucent), "mode RGBA"},
		{"paletted", encode(palette), "mode P"},
		{"16-bit rgb", encode(image.NewRGBA64(image.Rect(0, 0, 2, 2))), "at 16 bits"},
		{"jpeg", jpg.Bytes(), "not a PNG"},
		{"header only", whole[:30], "EOF"},
		{"cut in its pixels", whole[:len(whole)-20], "EOF"},
		{"huge", pngHeader(1<<14, 1<<14), "above the limit"},
	} {
		got, w, h, err := PNGRGB(nil, tc.src)
		if tc.want != "" {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
			}
			continue
		}
		if err != nil || w != 5 || h != 3 {
			t.Fatalf("%s: %d×%d, %v", tc.name, w, h, err)
		}
		for i := range w * h {
			if !bytes.Equal(got[3*i:3*i+3], rgb.Pix[4*i:4*i+3]) {
				t.Fatalf("%s: pixel %d is %v, want %v", tc.name, i, got[3*i:3*i+3], rgb.Pix[4*i:4*i+3])
			}
		}
	}
}

// pngHeader is a PNG's signature and an 8-bit RGB IHDR of w×h, no pixels.
func pngHeader(w, h uint32) []byte {
	ihdr := []byte("IHDR\x00\x00\x00\x00\x00\x00\x00\x00\x08\x02\x00\x00\x00")
	binary.BigEndian.PutUint32(ihdr[4:], w)
	binary.BigEndian.PutUint32(ihdr[8:], h)
	out := append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0d"), ihdr...)
	return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(ihdr))
}

// FuzzPNGRGB: any bytes decode to width × height RGB pixels or an error;
// nothing panics, and no decode passes MaxPixels.
func FuzzPNGRGB(f *testing.F) {
	var b bytes.Buffer
	_ = png.Encode(&b, image.NewRGBA(image.Rect(0, 0, 3, 2)))
	f.Add(b.Bytes())
	f.Add(pngHeader(7, 5))
	f.Fuzz(func(t *testing.T, src []byte) {
		rgb, w, h, err := PNGRGB(nil, src)
		if err == nil && (w < 1 || h < 1 || len(rgb) != 3*w*h || w*h > MaxPixels) {
			t.Fatalf("%d×%d in %d bytes without an error", w, h, len(rgb))
		}
	})
}

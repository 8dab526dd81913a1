package images

import "image"

// libjpeg's YCbCr to RGB conversion (jdcolor.c), which Pillow's decoder
// applies: 16-bit fixed point, rounded, then clamped.
var crR, cbB, crG, cbG [256]int32

func init() {
	const scale = 16
	fix := func(x float64) int32 { return int32(x*(1<<scale) + 0.5) }
	const half = 1 << (scale - 1)
	for i := range 256 {
		x := int32(i - 128)
		crR[i] = (fix(1.40200)*x + half) >> scale
		cbB[i] = (fix(1.77200)*x + half) >> scale
		crG[i] = -fix(0.71414) * x
		cbG[i] = -fix(0.34414)*x + half
	}
}

func clamp(v int32) byte {
	switch {
	case v < 0:
		return 0
	case v > 255:
		return 255
	}
	return byte(v)
}

func rgbOf(y, cb, cr byte) (byte, byte, byte) {
	yy := int32(y)
	return clamp(yy + crR[cr]), clamp(yy + (cbG[cb]+crG[cr])>>16), clamp(yy + cbB[cb])
}

// ycbcrToRGB converts m into RGB rows in dst. Chroma subsampled 2×2 or 2×1
// is upsampled with libjpeg's "fancy" triangle filter, as Pillow's decoder
// does; other ratios take the nearest chroma sample.
func ycbcrToRGB(dst []byte, m *image.YCbCr) {
	b := m.Bounds()
	w, h := b.Dx(), b.Dy()
	switch m.SubsampleRatio {
	case image.YCbCrSubsampleRatio420, image.YCbCrSubsampleRatio422:
		fancy(dst, m, w, h)
		return
	}
	for y := range h {
		out := dst[y*w*3:]
		for x := range w {
			yi, ci := m.YOffset(b.Min.X+x, b.Min.Y+y), m.COffset(b.Min.X+x, b.Min.Y+y)
			out[x*3], out[x*3+1], out[x*3+2] = rgbOf(m.Y[yi], m.Cb[ci], m.Cr[ci])
		}
	}
}

// fancy upsamples 4:2:0 or 4:2:2 chroma as libjpeg's h2v2 and h2v1 fancy
// upsamplers (jdsample.c): vertically 3/4 of the nearer chroma row and 1/4
// of the farther (4:2:0), then horizontally the same between columns.
func fancy(dst []byte, m *image.YCbCr, w, h int) {
	v2 := m.SubsampleRatio == image.YCbCrSubsampleRatio420
	cw := (w + 1) / 2
	cb := make([]int32, cw)
	cr := make([]int32, cw)
	ucb := make([]byte, w)
	ucr := make([]byte, w)
	for y := range h {
		if v2 {
			cy := y / 2
			far := cy - 1 // the output row above the chroma row's centre
			if y%2 == 1 {
				far = cy + 1
			}
			far = min(max(far, 0), (h+1)/2-1)
			near, other := m.Cb[cy*m.CStride:], m.Cb[far*m.CStride:]
			nearR, otherR := m.Cr[cy*m.CStride:], m.Cr[far*m.CStride:]
			for i := range cw {
				cb[i] = 3*int32(near[i]) + int32(other[i])
				cr[i] = 3*int32(nearR[i]) + int32(otherR[i])
			}
			upsample2(ucb, cb, w, true)
			upsample2(ucr, cr, w, true)
		} else {
			row, rowR := m.Cb[y*m.CStride:], m.Cr[y*m.CStride:]
			for i := range cw {
				cb[i], cr[i] = int32(row[i]), int32(rowR[i])
			}
			upsample2(ucb, cb, w, false)
			upsample2(ucr, cr, w, false)
		}
		ys := m.Y[y*m.YStride:]
		out := dst[y*w*3:]
		for x := range w {
			out[x*3], out[x*3+1], out[x*3+2] = rgbOf(ys[x], ucb[x], ucr[x])
		}
	}
}

// upsample2 doubles a chroma row horizontally: with column sums (sums of
// 4× weight, vertical pass done) as h2v2, or plain samples as h2v1.
func upsample2(out []byte, c []int32, w int, summed bool) {
	n := len(c)
	at := func(i int) int32 { return c[min(max(i, 0), n-1)] }
	for i := range n {
		var a, b int32
		if summed {
			a = (3*c[i] + at(i-1) + 8) >> 4
			b = (3*c[i] + at(i+1) + 7) >> 4
			if i == 0 {
				a = (c[0]*4 + 8) >> 4
			}
			if i == n-1 {
				b = (c[i]*4 + 7) >> 4
			}
		} else {
			a = (3*c[i] + at(i-1) + 1) >> 2
			b = (3*c[i] + at(i+1) + 2) >> 2
			if i == 0 {
				a = c[0]
			}
			if i == n-1 {
				b = c[i]
			}
		}
		if 2*i < w {
			out[2*i] = byte(a)
		}
		if 2*i+1 < w {
			out[2*i+1] = byte(b)
		}
	}
}

package images

import "math"

// The resampling is Pillow's (Image.resize with BILINEAR, which torchvision's
// Resize applies to PIL images): a separable convolution with a triangle
// filter widened by the scale when shrinking (antialiasing), weights in
// fixed point with 22 fractional bits, the horizontal pass first, each pass
// rounded to 8 bits. Computing only the pixels of the crop gives the very
// pixels the whole resize would.

const precisionBits = 32 - 8 - 2

// kernel is the fixed-point weights of n output positions along one axis:
// output i reads first[i] and the count[i] input positions after it.
type kernel struct {
	first, count []int
	weights      []int32 // size per output position
	size         int
}

// newKernel computes the weights of output positions [out0, out0+n) when
// inSize positions are resized to outSize.
func newKernel(inSize, outSize, out0, n int) kernel {
	scale := float64(inSize) / float64(outSize)
	filterScale := max(scale, 1)
	support := filterScale // the triangle filter's support is 1
	size := int(math.Ceil(support))*2 + 1
	k := kernel{first: make([]int, n), count: make([]int, n), weights: make([]int32, n*size), size: size}
	w := make([]float64, size)
	for i := range n {
		center := (float64(out0+i) + 0.5) * scale
		lo := int(center - support + 0.5) // truncated toward zero, as C's cast
		lo = max(lo, 0)
		hi := min(int(center+support+0.5), inSize)
		count := hi - lo
		total := 0.0
		for x := range count {
			w[x] = triangle((float64(x+lo) - center + 0.5) / filterScale)
			total += w[x]
		}
		for x := range count {
			v := w[x]
			if total != 0 {
				v /= total
			}
			if v < 0 {
				k.weights[i*size+x] = int32(v*(1<<precisionBits) - 0.5)
			} else {
				k.weights[i*size+x] = int32(v*(1<<precisionBits) + 0.5)
			}
		}
		k.first[i], k.count[i] = lo, count
	}
	return k
}

func triangle(x float64) float64 {
	x = math.Abs(x)
	if x < 1 {
		return 1 - x
	}
	return 0
}

// clip8 turns a fixed-point sum into a byte.
func clip8(v int32) byte { return clamp(v >> precisionBits) }

// resizeCrop resizes the RGB image src (w×h, rows of 3w bytes) to rw×rh
// and writes its cw×ch window at (left, top) to dst (rows of 3cw bytes).
// tmp is scratch space, grown as needed and returned for reuse.
func resizeCrop(dst, src []byte, w, h, rw, rh, left, top, cw, ch int, tmp []byte) []byte {
	kx := newKernel(w, rw, left, cw)
	ky := newKernel(h, rh, top, ch)
	// The input rows the vertical pass reads.
	y0 := ky.first[0]
	y1 := ky.first[ch-1] + ky.count[ch-1]
	rows := y1 - y0
	need := rows * cw * 3
	if cap(tmp) < need {
		tmp = make([]byte, need)
	}
	tmp = tmp[:need]
	const half = 1 << (precisionBits - 1)
	for y := range rows {
		in := src[(y0+y)*w*3:]
		out := tmp[y*cw*3:]
		for x := range cw {
			r, g, b := int32(half), int32(half), int32(half)
			ws := kx.weights[x*kx.size:]
			p := in[kx.first[x]*3:]
			for i := range kx.count[x] {
				k := ws[i]
				r += int32(p[i*3]) * k
				g += int32(p[i*3+1]) * k
				b += int32(p[i*3+2]) * k
			}
			out[x*3], out[x*3+1], out[x*3+2] = clip8(r), clip8(g), clip8(b)
		}
	}
	stride := cw * 3
	for y := range ch {
		ws := ky.weights[y*ky.size:]
		first := ky.first[y] - y0
		out := dst[y*stride : (y+1)*stride]
		for x := range stride {
			v := int32(half)
			for i := range ky.count[y] {
				v += int32(tmp[(first+i)*stride+x]) * ws[i]
			}
			out[x] = clip8(v)
		}
	}
	return tmp
}

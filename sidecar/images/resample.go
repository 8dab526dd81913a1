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
	first, count []int32
	weights      []int32 // size per output position
	size         int
}

// span is the input positions the kernel reads, [lo, hi).
func (k *kernel) span() (lo, hi int) {
	return int(k.first[0]), int(k.first[len(k.first)-1] + k.count[len(k.count)-1])
}

// rows is the number of input positions the kernel reads.
func (k *kernel) rows() int {
	lo, hi := k.span()
	return hi - lo
}

// newKernel computes the weights of output positions [out0, out0+n) when
// inSize positions are resized to outSize.
func newKernel(inSize, outSize, out0, n int) kernel {
	scale := float64(inSize) / float64(outSize)
	filterScale := max(scale, 1)
	support := filterScale // the triangle filter's support is 1
	size := int(math.Ceil(support))*2 + 1
	k := kernel{first: make([]int32, n), count: make([]int32, n), weights: make([]int32, n*size), size: size}
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
		k.first[i], k.count[i] = int32(lo), int32(count)
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

// resizeCrop resizes src (RGB rows of stride bytes) with the kernels kx
// and ky into dst (RGB rows of cw pixels, ch of them, cw and ch being the
// kernels' lengths). s is scratch space, grown as needed.
func resizeCrop(dst, src []byte, stride int, kx, ky *kernel, s *scratch) {
	cw, ch := len(kx.first), len(ky.first)
	y0, rows := int(ky.first[0]), ky.rows()
	out := cw * 3
	s.grow(rows, out)
	tmp, acc := s.rows[:rows*out], s.acc[:out]
	for y := range rows {
		horizontal(tmp[y*out:(y+1)*out], src[(y0+y)*stride:], kx)
	}
	for y := range ch {
		for x := range acc {
			acc[x] = half
		}
		first := int(ky.first[y]) - y0
		for i, k := range ky.weights[y*ky.size : y*ky.size+int(ky.count[y])] {
			row := tmp[(first+i)*out : (first+i+1)*out]
			row = row[:len(acc)]
			for x, v := range row {
				acc[x] += int32(v) * k
			}
		}
		o := dst[y*out : (y+1)*out]
		o = o[:len(acc)]
		for x, v := range acc {
			o[x] = clip8(v)
		}
	}
}

// scratch is a decoder's working memory for resizes, kept between images.
type scratch struct {
	rows []byte  // the input rows the vertical pass reads, resized horizontally
	acc  []int32 // one output row's vertical sums
}

// grow makes room for rows rows of stride bytes.
func (s *scratch) grow(rows, stride int) {
	if cap(s.rows) < rows*stride {
		s.rows = make([]byte, rows*stride)
	}
	if cap(s.acc) < stride {
		s.acc = make([]int32, stride)
	}
}

// half rounds a fixed-point sum to nearest.
const half = 1 << (precisionBits - 1)

// horizontal resizes one RGB row of src into out, k's positions.
func horizontal(out, src []byte, k *kernel) {
	for x := range len(out) / 3 {
		r, g, b := int32(half), int32(half), int32(half)
		ws := k.weights[x*k.size : x*k.size+int(k.count[x])]
		p := src[k.first[x]*3:]
		p = p[:len(ws)*3]
		for i, w := range ws {
			px := p[i*3 : i*3+3 : i*3+3]
			r += int32(px[0]) * w
			g += int32(px[1]) * w
			b += int32(px[2]) * w
		}
		o := out[x*3 : x*3+3 : x*3+3]
		o[0], o[1], o[2] = clip8(r), clip8(g), clip8(b)
	}
}

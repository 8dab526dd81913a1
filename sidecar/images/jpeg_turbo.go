//go:build cgo && libjpeg

package images

/*
#cgo CFLAGS: -O3
#cgo LDFLAGS: -l:libjpeg.a
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jpeglib.h>
#include <jerror.h>

// libjpeg's default error handler calls exit(): this one jumps back to
// the call with the message instead. A truncated image is an error here
// (libjpeg only warns and pads it with grey), as it is in Pillow.
typedef struct {
	struct jpeg_error_mgr mgr;
	jmp_buf jump;
	char msg[JMSG_LENGTH_MAX];
	int eof;
} sf_err;

typedef struct {
	struct jpeg_decompress_struct cinfo;
	sf_err err;
} sf_jpeg;

static void sf_error_exit(j_common_ptr c) {
	sf_err *e = (sf_err *)c->err;
	(*c->err->format_message)(c, e->msg);
	longjmp(e->jump, 1);
}

static void sf_emit_message(j_common_ptr c, int level) {
	sf_err *e = (sf_err *)c->err;
	if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) {
		e->eof = 1;
		(*c->err->format_message)(c, e->msg);
		longjmp(e->jump, 1);
	}
}

enum { SF_OK, SF_ERROR, SF_EOF, SF_OTHER, SF_SHORT };

static int sf_failed(sf_jpeg *j, char *msg) {
	memcpy(msg, j->err.msg, JMSG_LENGTH_MAX);
	return j->err.eof ? SF_EOF : SF_ERROR;
}

// sf_open reads the header of the JPEG src (which must outlive j) into j,
// allocated by the caller and released with sf_close. SF_OTHER: a colour
// space this path does not convert (CMYK), which the caller decodes
// otherwise.
static int sf_open(sf_jpeg *j, const unsigned char *src, unsigned long n, int *w, int *h, char *msg) {
	memset(j, 0, sizeof *j);
	j->cinfo.err = jpeg_std_error(&j->err.mgr);
	j->err.mgr.error_exit = sf_error_exit;
	j->err.mgr.emit_message = sf_emit_message;
	if (setjmp(j->err.jump)) return sf_failed(j, msg);
	jpeg_create_decompress(&j->cinfo);
	jpeg_mem_src(&j->cinfo, src, n);
	jpeg_read_header(&j->cinfo, TRUE);
	*w = (int)j->cinfo.image_width;
	*h = (int)j->cinfo.image_height;
	if (j->cinfo.jpeg_color_space == JCS_CMYK || j->cinfo.jpeg_color_space == JCS_YCCK) return SF_OTHER;
	return SF_OK;
}

static void sf_close(sf_jpeg *j) { jpeg_destroy_decompress(&j->cinfo); }

// sf_scale asks libjpeg-turbo to decode at m/8 of the image's size (its
// reduced inverse DCT: fewer pixels transformed, converted and resized)
// and says the size it will decode at.
static void sf_scale(sf_jpeg *j, int m, int *w, int *h) {
	j->cinfo.scale_num = (unsigned int)m;
	j->cinfo.scale_denom = 8;
	jpeg_calc_output_dimensions(&j->cinfo);
	*w = (int)j->cinfo.output_width;
	*h = (int)j->cinfo.output_height;
}

// sf_read decodes rows [y0, y1) of at least columns [x0, x1) into dst as
// RGBX rows of *cw pixels starting at column *cx (libjpeg widens the
// columns to whole blocks); the rest of the image is skipped, not
// transformed, but still read, so a truncated one is an error. SF_SHORT:
// dst is smaller than *cw × (y1 − y0) pixels, and nothing was decoded.
static int sf_read(sf_jpeg *j, unsigned char *dst, size_t cap, int x0, int x1, int y0, int y1, int *cx, int *cw, char *msg) {
	struct jpeg_decompress_struct *c = &j->cinfo;
	if (setjmp(j->err.jump)) return sf_failed(j, msg);
	c->out_color_space = JCS_EXT_RGBX;
	jpeg_start_decompress(c);
	JDIMENSION xoff = (JDIMENSION)x0, width = (JDIMENSION)(x1 - x0);
	if (width < c->output_width) jpeg_crop_scanline(c, &xoff, &width);
	*cx = (int)xoff;
	*cw = (int)width;
	size_t stride = (size_t)width * 4;
	if (stride * (size_t)(y1 - y0) > cap) {
		jpeg_abort_decompress(c);
		return SF_SHORT;
	}
	if (y0 > 0) jpeg_skip_scanlines(c, (JDIMENSION)y0);
	JSAMPROW rows[16];
	while (c->output_scanline < (JDIMENSION)y1) {
		JDIMENSION k = (JDIMENSION)y1 - c->output_scanline;
		if (k > 16) k = 16;
		for (JDIMENSION i = 0; i < k; i++) rows[i] = dst + (size_t)(c->output_scanline - y0 + i) * stride;
		jpeg_read_scanlines(c, rows, k);
	}
	if (c->output_scanline < c->output_height) jpeg_skip_scanlines(c, c->output_height - c->output_scanline);
	jpeg_finish_decompress(c);
	return SF_OK;
}

// Pillow's fixed-point resampling (see resample.go, whose kernels these
// are), its hot loops in C: src is RGBX rows, dst RGB rows. The
// horizontal pass, a few taps a pixel, takes one 4-lane multiply-add a
// tap (SSE4.1, on nearly every x86-64); the vertical one, long rows, is
// left to the compiler's vectoriser.
#define SF_BITS 22
static inline unsigned char sf_clip8(int32_t v) {
	v >>= SF_BITS;
	return v < 0 ? 0 : v > 255 ? 255 : (unsigned char)v;
}

static void sf_horizontal(unsigned char *out, const unsigned char *in, const int *first, const int *count,
		const int32_t *w, int size, int cw) {
	const int32_t half = 1 << (SF_BITS - 1);
	for (int x = 0; x < cw; x++) {
		int32_t a[4] = {half, half, half, half};
		const int32_t *k = w + (size_t)x * size;
		const unsigned char *p = in + (size_t)first[x] * 4;
		for (int i = 0; i < count[x]; i++)
			for (int c = 0; c < 3; c++) a[c] += (int32_t)p[i * 4 + c] * k[i];
		for (int c = 0; c < 3; c++) out[x * 3 + c] = sf_clip8(a[c]);
	}
}

#if defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("sse4.1")))
static void sf_horizontal_sse41(unsigned char *out, const unsigned char *in, const int *first, const int *count,
		const int32_t *w, int size, int cw) {
	const __m128i half = _mm_set1_epi32(1 << (SF_BITS - 1));
	for (int x = 0; x < cw; x++) {
		__m128i a = half;
		const int32_t *k = w + (size_t)x * size;
		const unsigned char *p = in + (size_t)first[x] * 4;
		for (int i = 0; i < count[x]; i++) {
			int32_t px;
			memcpy(&px, p + i * 4, 4);
			a = _mm_add_epi32(a, _mm_mullo_epi32(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(px)), _mm_set1_epi32(k[i])));
		}
		// >> 22, then saturated to 16 and to 8 bits: sf_clip8 on each lane.
		a = _mm_srai_epi32(a, SF_BITS);
		a = _mm_packus_epi16(_mm_packs_epi32(a, a), a);
		int32_t o = _mm_cvtsi128_si32(a);
		memcpy(out + x * 3, &o, 3);
	}
}
#endif

// On x86-64 the vertical pass is compiled twice, for AVX2 and for the
// baseline, and the loader picks one; elsewhere once.
#if defined(__x86_64__)
__attribute__((target_clones("avx2", "default")))
#endif
static void sf_resize(unsigned char *dst, const unsigned char *src, int src_stride,
		const int *kx_first, const int *kx_count, const int32_t *kx_w, int kx_size,
		const int *ky_first, const int *ky_count, const int32_t *ky_w, int ky_size,
		int cw, int ch, unsigned char *tmp, int32_t *acc) {
	const int32_t half = 1 << (SF_BITS - 1);
	int y0 = ky_first[0], rows = ky_first[ch - 1] + ky_count[ch - 1] - y0, stride = cw * 3;
	void (*horizontal)(unsigned char *, const unsigned char *, const int *, const int *, const int32_t *, int, int) = sf_horizontal;
#if defined(__x86_64__)
	if (__builtin_cpu_supports("sse4.1")) horizontal = sf_horizontal_sse41;
#endif
	for (int y = 0; y < rows; y++)
		horizontal(tmp + (size_t)y * stride, src + (size_t)(y0 + y) * src_stride, kx_first, kx_count, kx_w, kx_size, cw);
	for (int y = 0; y < ch; y++) {
		for (int x = 0; x < stride; x++) acc[x] = half;
		const int32_t *w = ky_w + (size_t)y * ky_size;
		for (int i = 0; i < ky_count[y]; i++) {
			const unsigned char *row = tmp + (size_t)(ky_first[y] - y0 + i) * stride;
			int32_t k = w[i];
			for (int x = 0; x < stride; x++) acc[x] += (int32_t)row[x] * k;
		}
		unsigned char *out = dst + (size_t)y * stride;
		for (int x = 0; x < stride; x++) out[x] = sf_clip8(acc[x]);
	}
}
*/
import "C"

import (
	"fmt"
	"io"
	"unsafe"
)

// JPEGDecoder names the JPEG decoder this binary was built with.
var JPEGDecoder = fmt.Sprintf("libjpeg-turbo %d.%d.%d (cgo)",
	C.LIBJPEG_TURBO_VERSION_NUMBER/1000000, C.LIBJPEG_TURBO_VERSION_NUMBER/1000%1000, C.LIBJPEG_TURBO_VERSION_NUMBER%1000)

// blockMargin widens the decoded region beyond what the resize reads, so
// that libjpeg's chroma upsampling at the region's edges (where it has no
// neighbour) never reaches a pixel the resize uses.
const blockMargin = 16

// decodeJPEG decodes and resizes the JPEG src into dst with libjpeg-turbo:
// only the blocks the crop needs are transformed.
func (d *Decoder) decodeJPEG(dst, src []byte) error {
	if len(src) == 0 {
		return io.ErrUnexpectedEOF
	}
	j := (*C.sf_jpeg)(C.malloc(C.sizeof_sf_jpeg))
	defer C.free(unsafe.Pointer(j))
	defer C.sf_close(j)
	var msg [C.JMSG_LENGTH_MAX]C.char
	fail := func(rc C.int) error {
		if rc == C.SF_EOF {
			return fmt.Errorf("jpeg: %w (%s)", io.ErrUnexpectedEOF, C.GoString(&msg[0]))
		}
		return fmt.Errorf("jpeg: %s", C.GoString(&msg[0]))
	}
	var cw, ch C.int
	switch rc := C.sf_open(j, (*C.uchar)(unsafe.SliceData(src)), C.ulong(len(src)), &cw, &ch, &msg[0]); rc {
	case C.SF_OK:
	case C.SF_OTHER:
		return d.resizeInGo(dst, src, decodeJPEGInGo)
	default:
		return fail(rc)
	}
	w, h := int(cw), int(ch)
	if err := checkSize(w, h); err != nil {
		return err
	}
	// Decoded smaller by the DCT where the resize shrinks the image
	// anyway; the resize then maps the smaller image onto the same output.
	var sw, sh C.int
	C.sf_scale(j, C.int(d.dctScale(w, h)), &sw, &sh)
	kx, ky := d.kernelsFrom(w, h, int(sw), int(sh))
	w, h = int(sw), int(sh)
	x0, x1 := kx.span()
	y0, y1 := ky.span()
	x0, x1 = max(x0-blockMargin, 0), min(x1+blockMargin, w)
	y0, y1 = max(y0-blockMargin, 0), min(y1+blockMargin, h)
	var cx, cwidth C.int
	read := func() C.int {
		return C.sf_read(j, (*C.uchar)(unsafe.SliceData(d.rgb[:cap(d.rgb)])), C.size_t(cap(d.rgb)), C.int(x0), C.int(x1), C.int(y0), C.int(y1),
			&cx, &cwidth, &msg[0])
	}
	rc := read()
	if rc == C.SF_SHORT {
		// The region is larger than any before: grow the scratch image to
		// it and read the image again.
		d.rgb = make([]byte, int(cwidth)*4*(y1-y0))
		C.sf_close(j)
		if rc = C.sf_open(j, (*C.uchar)(unsafe.SliceData(src)), C.ulong(len(src)), &cw, &ch, &msg[0]); rc == C.SF_OK {
			C.sf_scale(j, C.int(d.dctScale(int(cw), int(ch))), &sw, &sh)
			rc = read()
		}
	}
	if rc != C.SF_OK {
		return fail(rc)
	}
	// The kernels read from the region's first row and column.
	kx.shift(-int(cx))
	ky.shift(-y0)
	d.resizeInC(dst, int(cwidth)*4, &kx, &ky)
	return nil
}

// resizeInC is resizeCrop's loops in C, from d.rgb (RGBX rows of stride
// bytes).
func (d *Decoder) resizeInC(dst []byte, stride int, kx, ky *kernel) {
	s := d.spec
	d.scratch.grow(ky.rows(), s.Width*3)
	C.sf_resize((*C.uchar)(unsafe.SliceData(dst)), (*C.uchar)(unsafe.SliceData(d.rgb)), C.int(stride),
		cInts(kx.first), cInts(kx.count), (*C.int32_t)(unsafe.SliceData(kx.weights)), C.int(kx.size),
		cInts(ky.first), cInts(ky.count), (*C.int32_t)(unsafe.SliceData(ky.weights)), C.int(ky.size),
		C.int(s.Width), C.int(s.Height), (*C.uchar)(unsafe.SliceData(d.scratch.rows)), (*C.int32_t)(unsafe.SliceData(d.scratch.acc)))
}

func cInts(v []int32) *C.int { return (*C.int)(unsafe.SliceData(v)) }

// dctScale is the m of the m/8 scale a JPEG of w×h decodes at in draft
// mode: Pillow's Image.draft to the resized size (the largest reduction of
// 1/2, 1/4 and 1/8 that both sides allow, whole). 8, the full size, when
// the spec is not a draft.
func (d *Decoder) dctScale(w, h int) int {
	if !d.spec.Draft {
		return 8
	}
	rw, rh := resizedSize(w, h, d.spec.Resize)
	scale := min(w/rw, h/rh)
	for _, s := range []int{8, 4, 2} {
		if scale >= s {
			return 8 / s
		}
	}
	return 8
}

// shift moves the input positions by d (when the input is a region that
// begins at -d).
func (k *kernel) shift(d int) {
	for i := range k.first {
		k.first[i] += int32(d)
	}
}

//go:build ffmpeg

package video

/*
#cgo pkg-config: --static libavcodec libswscale libavutil
#include <stdlib.h>
#include <string.h>
#include <libavcodec/avcodec.h>
#include <libavutil/imgutils.h>
#include <libavutil/macros.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
#if defined(__x86_64__)
#include <tmmintrin.h>
#endif

typedef struct {
	AVCodecContext *ctx;
	AVPacket *pkt;
	AVFrame *frame;
	struct SwsContext *sws;
	// What sws was last made for (source size and format, destination
	// size) and its colour matrix and range.
	int sws_key[5], sws_cs, sws_full;
	uint8_t *rgb;
	int rgb_size;
} sf_decoder;

// sf_open opens the named decoder on one thread, with the configuration
// record as its extradata; errors are AVERROR codes.
static int sf_open(sf_decoder *d, const char *name, const uint8_t *config, int config_len, int width, int height) {
	const AVCodec *codec = avcodec_find_decoder_by_name(name);
	if (!codec) return AVERROR_DECODER_NOT_FOUND;
	d->ctx = avcodec_alloc_context3(codec);
	d->pkt = av_packet_alloc();
	d->frame = av_frame_alloc();
	if (!d->ctx || !d->pkt || !d->frame) return AVERROR(ENOMEM);
	if (config_len > 0) {
		d->ctx->extradata = av_mallocz(config_len + AV_INPUT_BUFFER_PADDING_SIZE);
		if (!d->ctx->extradata) return AVERROR(ENOMEM);
		memcpy(d->ctx->extradata, config, config_len);
		d->ctx->extradata_size = config_len;
	}
	d->ctx->width = width;
	d->ctx->height = height;
	// A bitstream whose pictures are larger than its track says (a
	// hostile sequence header) is refused, not decoded at its own size:
	// about twice the track's pixels, with room for the coded size's
	// alignment.
	d->ctx->max_pixels = (2 * (int64_t)width + 64) * ((int64_t)height + 64);
	// One thread: the sidecar decodes as many shards at once as it has
	// cores. Explode: a damaged frame is an error, never concealed.
	d->ctx->thread_count = 1;
	d->ctx->err_recognition |= AV_EF_EXPLODE;
	return avcodec_open2(d->ctx, codec, NULL);
}

static void sf_close(sf_decoder *d) {
	avcodec_free_context(&d->ctx);
	av_packet_free(&d->pkt);
	av_frame_free(&d->frame);
	sws_freeContext(d->sws);
	av_free(d->rgb);
}

// sf_send sends one packet (data NULL: the end of the stream).
static int sf_send(sf_decoder *d, const uint8_t *data, int size, int64_t pts, int key) {
	if (!data) return avcodec_send_packet(d->ctx, NULL);
	av_packet_unref(d->pkt);
	int err = av_new_packet(d->pkt, size);
	if (err < 0) return err;
	memcpy(d->pkt->data, data, size);
	d->pkt->pts = pts;
	d->pkt->dts = AV_NOPTS_VALUE;
	if (key) d->pkt->flags |= AV_PKT_FLAG_KEY;
	return avcodec_send_packet(d->ctx, d->pkt);
}

// sf_receive gets the next frame: 0, AVERROR(EAGAIN), AVERROR_EOF or an
// error; a frame the decoder marks corrupt is AVERROR_INVALIDDATA.
static int sf_receive(sf_decoder *d) {
	av_frame_unref(d->frame);
	int err = avcodec_receive_frame(d->ctx, d->frame);
	if (err < 0) return err;
	if ((d->frame->flags & AV_FRAME_FLAG_CORRUPT) || d->frame->decode_error_flags) return AVERROR_INVALIDDATA;
	return 0;
}

// sf_unpack splits a row of packed RGB into its R, G and B rows.
static void sf_unpack_c(const uint8_t *restrict p, uint8_t *restrict r, uint8_t *restrict g, uint8_t *restrict b, int w) {
	for (int x = 0; x < w; x++, p += 3) {
		r[x] = p[0]; g[x] = p[1]; b[x] = p[2];
	}
}

#if defined(__x86_64__)
// sf_unpack_ssse3 is sf_unpack sixteen pixels a step with SSSE3's byte
// shuffles: of each 48 bytes, the masks pick from each 16-byte third the
// bytes of one channel.
__attribute__((target("ssse3")))
static void sf_unpack_ssse3(const uint8_t *restrict p, uint8_t *restrict r, uint8_t *restrict g, uint8_t *restrict b, int w) {
	static const int8_t m[3][3][16] = {
		{{0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}, {-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1},
		 {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13}},
		{{1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}, {-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1},
		 {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14}},
		{{2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}, {-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1},
		 {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15}},
	};
	uint8_t *out[3] = {r, g, b};
	int x = 0;
	for (; x + 16 <= w; x += 16, p += 48) {
		__m128i lo = _mm_loadu_si128((const __m128i *)p), mid = _mm_loadu_si128((const __m128i *)(p + 16)),
			hi = _mm_loadu_si128((const __m128i *)(p + 32));
		for (int k = 0; k < 3; k++) {
			__m128i v = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(lo, _mm_loadu_si128((const __m128i *)m[k][0])),
				_mm_shuffle_epi8(mid, _mm_loadu_si128((const __m128i *)m[k][1]))), _mm_shuffle_epi8(hi, _mm_loadu_si128((const __m128i *)m[k][2])));
			_mm_storeu_si128((__m128i *)(out[k] + x), v);
		}
	}
	sf_unpack_c(p, r + x, g + x, b + x, w - x);
}
#endif

static void sf_unpack(const uint8_t *p, uint8_t *r, uint8_t *g, uint8_t *b, int w) {
#if defined(__x86_64__)
	if (__builtin_cpu_supports("ssse3")) {
		sf_unpack_ssse3(p, r, g, b, w);
		return;
	}
#endif
	sf_unpack_c(p, r, g, b, w);
}

// sf_convert converts the frame to packed RGB rows of w × h pixels in
// d->rgb, rows of sf_stride(w) bytes, with the frame's own colour matrix
// and range and swscale's bicubic filter, as torchcodec (LeRobot's default
// backend) converts: the filter decides how chroma is upsampled where
// swscale has no exact path for the format (10-bit pictures, odd heights),
// where a bilinear one (PyAV's to_ndarray) differs by tens of levels at
// colour edges.
static int sf_stride(int w) { return FFALIGN(w * 3, 64); }

static int sf_convert(sf_decoder *d, int w, int h) {
	AVFrame *f = d->frame;
	int key[5] = {f->width, f->height, f->format, w, h};
	int same = d->sws && !memcmp(key, d->sws_key, sizeof key);
	d->sws = sws_getCachedContext(d->sws, f->width, f->height, f->format, w, h, AV_PIX_FMT_RGB24, SWS_BICUBIC, NULL, NULL, NULL);
	if (!d->sws) return AVERROR(EINVAL);
	memcpy(d->sws_key, key, sizeof key);
	int cs = f->colorspace == AVCOL_SPC_UNSPECIFIED ? SWS_CS_DEFAULT : f->colorspace;
	int src_full = f->color_range == AVCOL_RANGE_JPEG;
	// Setting the details re-initialises the converter's tables: once a
	// context and colour, not once a frame.
	if (!same || cs != d->sws_cs || src_full != d->sws_full) {
		sws_setColorspaceDetails(d->sws, sws_getCoefficients(cs), src_full, sws_getCoefficients(SWS_CS_DEFAULT), 1, 0, 1 << 16, 1 << 16);
		d->sws_cs = cs;
		d->sws_full = src_full;
	}
	// swscale's SIMD may write past a row's end: rows of a padded stride,
	// and slack after the last.
	int stride = sf_stride(w);
	int need = stride * h + 64;
	if (d->rgb_size < need) {
		av_free(d->rgb);
		d->rgb = av_malloc(need);
		if (!d->rgb) { d->rgb_size = 0; return AVERROR(ENOMEM); }
		d->rgb_size = need;
	}
	uint8_t *planes[4] = {d->rgb, NULL, NULL, NULL};
	int strides[4] = {stride, 0, 0, 0};
	int rows = sws_scale(d->sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height, planes, strides);
	return rows == h ? 0 : AVERROR(EINVAL);
}

// sf_rgb converts the frame to RGB planes (3, h, w) in dst. (Planar GBR
// out of swscale would skip the unpacking, but its values differ from
// packed RGB's at widths that are not a multiple of 64.)
static int sf_rgb(sf_decoder *d, uint8_t *dst, int w, int h) {
	int err = sf_convert(d, w, h);
	if (err < 0) return err;
	int stride = sf_stride(w), n = w * h;
	for (int y = 0; y < h; y++) {
		sf_unpack(d->rgb + y * stride, dst + y * w, dst + n + y * w, dst + 2 * n + y * w, w);
	}
	return 0;
}

static const char *sf_pix_fmt(sf_decoder *d) { return av_get_pix_fmt_name(d->frame->format); }

// sf_plane gives plane i's width in bytes and height, or -1 where the
// frame has no such plane.
static int sf_plane(sf_decoder *d, int i, int *width, int *height) {
	const AVPixFmtDescriptor *desc = av_pix_fmt_desc_get(d->frame->format);
	if (!desc || i >= 4 || !d->frame->data[i]) return -1;
	int linesizes[4];
	if (av_image_fill_linesizes(linesizes, d->frame->format, d->frame->width) < 0) return -1;
	*width = linesizes[i];
	*height = (i == 1 || i == 2) && !(desc->flags & AV_PIX_FMT_FLAG_RGB) ? AV_CEIL_RSHIFT(d->frame->height, desc->log2_chroma_h) : d->frame->height;
	return 0;
}

static int sf_errstr(int err, char *buf, int n) { return av_strerror(err, buf, n); }

enum { sf_eof = AVERROR_EOF, sf_again = AVERROR(EAGAIN) };
*/
import "C"

import (
	"fmt"
	"strings"
	"unsafe"
)

// Available says this build decodes video.
const Available = true

// FFmpeg's own log (its stderr, unstructured) is kept to errors: a
// decoder's failure reaches the caller as an error naming the file and
// frame, and its notes (swscale's, once a context: that no accelerated
// conversion exists for a format, on arm64) would be a line per shard.
func init() { C.av_log_set_level(C.AV_LOG_ERROR) }

// Decoder names the decoder this binary links: FFmpeg's version, the
// licence it was configured under and its video decoders.
var Decoder = fmt.Sprintf("FFmpeg %s (%s; cgo): %s", C.GoString(C.av_version_info()),
	C.GoString(C.avcodec_license()), decoderNames())

// decoderNames lists the video decoders the linked libavcodec has.
func decoderNames() string {
	var names []string
	var it unsafe.Pointer
	for {
		c := C.av_codec_iterate(&it) //nolint:gocritic // cgo rewrites the call (its pointer check), no comparison of ours
		if c == nil {
			break
		}
		if C.av_codec_is_decoder(c) != 0 && c._type == C.AVMEDIA_TYPE_VIDEO {
			names = append(names, C.GoString(c.name))
		}
	}
	return strings.Join(names, ", ")
}

// Decode decodes packets (decode order, from a keyframe) and calls fn
// with each frame, in presentation order.
func Decode(t Track, packets []Packet, fn func(Frame) error) error {
	name, err := check(t, packets)
	if err != nil {
		return err
	}
	d := (*C.sf_decoder)(C.calloc(1, C.sizeof_sf_decoder))
	if d == nil {
		return fmt.Errorf("%s: out of memory", name)
	}
	defer func() {
		C.sf_close(d)
		C.free(unsafe.Pointer(d))
	}()
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var config *C.uint8_t
	if len(t.Config) > 0 {
		config = (*C.uint8_t)(C.CBytes(t.Config))
		defer C.free(unsafe.Pointer(config))
	}
	if rc := C.sf_open(d, cname, config, C.int(len(t.Config)), C.int(t.Width), C.int(t.Height)); rc < 0 {
		return fmt.Errorf("opening the %s decoder (%s, %dx%d): %w", name, t.Codec, t.Width, t.Height, averror(rc))
	}
	f := &frame{d: d}
	drain := func() error {
		for {
			switch rc := C.sf_receive(d); rc {
			case 0:
				f.planes = nil
				if err := fn(f); err != nil {
					return err
				}
			case C.sf_eof, C.sf_again:
				return nil
			default:
				return fmt.Errorf("decoding: %w", averror(rc))
			}
		}
	}
	for _, p := range packets {
		key := C.int(0)
		if p.Key {
			key = 1
		}
		rc := C.sf_send(d, (*C.uint8_t)(unsafe.Pointer(&p.Data[0])), C.int(len(p.Data)), C.int64_t(p.PTS), key)
		if rc < 0 {
			return fmt.Errorf("decoding the frame at pts %d: %w", p.PTS, averror(rc))
		}
		if err := drain(); err != nil {
			return fmt.Errorf("after the frame at pts %d: %w", p.PTS, err)
		}
	}
	if rc := C.sf_send(d, nil, 0, 0, 0); rc < 0 {
		return fmt.Errorf("flushing the decoder: %w", averror(rc))
	}
	return drain()
}

// frame is the decoder's current frame.
type frame struct {
	d      *C.sf_decoder
	planes [][]byte
}

func (f *frame) PTS() int64 { return int64(f.d.frame.pts) }

func (f *frame) PixelFormat() string { return C.GoString(C.sf_pix_fmt(f.d)) }

func (f *frame) Planes() [][]byte {
	if f.planes != nil {
		return f.planes
	}
	fr := f.d.frame
	for i := range 4 {
		var w, h C.int
		if C.sf_plane(f.d, C.int(i), &w, &h) < 0 {
			break
		}
		stride := int(fr.linesize[i])
		base := unsafe.Pointer(fr.data[i])
		out := make([]byte, 0, int(w)*int(h))
		for y := range int(h) {
			out = append(out, unsafe.Slice((*byte)(unsafe.Add(base, y*stride)), int(w))...)
		}
		f.planes = append(f.planes, out)
	}
	return f.planes
}

func (f *frame) Size() (width, height int) { return int(f.d.frame.width), int(f.d.frame.height) }

func (f *frame) RGBRows() (rows []byte, stride int, err error) {
	w, h := f.Size()
	if rc := C.sf_convert(f.d, C.int(w), C.int(h)); rc < 0 {
		return nil, 0, fmt.Errorf("converting the frame at pts %d to RGB: %w", f.PTS(), averror(rc))
	}
	stride = int(C.sf_stride(C.int(w)))
	return unsafe.Slice((*byte)(unsafe.Pointer(f.d.rgb)), (h-1)*stride+3*w), stride, nil
}

func (f *frame) RGB(dst []byte, width, height int) error {
	if width < 1 || height < 1 || width > MaxSide || height > MaxSide || len(dst) != 3*width*height {
		return fmt.Errorf("RGB planes of %dx%d need %d bytes, the buffer has %d", width, height, 3*width*height, len(dst))
	}
	if rc := C.sf_rgb(f.d, (*C.uint8_t)(unsafe.Pointer(&dst[0])), C.int(width), C.int(height)); rc < 0 {
		return fmt.Errorf("converting the frame at pts %d to RGB: %w", f.PTS(), averror(rc))
	}
	return nil
}

// averror is an FFmpeg error code as an error.
func averror(rc C.int) error {
	buf := make([]byte, 256)
	C.sf_errstr(rc, (*C.char)(unsafe.Pointer(&buf[0])), C.int(len(buf)))
	n := 0
	for n < len(buf) && buf[n] != 0 {
		n++
	}
	return fmt.Errorf("FFmpeg: %s (%d)", buf[:n], int(rc))
}

//go:build !cgo || !libjpeg

package images

// JPEGDecoder names the JPEG decoder this binary was built with: the
// portable build's is Go's own (the cgo build with the libjpeg tag links
// libjpeg-turbo instead).
const JPEGDecoder = "Go image/jpeg"

// decodeJPEG decodes and resizes the JPEG src into dst.
func (d *Decoder) decodeJPEG(dst, src []byte) error {
	return d.resizeInGo(dst, src, decodeJPEGInGo)
}

package orcfile

import (
	"bytes"
	"compress/flate"
	"fmt"
	"io"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// maxBlockSize bounds a file's compression block size: writers use 256 KiB
// by default and at most a few MiB.
const maxBlockSize = 64 << 20

// decompressor turns a stream's compression chunks into its bytes.
type decompressor struct {
	codec     Compression
	blockSize int
	zstd      *zstd.Decoder
	flate     io.ReadCloser // reset for each zlib chunk
}

func newDecompressor(c Compression, blockSize uint64) (*decompressor, error) {
	d := &decompressor{codec: c, blockSize: int(min(blockSize, maxBlockSize))} //nolint:gosec // capped
	switch c {
	case CompressionNone:
		return d, nil
	case CompressionZlib, CompressionSnappy, CompressionLZ4:
	case CompressionZstd:
		var err error
		if d.zstd, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(d.blockSize))); err != nil { //nolint:gosec // capped
			return nil, err
		}
	default:
		return nil, fmt.Errorf("ORC compression %s is not supported (zlib, snappy, zstd, lz4 and none are): rewrite the file with one of them", c)
	}
	if blockSize == 0 || blockSize > maxBlockSize {
		return nil, errCorrupt(fmt.Sprintf("compression block size %d (want 1 B to %d MiB)", blockSize, maxBlockSize>>20), nil)
	}
	return d, nil
}

// close releases the zstd decoder's goroutines.
func (d *decompressor) close() {
	if d.zstd != nil {
		d.zstd.Close()
	}
}

// decompress returns the bytes of a stream stored as b, appending at most
// limit bytes: each chunk is a 3-byte header, (length << 1) | original,
// then length bytes, compressed unless original.
func (d *decompressor) decompress(b []byte, limit int) ([]byte, error) {
	if d.codec == CompressionNone {
		if len(b) > limit {
			return nil, errTooLarge(limit)
		}
		return b, nil
	}
	var out []byte
	for len(b) > 0 {
		if len(b) < 3 {
			return nil, errCorrupt("compression chunk header", io.ErrUnexpectedEOF)
		}
		h := int(b[0]) | int(b[1])<<8 | int(b[2])<<16
		n, original := h>>1, h&1 == 1
		b = b[3:]
		if n > len(b) {
			return nil, errCorrupt(fmt.Sprintf("compression chunk of %d bytes with %d left", n, len(b)), nil)
		}
		chunk := b[:n]
		b = b[n:]
		if original {
			if len(chunk) > d.blockSize || len(out)+len(chunk) > limit {
				return nil, errTooLarge(limit)
			}
			out = append(out, chunk...)
			continue
		}
		var err error
		if out, err = d.chunk(out, chunk, limit); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// chunk appends the decompression of one chunk, at most one block.
func (d *decompressor) chunk(out, chunk []byte, limit int) ([]byte, error) {
	room := min(d.blockSize, limit-len(out))
	switch d.codec {
	case CompressionZlib:
		if d.flate == nil {
			d.flate = flate.NewReader(bytes.NewReader(chunk))
		} else if err := d.flate.(flate.Resetter).Reset(bytes.NewReader(chunk), nil); err != nil {
			return nil, errCorrupt("zlib chunk", err)
		}
		r := d.flate
		start := len(out)
		out = append(out, make([]byte, room+1)...)
		n, err := io.ReadFull(r, out[start:])
		out = out[:start+n]
		switch {
		case err == nil:
			return nil, errTooLarge(limit)
		case err != io.ErrUnexpectedEOF && err != io.EOF:
			return nil, errCorrupt("zlib chunk", err)
		}
		return out, nil
	case CompressionSnappy:
		n, err := snappy.DecodedLen(chunk)
		if err != nil {
			return nil, errCorrupt("snappy chunk", err)
		}
		if n > room {
			return nil, errTooLarge(limit)
		}
		start := len(out)
		out = append(out, make([]byte, n)...)
		if _, err := snappy.Decode(out[start:], chunk); err != nil {
			return nil, errCorrupt("snappy chunk", err)
		}
		return out, nil
	case CompressionLZ4:
		start := len(out)
		out = append(out, make([]byte, room)...)
		n, err := lz4.UncompressBlock(chunk, out[start:])
		if err != nil {
			return nil, errCorrupt("lz4 chunk", err)
		}
		return out[:start+n], nil
	case CompressionZstd:
		dec, err := d.zstd.DecodeAll(chunk, nil)
		if err != nil {
			return nil, errCorrupt("zstd chunk", err)
		}
		if len(dec) > room {
			return nil, errTooLarge(limit)
		}
		return append(out, dec...), nil
	}
	return nil, fmt.Errorf("ORC compression %s is not supported", d.codec)
}

func errTooLarge(limit int) error {
	return fmt.Errorf("%w: a stream decompresses to more than %d bytes, or a chunk to more than its block", ErrCorrupt, limit)
}

package litdata

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
)

// LitData's zstd compression (index.json's "compression": "zstd" or
// "zstd:N"), wrapped one of three ways ("compression_level"): "chunk", the
// whole chunk one zstd stream (.zstd.bin); "batch", a framed chunk
// (framedMagic, a directory of the items' offsets and of zstd frames of
// runs of items, then the frames); "sample", a chunk whose every item is
// its own zstd frame. Inflate turns each into the plain chunk.
const (
	wrapChunk  = "chunk"
	wrapBatch  = "batch"
	wrapSample = "sample"
)

var framedMagic = []byte("LDFZ01\x00\x00")

// compressionOf reads index.json's compression and its level: "" for
// none, else the wrap; an error for any other codec.
func compressionOf(compression, level *string) (string, error) {
	if compression == nil || *compression == "" {
		return "", nil
	}
	codec, _, _ := strings.Cut(*compression, ":")
	if codec != "zstd" {
		return "", fmt.Errorf("its chunks are compressed with %q: shardfeed reads LitData's zstd", *compression)
	}
	wrap := wrapChunk // what LitData reads an index without a level as
	if level != nil && *level != "" {
		wrap = strings.ToLower(*level)
	}
	switch wrap {
	case wrapChunk, wrapBatch, wrapSample:
		return wrap, nil
	}
	return "", fmt.Errorf("its compression_level is %q: LitData writes chunk, batch or sample", *level)
}

// decoders are zstd decoders kept between frames: making one costs more
// than inflating a small item. Their bound covers their window; the
// output is bounded by the reads of unzstd.
var decoders = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxChunkBytes+1))
	if err != nil {
		panic(err) // only for invalid options
	}
	return d
}}

// unzstd inflates one zstd stream of at most most bytes (want, if 0 or
// more, exactly).
func unzstd(b []byte, most, want int) ([]byte, error) {
	if want >= 0 {
		most = want
	}
	d := decoders.Get().(*zstd.Decoder)
	defer func() {
		_ = d.Reset(nil)
		decoders.Put(d)
	}()
	if err := d.Reset(bytes.NewReader(b)); err != nil {
		return nil, fmt.Errorf("%w: zstd: %w", errCorrupt, err)
	}
	out, err := io.ReadAll(io.LimitReader(d, int64(most)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: zstd: %w", errCorrupt, err)
	}
	if len(out) > most {
		return nil, fmt.Errorf("%w: inflates past %d bytes", errCorrupt, most)
	}
	if want >= 0 && len(out) != want {
		return nil, fmt.Errorf("%w: a zstd frame of %d bytes, its directory says %d", errCorrupt, len(out), want)
	}
	return out, nil
}

// Inflate returns a chunk as LitData wrote it before compressing it (the
// chunk itself if l says it is not compressed).
func Inflate(l *indexfile.LitData, chunk []byte) ([]byte, error) {
	switch l.CompressionLevel {
	case "":
		return chunk, nil
	case wrapChunk:
		return unzstd(chunk, maxChunkBytes, -1)
	case wrapBatch:
		return inflateFramed(chunk)
	case wrapSample:
		return inflateItems(chunk)
	}
	return nil, fmt.Errorf("compression level %q: re-run shardfeed index", l.CompressionLevel)
}

// plainChunk lays items out as LitData's plain chunk: the count, the
// items' offsets in the chunk, the items.
func plainChunk(items [][]byte) ([]byte, error) {
	n := len(items)
	size := 4 + 4*(n+1)
	for _, it := range items {
		size += len(it)
	}
	if size > maxChunkBytes {
		return nil, fmt.Errorf("%w: inflates past %d bytes", errCorrupt, maxChunkBytes)
	}
	out := make([]byte, 0, size)
	out = binary.LittleEndian.AppendUint32(out, uint32(n)) //nolint:gosec // bounded by maxChunkBytes
	off := 4 + 4*(n+1)
	out = binary.LittleEndian.AppendUint32(out, uint32(off)) //nolint:gosec // bounded by maxChunkBytes
	for _, it := range items {
		off += len(it)
		out = binary.LittleEndian.AppendUint32(out, uint32(off)) //nolint:gosec // bounded by maxChunkBytes
	}
	for _, it := range items {
		out = append(out, it...)
	}
	return out, nil
}

// inflateItems inflates a "sample" chunk: a plain chunk whose items are
// each a zstd frame.
func inflateItems(chunk []byte) ([]byte, error) {
	n, err := u32(chunk, 0)
	if err != nil {
		return nil, err
	}
	header := 4 + 4*(n+1)
	if header > len(chunk) {
		return nil, fmt.Errorf("%w: %d items' offsets past its %d bytes", errCorrupt, n, len(chunk))
	}
	items := make([][]byte, n)
	prev, left := header, maxChunkBytes
	for i := range n {
		start, _ := u32(chunk, 4+4*i)
		end, _ := u32(chunk, 8+4*i)
		if start != prev || end < start || end > len(chunk) {
			return nil, fmt.Errorf("%w: item %d at [%d, %d), after %d in %d bytes", errCorrupt, i, start, end, prev, len(chunk))
		}
		prev = end
		if items[i], err = unzstd(chunk[start:end], left, -1); err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		left -= len(items[i])
	}
	return plainChunk(items)
}

// framedPrefix is the fixed start of a "batch" chunk: the magic, the
// version, flags, the items, the items a frame and the frames.
const (
	framedPrefix = 24
	frameEntry   = 24
)

// inflateFramed inflates a "batch" chunk: its directory (the items'
// offsets in the items inflated end to end, and each frame's first item,
// items, place and sizes), then the frames.
func inflateFramed(chunk []byte) ([]byte, error) {
	le := binary.LittleEndian
	if len(chunk) < framedPrefix || !bytes.Equal(chunk[:8], framedMagic) {
		return nil, fmt.Errorf("%w: not a framed zstd chunk (LDFZ01)", errCorrupt)
	}
	if v := le.Uint16(chunk[8:]); v != 1 {
		return nil, fmt.Errorf("%w: framed zstd version %d (shardfeed reads 1)", errCorrupt, v)
	}
	n, perFrame, frames := int(le.Uint32(chunk[12:])), int(le.Uint32(chunk[16:])), int(le.Uint32(chunk[20:]))
	if n <= 0 || perFrame <= 0 || frames <= 0 || frames > n || n > maxChunkBytes/4 {
		return nil, fmt.Errorf("%w: a framed chunk of %d items in %d frames of %d", errCorrupt, n, frames, perFrame)
	}
	offsetsAt := framedPrefix
	tableAt := offsetsAt + 4*(n+1)
	dataAt := tableAt + frameEntry*frames
	if dataAt > len(chunk) {
		return nil, fmt.Errorf("%w: its directory of %d items and %d frames runs past its %d bytes", errCorrupt, n, frames, len(chunk))
	}
	offsets := make([]int, n+1)
	for i := range offsets {
		offsets[i] = int(le.Uint32(chunk[offsetsAt+4*i:]))
		if i == 0 && offsets[0] != 0 || i > 0 && offsets[i] < offsets[i-1] || offsets[i] > maxChunkBytes {
			return nil, fmt.Errorf("%w: item %d's offset %d", errCorrupt, i, offsets[i])
		}
	}
	items := make([]byte, 0, offsets[n])
	next := 0
	for f := range frames {
		e := chunk[tableAt+frameEntry*f:]
		first, count := int(le.Uint32(e)), int(le.Uint32(e[4:]))
		at, size, inflated := le.Uint64(e[8:]), int(le.Uint32(e[16:])), int(le.Uint32(e[20:]))
		switch {
		case first != next || count <= 0 || count > n-first:
			return nil, fmt.Errorf("%w: frame %d holds items [%d, %d+%d), after %d of %d", errCorrupt, f, first, first, count, next, n)
		case at < uint64(dataAt) || at > uint64(len(chunk)) || size <= 0 || size > len(chunk)-int(at): //nolint:gosec // at is checked first
			return nil, fmt.Errorf("%w: frame %d of %d bytes at %d, outside [%d, %d)", errCorrupt, f, size, at, dataAt, len(chunk))
		case inflated != offsets[first+count]-offsets[first]:
			return nil, fmt.Errorf("%w: frame %d inflates to %d bytes, its items' offsets span %d", errCorrupt, f, inflated, offsets[first+count]-offsets[first])
		}
		raw, err := unzstd(chunk[at:int(at)+size], 0, inflated) //nolint:gosec // at is checked above
		if err != nil {
			return nil, fmt.Errorf("frame %d: %w", f, err)
		}
		items = append(items, raw...)
		next = first + count
	}
	if next != n {
		return nil, fmt.Errorf("%w: its frames hold %d of its %d items", errCorrupt, next, n)
	}
	split := make([][]byte, n)
	for i := range split {
		split[i] = items[offsets[i]:offsets[i+1]]
	}
	return plainChunk(split)
}

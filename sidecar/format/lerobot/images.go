package lerobot

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/sidecar/images"
)

// image returns image feature key's index in the dataset's images, or -1.
func (r *reader) image(key string) int {
	return slices.IndexFunc(r.file.LeRobot.Images, func(m indexfile.LeRobotImage) bool { return m.Key == key })
}

// imageBytes is an image column's accessor of each row's encoded image:
// a struct's "bytes" field (a Hugging Face Image feature, what LeRobot
// writes) or a binary column.
func imageBytes(a arrow.Array) (func(i int) ([]byte, bool), error) {
	if s, ok := a.(*array.Struct); ok {
		k, ok := s.DataType().(*arrow.StructType).FieldIdx("bytes")
		if !ok {
			return nil, fmt.Errorf("a struct of %s, without the image's bytes", a.DataType())
		}
		b, err := imageBytes(s.Field(k))
		if err != nil {
			return nil, err
		}
		return func(i int) ([]byte, bool) {
			if s.IsNull(i) {
				return nil, false
			}
			return b(i)
		}, nil
	}
	type binaryLike interface {
		arrow.Array
		Value(int) []byte
	}
	if b, ok := a.(binaryLike); ok && (a.DataType().ID() == arrow.BINARY || a.DataType().ID() == arrow.LARGE_BINARY) {
		return func(i int) ([]byte, bool) {
			if b.IsNull(i) {
				return nil, false
			}
			return b.Value(i), true
		}, nil
	}
	return nil, fmt.Errorf("a column of %s, not of images (a struct of bytes and path, or binary)", a.DataType())
}

// checkImageColumn says why the data files' column t cannot hold images.
func checkImageColumn(t arrow.DataType) error {
	_, err := imageBytes(array.MakeArrayOfNull(memory.DefaultAllocator, t, 0))
	return err
}

// images decodes image feature f's image for each of frames (within the
// episode), as LeRobotDataset's ToTensor does (float (3, H, W) in [0, 1],
// of these bytes divided by 255), into RGB planes (3, H, W) of type
// f.Type; resized and cropped where the stream sets its frames' size.
// Each row's image is decoded once, however many window slots show it.
func (d *decoder) images(f arrow.Field, frames []int64) (arrow.Array, error) {
	m := d.r.file.LeRobot.Images[d.r.image(f.Name)]
	src, ok := d.rows[f.Name]
	if !ok {
		return nil, fmt.Errorf("the data files have no column %q", f.Name)
	}
	encoded, err := imageBytes(src)
	if err != nil {
		return nil, err
	}
	height, width := d.r.frameShape(m.Height, m.Width)
	size := 3 * height * width
	buf, out := slotsBuffer(size * len(frames))
	defer buf.Release()
	first := map[int64]int{} // the slot a row's image was decoded into
	for slot, fr := range frames {
		dst := out[slot*size : (slot+1)*size]
		if s, ok := first[fr]; ok {
			copy(dst, out[s*size:(s+1)*size])
			continue
		}
		first[fr] = slot
		png, ok := encoded(int(fr))
		if !ok {
			return nil, fmt.Errorf("frame %d of episode %d has no image", fr, d.e.Episode.Index)
		}
		if err := d.decodeImage(dst, png, m.Width, m.Height, width, height); err != nil {
			return nil, fmt.Errorf("frame %d of episode %d: %w", fr, d.e.Episode.Index, err)
		}
	}
	return planesColumn(f, buf), nil
}

// decodeImage decodes an RGB PNG of the feature's size (w × h, info.json's
// shape) into dst as planes of width × height: its own size, or resized
// and cropped.
func (d *decoder) decodeImage(dst, src []byte, w, h, width, height int) error {
	ih, iw, err := images.Size(src)
	if err != nil {
		return err
	}
	if ih != h || iw != w {
		return fmt.Errorf("the image is %dx%d, and %s's shape says %dx%d (width x height)", iw, ih, InfoPath, w, h)
	}
	d.decoded, _, _, err = images.PNGRGB(d.decoded, src)
	if err != nil {
		return err
	}
	if d.r.frameSize == nil {
		planar(dst, d.decoded, w*h)
		return nil
	}
	if d.resizer == nil {
		d.resizer = images.NewDecoder(*d.r.frameSize)
	}
	d.packed = slices.Grow(d.packed[:0], len(dst))[:len(dst)]
	if err := d.resizer.ResizeRGB(d.packed, d.decoded, w, h, 3*w); err != nil {
		return err
	}
	planar(dst, d.packed, width*height)
	return nil
}

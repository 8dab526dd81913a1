// Package sparse is a file of which only some byte ranges were fetched: a
// shard's range and its file's footer are all a Parquet or Arrow IPC reader
// needs, and any other read is an error rather than garbage.
package sparse

import (
	"fmt"
	"io"
)

// File serves the fetched ranges of a file of Size bytes. It implements
// io.ReaderAt, io.Reader and io.Seeker.
type File struct {
	size, pos int64
	chunks    []Range
}

// Range is bytes of the file at Offset.
type Range struct {
	Offset int64
	Data   []byte
}

// New returns a file of size bytes of which ranges were fetched.
func New(size int64, ranges ...Range) *File {
	return &File{size: size, chunks: ranges}
}

// ReadAt reads from one fetched range; a read outside them fails.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	for _, c := range f.chunks {
		if off >= c.Offset && off+int64(len(p)) <= c.Offset+int64(len(c.Data)) {
			return copy(p, c.Data[off-c.Offset:]), nil
		}
	}
	return 0, fmt.Errorf("bytes [%d, %d) of the file were not fetched", off, off+int64(len(p)))
}

func (f *File) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.pos)
	f.pos += int64(n)
	return n, err
}

// Seek moves the read position; io.SeekEnd is relative to the file's size.
func (f *File) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		f.pos = off
	case io.SeekCurrent:
		f.pos += off
	case io.SeekEnd:
		f.pos = f.size + off
	default:
		return f.pos, fmt.Errorf("seek: whence %d", whence)
	}
	return f.pos, nil
}

// Package arrowsize measures the memory of Arrow data.
package arrowsize

import "github.com/apache/arrow-go/v18/arrow"

// Data is the size of an array's buffers, its children's included.
func Data(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += Data(c)
	}
	return n
}

// Record is the size of a record's buffers.
func Record(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		n += Data(c.Data())
	}
	return n
}

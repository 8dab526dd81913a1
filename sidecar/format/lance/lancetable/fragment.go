package lancetable

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shardfeed/shardfeed/sidecar/format/lance/lancefile"
)

// FileView is one data file of a fragment, opened: its tail, where its
// bytes are read from, which of its columns holds each field, and where
// its blob files are read from (nil: it has none to read).
type FileView struct {
	Tail    *lancefile.Tail
	Source  lancefile.Source
	Columns lancefile.Columns
	Blobs   BlobFiles
}

// BlobFiles opens a data file's blob file of an id (blob v2's packed and
// dedicated values: lancefile.BlobFileName).
type BlobFiles func(id uint32) (lancefile.Source, error)

// ColumnsOf maps the data file's fields to its columns. Since 2.1 a file
// lists its leaf fields only; a field id of -2 is a dropped field.
func (d *DataFile) ColumnsOf() (lancefile.Columns, error) {
	cols := lancefile.Columns{}
	for k, id := range d.Fields {
		if id < 0 {
			continue
		}
		c := int32(k) //nolint:gosec // bounded by the fields' count
		if len(d.ColumnIndices) > 0 {
			c = d.ColumnIndices[k]
		}
		if c < 0 {
			continue
		}
		cols[id] = int(c)
	}
	return cols, nil
}

// FileOf returns the data file of files that holds node's columns (-1:
// none does, the field was added after the fragment was written and reads
// as null).
func FileOf(n *lancefile.Node, files []FileView) (int, error) {
	found := -1
	for _, id := range n.Leaves() {
		for i, f := range files {
			if _, ok := f.Columns[id]; ok {
				if found >= 0 && found != i {
					return 0, fmt.Errorf("%w: field %q's columns are split across data files", ErrUnsupported, n.Name)
				}
				found = i
			}
		}
	}
	if found < 0 && len(n.Children) > 0 {
		for _, f := range files {
			if _, ok := f.Columns[n.ID]; ok {
				// Stored as one column of its own id (packed), not a
				// column a field: read as fields it would be all null.
				return 0, fmt.Errorf("%w: field %q is stored as one column, not a column a field (a packed struct)", ErrUnsupported, n.Name)
			}
		}
	}
	return found, nil
}

// ReadRows decodes physical rows [from, to) of a fragment's field.
func ReadRows(n *lancefile.Node, files []FileView, from, to uint64) (arrow.Array, error) {
	return ReadLiveRows(n, files, from, to, nil)
}

// ReadLiveRows is ReadRows serving null the rows skip names (deleted
// rows, never served): a blob column's bytes of them are not read.
func ReadLiveRows(n *lancefile.Node, files []FileView, from, to uint64, skip func(row uint64) bool) (arrow.Array, error) {
	i, err := FileOf(n, files)
	if err != nil {
		return nil, err
	}
	if i < 0 {
		return lancefile.Nulls(n.Type, int(to-from)) //nolint:gosec // bounded by the fragment
	}
	f := files[i]
	if n.Blob {
		return readBlobs(n, f, from, to, skip)
	}
	return f.Tail.ReadColumn(f.Source, n, f.Columns, from, to)
}

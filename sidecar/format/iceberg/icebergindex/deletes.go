package icebergindex

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
)

// MaxDeleteFileBytes bounds one delete file, which is read whole.
const MaxDeleteFileBytes = 1 << 30

// The field ids of a position delete file's columns (Iceberg spec).
const (
	fieldFilePath = 2147483546
	fieldPos      = 2147483545
)

// deletes reads each delete file once and applies it to the data files
// the scan planning gave it to.
type deletes struct {
	fsys *files
	// byFile maps a position delete file to its positions by data file.
	byFile map[string]map[string][]int64
	// equality maps an equality delete file to its field ids and keys.
	equality map[string]*equalitySet
	// rows counts the rows each delete file deleted; content says which
	// kind it is.
	rows    map[string]int64
	content map[string]string
	order   []string
}

type equalitySet struct {
	ids  []int
	keys map[string]bool
}

func newDeletes(fsys *files) *deletes {
	return &deletes{fsys: fsys, byFile: map[string]map[string][]int64{}, equality: map[string]*equalitySet{},
		rows: map[string]int64{}, content: map[string]string{}}
}

func (d *deletes) seen(path, content string) {
	if _, ok := d.content[path]; !ok {
		d.content[path] = content
		d.order = append(d.order, path)
	}
}

// applied lists the delete files with the rows each deleted.
func (d *deletes) applied() []indexfile.DeleteFile {
	out := make([]indexfile.DeleteFile, 0, len(d.order))
	for _, p := range d.order {
		out = append(out, indexfile.DeleteFile{Path: p, Content: d.content[p], Rows: d.rows[p]})
	}
	return out
}

// positions returns the sorted, distinct positions of the data file of
// task (at key in st) that its delete files delete.
func (d *deletes) positions(ctx context.Context, st store.Store, key string, task table.FileScanTask) ([]int64, error) {
	path := task.File.FilePath()
	var out []int64
	for _, df := range task.DeleteFiles {
		byData, err := d.positionFile(ctx, df)
		if err != nil {
			return nil, err
		}
		pos := byData[path]
		for _, p := range pos {
			if p < 0 || p >= task.File.Count() {
				return nil, fmt.Errorf("position delete file %s deletes row %d of a %d-row file: the table is corrupt", df.FilePath(), p, task.File.Count())
			}
		}
		out = append(out, pos...)
	}
	if len(task.EqualityDeleteFiles) > 0 {
		eq, err := d.equalityRows(ctx, st, key, task)
		if err != nil {
			return nil, err
		}
		out = append(out, eq...)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	for _, df := range task.DeleteFiles {
		d.rows[df.FilePath()] += int64(len(d.byFile[df.FilePath()][path]))
	}
	return out, nil
}

// positionFile reads a position delete file once.
func (d *deletes) positionFile(ctx context.Context, df iceberg.DataFile) (map[string][]int64, error) {
	path := df.FilePath()
	if m, ok := d.byFile[path]; ok {
		return m, nil
	}
	d.seen(path, "position")
	data, err := d.readWhole(ctx, df)
	if err != nil {
		return nil, err
	}
	m := map[string][]int64{}
	err = readColumns(ctx, bytes.NewReader(data), path, []int{fieldFilePath, fieldPos}, func(cols []arrow.Array) error {
		paths, ok1 := cols[0].(*array.String)
		pos, ok2 := cols[1].(*array.Int64)
		if !ok1 || !ok2 {
			return fmt.Errorf("position delete file %s: file_path is %s and pos %s, not string and long", path, cols[0].DataType(), cols[1].DataType())
		}
		for i := range paths.Len() {
			if paths.IsNull(i) || pos.IsNull(i) {
				return fmt.Errorf("position delete file %s: row %d has a null file_path or pos", path, i)
			}
			p := paths.Value(i)
			m[p] = append(m[p], pos.Value(i))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	d.byFile[path] = m
	return m, nil
}

func (d *deletes) readWhole(ctx context.Context, df iceberg.DataFile) ([]byte, error) {
	path := df.FilePath()
	if df.FileFormat() != iceberg.ParquetFile {
		return nil, fmt.Errorf("delete file %s is %s: shardfeed applies Parquet delete files", path, df.FileFormat())
	}
	if df.FileSizeBytes() > MaxDeleteFileBytes {
		return nil, fmt.Errorf("delete file %s is %d bytes, over the %d MiB shardfeed reads of one: compact the table's deletes", path, df.FileSizeBytes(), MaxDeleteFileBytes>>20)
	}
	st, key, err := d.fsys.locate(path)
	if err != nil {
		return nil, err
	}
	r, err := st.Get(ctx, key, 0, -1)
	if err != nil {
		return nil, fmt.Errorf("delete file %s: %w", path, err)
	}
	defer func() { _ = r.Close() }()
	data, err := io.ReadAll(io.LimitReader(r, MaxDeleteFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("delete file %s: %w", path, err)
	}
	if len(data) > MaxDeleteFileBytes {
		return nil, fmt.Errorf("delete file %s is over the %d MiB shardfeed reads of one", path, MaxDeleteFileBytes>>20)
	}
	return data, nil
}

// equalityRows returns the positions of the data file whose values equal
// a row of one of its equality delete files on that file's field ids
// (nulls equal nulls, as the Iceberg spec has it).
func (d *deletes) equalityRows(ctx context.Context, st store.Store, key string, task table.FileScanTask) ([]int64, error) {
	var out []int64
	for _, df := range task.EqualityDeleteFiles {
		set, err := d.equalityFile(ctx, df)
		if err != nil {
			return nil, err
		}
		size := task.File.FileSizeBytes()
		obj := io.NewSectionReader(&rangeFile{ctx: ctx, st: st, key: key, size: size}, 0, size)
		var pos int64
		var hit int64
		err = readColumns(ctx, obj, task.File.FilePath(), set.ids, func(cols []arrow.Array) error {
			n := int64(cols[0].Len())
			for i := range n {
				if set.keys[rowKey(cols, int(i))] {
					out = append(out, pos+i)
					hit++
				}
			}
			pos += n
			return nil
		})
		if err != nil {
			return nil, err
		}
		d.rows[df.FilePath()] += hit
	}
	return out, nil
}

func (d *deletes) equalityFile(ctx context.Context, df iceberg.DataFile) (*equalitySet, error) {
	path := df.FilePath()
	if s, ok := d.equality[path]; ok {
		return s, nil
	}
	d.seen(path, "equality")
	ids := df.EqualityFieldIDs()
	if len(ids) == 0 {
		return nil, fmt.Errorf("equality delete file %s names no equality field ids: the table is corrupt", path)
	}
	data, err := d.readWhole(ctx, df)
	if err != nil {
		return nil, err
	}
	s := &equalitySet{ids: ids, keys: map[string]bool{}}
	err = readColumns(ctx, bytes.NewReader(data), path, ids, func(cols []arrow.Array) error {
		for i := range cols[0].Len() {
			s.keys[rowKey(cols, i)] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	d.equality[path] = s
	return s, nil
}

// rowKey is row i of cols as one comparable string: each value as Arrow
// prints it (so an int column promoted to long keys alike), nulls apart.
func rowKey(cols []arrow.Array, i int) string {
	var b strings.Builder
	for _, c := range cols {
		if c.IsNull(i) {
			b.WriteString("\x00")
		} else {
			b.WriteString("\x01")
			b.WriteString(c.ValueStr(i))
		}
		b.WriteString("\x1f")
	}
	return b.String()
}

// readColumns reads the top-level columns of a Parquet file with the
// given Iceberg field ids, in that order, and calls fn with each batch of
// them. A column the file does not have (added to the table after the
// file was written) reads as nulls.
func readColumns(ctx context.Context, r pq.ReaderAtSeeker, name string, ids []int, fn func([]arrow.Array) error) (err error) {
	defer func() {
		if p := recover(); p != nil { // the Parquet decoder can panic on hostile input
			err = fmt.Errorf("%s: corrupt Parquet: %v", name, p)
		}
	}()
	pf, err := file.NewParquetReader(r)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer func() { _ = pf.Close() }()
	sc := pf.MetaData().Schema
	leaf := make([]int, len(ids))
	var cols []int
	for j, id := range ids {
		leaf[j] = -1
		for i := range sc.NumColumns() {
			c := sc.Column(i)
			if c.SchemaNode().FieldID() == int32(id) && len(c.ColumnPath()) == 1 { //nolint:gosec // field ids are int32 in Parquet
				leaf[j] = len(cols)
				cols = append(cols, i)
				break
			}
		}
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, memory.DefaultAllocator)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if len(cols) == 0 {
		// No column of the ids: every row is all nulls.
		n := pf.NumRows()
		nulls := make([]arrow.Array, len(ids))
		for j := range nulls {
			nulls[j] = array.NewNull(int(n))
		}
		return fn(nulls)
	}
	rr, err := fr.GetRecordReader(ctx, cols, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer rr.Release()
	for rr.Next() {
		rec := rr.RecordBatch()
		batch := make([]arrow.Array, len(ids))
		var made []arrow.Array // the null columns, released with their batch
		for j := range ids {
			if leaf[j] < 0 {
				batch[j] = array.NewNull(int(rec.NumRows()))
				made = append(made, batch[j])
				continue
			}
			batch[j] = rec.Column(leaf[j])
		}
		err := fn(batch)
		for _, a := range made {
			a.Release()
		}
		if err != nil {
			return err
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// rangeFile reads a data file by ranged gets: the Parquet reader fetches
// the footer and the few columns it decodes, not the whole file.
// io.NewSectionReader gives it Read and Seek.
type rangeFile struct {
	ctx  context.Context
	st   store.Store
	key  string
	size int64
}

func (f *rangeFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= f.size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), f.size-off)
	r, err := f.st.Get(f.ctx, f.key, off, n)
	if err != nil {
		return 0, err
	}
	defer func() { _ = r.Close() }()
	got, err := io.ReadFull(r, p[:n])
	if err == nil && n < int64(len(p)) {
		err = io.EOF
	}
	return got, err
}

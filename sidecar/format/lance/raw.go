package lance

import (
	"sort"

	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/lance/lancetable"
)

// Fixed-width columns without nulls or compression, stored one value after
// another (2.0 flat pages, 2.1/2.2 full-zip pages without levels: tensors,
// embeddings, numbers too wide for a mini-block), are served from the
// cached parts in place, as MDS columns are: no decoded copy.

// RawShard implements format.RawReader.
func (r *reader) RawShard(i int, parts [][]byte, columns []string) (format.RawShard, error) {
	e := r.file.Shard(i)
	if len(parts) != len(e.Ranges)+len(e.Files) {
		return nil, nil // Records says what is wrong
	}
	files, err := views(*e, parts)
	if err != nil {
		return nil, nil //nolint:nilerr // Records refuses the shard with the error
	}
	nodes, _, err := r.wanted(columns)
	if err != nil {
		return nil, err
	}
	from, to := uint64(e.RowStart), uint64(e.RowStart+e.Rows) //nolint:gosec // checked by the index
	rs := &rawShard{live: e.LiveRows()}
	for _, n := range nodes {
		f, err := lancetable.FileOf(n, files)
		if err != nil || f < 0 {
			continue
		}
		runs, w, ok := files[f].Tail.RawValues(n, files[f].Columns, from, to)
		if !ok {
			continue
		}
		col := rawColumn{width: w}
		for _, run := range runs {
			data, err := files[f].Source.ReadAt(run.Offset, run.Rows*w)
			if err != nil {
				col.segs = nil // not among the parts: decoded, which says so
				break
			}
			col.segs = append(col.segs, rawSeg{first: run.FirstRow, rows: run.Rows, data: data})
		}
		if col.segs != nil {
			rs.names = append(rs.names, n.Name)
			rs.cols = append(rs.cols, col)
		}
	}
	if len(rs.cols) == 0 {
		return nil, nil
	}
	return rs, nil
}

type rawShard struct {
	live  []int64
	names []string
	cols  []rawColumn
}

// rawColumn is a column's values in runs of rows, each a view of a part.
type rawColumn struct {
	width uint64
	segs  []rawSeg
}

type rawSeg struct {
	first, rows uint64
	data        []byte
}

func (r *rawShard) Columns() []string { return r.names }

// Row implements format.RawShard.
func (r *rawShard) Row(row int, vals [][]byte) bool {
	if row < 0 || row >= len(r.live) || len(vals) < len(r.cols) {
		return false
	}
	phys := uint64(r.live[row]) //nolint:gosec // a row of the fragment
	for k, c := range r.cols {
		j := sort.Search(len(c.segs), func(j int) bool { return c.segs[j].first+c.segs[j].rows > phys })
		if j == len(c.segs) || c.segs[j].first > phys {
			return false
		}
		g := c.segs[j]
		at := (phys - g.first) * c.width
		if at+c.width > uint64(len(g.data)) {
			return false
		}
		vals[k] = g.data[at : at+c.width]
	}
	return true
}

var _ format.RawReader = (*reader)(nil)

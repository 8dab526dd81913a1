package pipeline

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shardfeed/shardfeed/internal/bufpool"
	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/images"
	"github.com/shardfeed/shardfeed/sidecar/source"
)

// imageColumn is a binary column whose values the batches carry decoded.
type imageColumn struct {
	spec     images.Spec
	decoders sync.Pool // *images.Decoder
	// lacking are the streams without the column (spec.missingColumns:
	// null): their rows' images are null, not an error.
	lacking map[int]bool
}

// imageField is the served field of a decoded image column: uint8,
// height × width × 3 per row.
func imageField(f arrow.Field, spec images.Spec) arrow.Field {
	shape := strconv.Itoa(spec.Height) + "," + strconv.Itoa(spec.Width) + ",3"
	return arrow.Field{Name: f.Name, Type: arrow.FixedSizeListOf(int32(spec.Bytes()), arrow.PrimitiveTypes.Uint8), Nullable: f.Nullable, //nolint:gosec // bounded by the CRD
		Metadata: arrow.NewMetadata([]string{format.MetaShape}, []string{shape})}
}

// imageColumns checks the decode specs against the streams' schema and
// returns them by column position.
func imageColumns(schema *arrow.Schema, specs map[string]images.Spec, streams []*source.Stream) (map[int]*imageColumn, error) {
	out := map[int]*imageColumn{}
	for _, name := range slices.Sorted(maps.Keys(specs)) {
		spec := specs[name]
		if err := spec.Check(); err != nil {
			return nil, fmt.Errorf("decoding column %q: %w", name, err)
		}
		idx := schema.FieldIndices(name)
		if len(idx) == 0 {
			return nil, fmt.Errorf("decoding column %q: the streams have no such column (their columns: %s); name one of them, and keep it in spec.streams[].columns", name, source.ColumnNames(schema))
		}
		switch t := schema.Field(idx[0]).Type.ID(); t {
		case arrow.BINARY, arrow.LARGE_BINARY:
		default:
			return nil, fmt.Errorf("decoding column %q: it is %s, and images are decoded from binary columns (MDS jpeg, png or bytes; Parquet binary)", name, schema.Field(idx[0]).Type)
		}
		ic := &imageColumn{spec: spec, lacking: map[int]bool{}}
		for k, st := range streams {
			if !st.Has(name) {
				ic.lacking[k] = true
			}
		}
		out[idx[0]] = ic
	}
	return out, nil
}

// gatherImages decodes the batch's images of one column into a fixed-size
// list array, on every core: a batch's images are independent.
func (ic *imageColumn) gather(dt arrow.DataType, srcs []column, rows []rowRef, raw [][]byte, samples []planner.Sample) (arrow.Array, error) {
	size := ic.spec.Bytes()
	out := memory.NewResizableBuffer(bufpool.Shared)
	out.Resize(len(rows) * size)
	dst := out.Bytes()
	value := func(i int) ([]byte, bool) {
		r := rows[i]
		if srcs[r.Src].raw {
			return raw[i], true
		}
		switch a := srcs[r.Src].arr.(type) {
		case *array.Binary:
			return a.Value(r.Row), a.IsValid(r.Row)
		case *array.LargeBinary:
			return a.Value(r.Row), a.IsValid(r.Row)
		}
		return nil, false
	}
	// Images are taken in turn, not dealt out: a worker the trainer's
	// process delays does not hold the batch back.
	var nulls atomic.Int64
	var valid []byte // the rows' validity, made at the first null
	if len(ic.lacking) > 0 {
		valid = make([]byte, (len(rows)+7)/8)
		for i := range rows {
			if !ic.lacking[samples[i].Stream] {
				valid[i/8] |= 1 << (i % 8)
			}
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(rows))
	var next atomic.Int64
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			d, _ := ic.decoders.Get().(*images.Decoder)
			if d == nil {
				d = images.NewDecoder(ic.spec)
			}
			defer ic.decoders.Put(d)
			errs[w] = GuardFaults(func() error {
				for i := int(next.Add(1) - 1); i < len(rows); i = int(next.Add(1) - 1) {
					if ic.lacking[samples[i].Stream] {
						nulls.Add(1)
						clear(dst[i*size : (i+1)*size])
						continue // a row of a stream without images
					}
					v, ok := value(i)
					if !ok {
						return fmt.Errorf("sample %d has no image (null)", samples[i].ID)
					}
					if err := d.Decode(dst[i*size:(i+1)*size], v); err != nil {
						return fmt.Errorf("sample %d: %w", samples[i].ID, err)
					}
				}
				return nil
			})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			out.Release()
			return nil, err
		}
	}
	l := dt.(*arrow.FixedSizeListType)
	child := flatChild(l, out, len(rows))
	out.Release()
	defer child.Release()
	var validity *memory.Buffer
	if n := nulls.Load(); n > 0 {
		validity = memory.NewBufferBytes(valid)
	}
	data := array.NewData(dt, len(rows), []*memory.Buffer{validity}, []arrow.ArrayData{child}, int(nulls.Load()), 0)
	defer data.Release()
	return array.MakeFromData(data), nil
}

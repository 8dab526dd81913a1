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
		if t, ok := schema.Field(idx[0]).Type.(*arrow.FixedSizeListType); ok && t.Elem().ID() == arrow.UINT8 {
			return nil, fmt.Errorf("decoding column %q: it is served decoded already, %s (a lerobot stream's camera, video or images, is uint8 (3, H, W)); "+
				"leave it out of spec.decode, and resize a lerobot stream's cameras with spec.streams[].lerobot.frames", name, t)
		}
		if !imageType(schema.Field(idx[0]).Type) {
			return nil, fmt.Errorf("decoding column %q: it is %s, and images are decoded from binary columns (MDS jpeg, png or bytes; Parquet binary) "+
				"or a struct of their bytes (a Hugging Face Image feature: {bytes, path})", name, schema.Field(idx[0]).Type)
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

// imageType says whether images are decoded from columns of type t: a
// binary, or a struct whose "bytes" field is one (a Hugging Face Image
// feature, {bytes, path}).
func imageType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.BINARY, arrow.LARGE_BINARY:
		return true
	case arrow.STRUCT:
		f, ok := t.(*arrow.StructType).FieldByName(imageBytes)
		return ok && (f.Type.ID() == arrow.BINARY || f.Type.ID() == arrow.LARGE_BINARY)
	}
	return false
}

// imageBytes and imagePath are the fields of a Hugging Face Image
// feature: the image file's bytes, or (bytes null) the path of a file
// outside the dataset.
const (
	imageBytes = "bytes"
	imagePath  = "path"
)

// imageValue returns row i of an image column: a binary's value, or a
// struct's bytes; a struct row with a path and no bytes is an error that
// says so (what is not in the dataset is not read).
func imageValue(a arrow.Array, i int) ([]byte, bool, error) {
	switch a := a.(type) {
	case *array.Binary:
		return a.Value(i), a.IsValid(i), nil
	case *array.LargeBinary:
		return a.Value(i), a.IsValid(i), nil
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		k, _ := st.FieldIdx(imageBytes)
		if !a.IsValid(i) {
			return nil, false, nil
		}
		v, ok, err := imageValue(a.Field(k), i)
		if !ok && err == nil {
			if p, has := st.FieldIdx(imagePath); has {
				if s, isString := a.Field(p).(*array.String); isString && s.IsValid(i) {
					return nil, false, fmt.Errorf("its image is the file %q outside the dataset, not bytes in it: save the dataset with the images embedded "+
						"(datasets' embed_external_files, which push_to_hub and save_to_disk of Image features do)", s.Value(i))
				}
			}
		}
		return v, ok, err
	}
	return nil, false, nil
}

// gatherImages decodes the batch's images of one column into a fixed-size
// list array, on every core: a batch's images are independent.
func (ic *imageColumn) gather(dt arrow.DataType, srcs []column, rows []rowRef, raw [][]byte, samples []planner.Sample) (arrow.Array, error) {
	size := ic.spec.Bytes()
	out := memory.NewResizableBuffer(bufpool.Shared)
	out.Resize(len(rows) * size)
	dst := out.Bytes()
	value := func(i int) ([]byte, bool, error) {
		r := rows[i]
		if srcs[r.Src].raw {
			return raw[i], true, nil
		}
		return imageValue(srcs[r.Src].arr, r.Row)
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
					v, ok, err := value(i)
					switch {
					case err != nil:
						return fmt.Errorf("sample %d: %w", samples[i].ID, err)
					case !ok:
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

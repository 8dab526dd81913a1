package lancetable

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shardfeed/shardfeed/sidecar/format/arrowipc"
	"github.com/shardfeed/shardfeed/sidecar/format/lance/lancefile"
)

// MaxDeletionBytes bounds a deletion file.
const MaxDeletionBytes = 256 << 20

// Deleted decodes a fragment's deletion file into its deleted row offsets,
// sorted: an Arrow IPC file of one 32-bit integer column (written unsorted)
// or a roaring bitmap in its portable form. The count must be the one the
// manifest gives, and every offset within the fragment's rows.
func Deleted(d *DeletionFile, rows uint64, data []byte) ([]uint32, error) {
	var out []uint32
	if d.Bitmap {
		bm := roaring.New()
		if _, err := bm.ReadFrom(bytes.NewReader(data)); err != nil {
			return nil, corrupt("deletion bitmap: %v", err)
		}
		if bm.GetCardinality() != d.Deleted {
			return nil, corrupt("a deletion bitmap of %d rows, the manifest says %d", bm.GetCardinality(), d.Deleted)
		}
		out = bm.ToArray()
	} else {
		var err error
		if out, err = arrowRows(data, d.Deleted); err != nil {
			return nil, err
		}
	}
	slices.Sort(out)
	for i, r := range out {
		if uint64(r) >= rows || (i > 0 && r == out[i-1]) {
			return nil, corrupt("deleted row %d of a fragment of %d rows (or twice)", r, rows)
		}
	}
	if uint64(len(out)) != d.Deleted {
		return nil, corrupt("a deletion file of %d rows, the manifest says %d", len(out), d.Deleted)
	}
	return out, nil
}

func arrowRows(data []byte, want uint64) (out []uint32, err error) {
	// arrow-go's IPC reader trusts a file's flatbuffers, and panics on
	// hostile ones (found by TestPylanceTableFilesMutated).
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, corrupt("deletion file: not an Arrow IPC file (%v)", r)
		}
	}()
	if err := arrowipc.Verify(data); err != nil {
		return nil, corrupt("deletion file: %v", err)
	}
	rd, err := ipc.NewFileReader(bytes.NewReader(data), ipc.WithAllocator(memory.NewGoAllocator()))
	if err != nil {
		return nil, corrupt("deletion file: %v", err)
	}
	defer func() { _ = rd.Close() }()
	if rd.Schema().NumFields() != 1 {
		return nil, corrupt("a deletion file of %d columns", rd.Schema().NumFields())
	}
	out = make([]uint32, 0, min(want, 1<<20))
	for i := range rd.NumRecords() {
		rec, err := rd.RecordBatch(i)
		if err != nil {
			return nil, corrupt("deletion file: %v", err)
		}
		switch col := rec.Column(0).(type) {
		case *array.Uint32:
			out = append(out, col.Values()...)
		case *array.Int32:
			for _, v := range col.Values() {
				if v < 0 {
					return nil, corrupt("deleted row %d", v)
				}
				out = append(out, uint32(v))
			}
		default:
			return nil, corrupt("a deletion file of %s rows, not 32-bit integers", rec.Column(0).DataType())
		}
		if col := rec.Column(0); col.NullN() > 0 {
			return nil, corrupt("a deletion file with null rows")
		}
		if uint64(len(out)) > want {
			return nil, corrupt("a deletion file of more than the manifest's %d rows", want)
		}
	}
	return out, nil
}

// Feature flags a reader must understand (Manifest.reader_feature_flags).
const (
	FlagDeletionFiles   = 1
	FlagStableRowIDs    = 2
	FlagUseV2Format     = 4
	FlagTableConfig     = 8
	FlagBasePaths       = 16
	FlagNoTransactions  = 32
	FlagDataOverlays    = 64
	FlagCoveringIndices = 128
)

// CheckFlags refuses a manifest whose reader flags change what a scan
// returns in ways this reader does not handle, or that it does not know.
func (m *Manifest) CheckFlags() error {
	known := uint64(FlagDeletionFiles | FlagStableRowIDs | FlagUseV2Format | FlagTableConfig | FlagNoTransactions)
	why := map[uint64]string{
		FlagBasePaths:       "its files live under several base paths (a shallow clone or several buckets); copy it into one location with lance.write_dataset",
		FlagDataOverlays:    "it has data overlay files (new values over old files), and reading without them would return stale values; compact it (ds.optimize.compact_files()) or rewrite it",
		FlagCoveringIndices: "it has covering indices, which Lance's format requires a reader to understand; rewrite the table without them",
	}
	for bit := uint64(1); bit != 0; bit <<= 1 {
		if m.ReaderFlags&bit == 0 || known&bit != 0 {
			continue
		}
		reason, ok := why[bit]
		if !ok {
			reason = "the flag is unknown to this shardfeed (written by a newer Lance); rewrite the table with data_storage_version=\"2.2\" or upgrade shardfeed"
		}
		return fmt.Errorf("%w: version %d sets reader feature flag %d: %s", ErrUnsupported, m.Version, bit, reason)
	}
	if m.BasePaths > 0 {
		return fmt.Errorf("%w: version %d has %d base paths: %s", ErrUnsupported, m.Version, m.BasePaths, why[FlagBasePaths])
	}
	if m.Branch != "" {
		return fmt.Errorf("%w: version %d is on branch %q: shardfeed reads a table's main branch", ErrUnsupported, m.Version, m.Branch)
	}
	for _, f := range m.Fragments {
		if f.Overlays {
			return fmt.Errorf("%w: fragment %d: %s", ErrUnsupported, f.ID, why[FlagDataOverlays])
		}
		for _, d := range f.Files {
			if d.BaseID {
				return fmt.Errorf("%w: fragment %d: %s", ErrUnsupported, f.ID, why[FlagBasePaths])
			}
			if err := d.CheckVersion(); err != nil {
				return fmt.Errorf("version %d, fragment %d, %s: %w", m.Version, f.ID, d.Path, err)
			}
		}
		if f.Deletion != nil && f.Deletion.BaseID {
			return fmt.Errorf("%w: fragment %d: %s", ErrUnsupported, f.ID, why[FlagBasePaths])
		}
	}
	return nil
}

// CheckVersion refuses a data file whose format version the manifest
// records as one this reader does not decode (before any of its bytes are
// read): the manifest says 2.0 where the file's footer says 0.3, and a
// legacy file's version is 0.x or unset.
func (d *DataFile) CheckVersion() error {
	ft := lancefile.Footer{Major: uint16(min(d.Major, 1<<16-1)), Minor: uint16(min(d.Minor, 1<<16-1))} //nolint:gosec // clamped
	if d.Major == 2 && d.Minor == 0 {
		ft.Major, ft.Minor = 0, 3
	} else if d.Major == 0 && d.Minor >= 3 {
		ft.Minor = 2 // legacy files are 0.1 and 0.2; 0.3 in a manifest is not a 2.0 file
	}
	return ft.CheckVersion()
}

// Package lancetable reads the table layer of a Lance dataset: its
// versions (numbered manifests under _versions/, tags under _refs/tags/),
// a version's manifest (schema, fragments, data files, deletion files,
// feature flags) and its deletion files, written from Lance's table format
// specification and the bytes pylance writes.
//
// # Layout
//
//	TABLE/_versions/N.manifest, or (u64 max − N, 20 digits).manifest
//	TABLE/_refs/tags/NAME.json      {"version": N, ...}
//	TABLE/data/UUID.lance           the fragments' data files (lancefile)
//	TABLE/_deletions/FRAGMENT-READVERSION-ID.arrow or .bin
//
//	manifest file: [...][u32 n][Manifest protobuf, n bytes]
//	  [u64 where the u32 begins][u16 major][u16 minor]"LANC"
//	deletion file: an Arrow IPC file of one 32-bit column of deleted row
//	  offsets (.arrow), or a roaring bitmap, portable form (.bin; pylance
//	  writes one once a fragment has over 5,000 deletions)
//
// A row's address is fragment << 32 | its offset in the fragment. The
// recorded oracle (testdata/golden) holds tables of each layout.
package lancetable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/shardfeed/shardfeed/internal/protowalk"
	"github.com/shardfeed/shardfeed/sidecar/format/lance/lancefile"
)

// ErrCorrupt is the error of bytes that are not a valid Lance table.
var ErrCorrupt = errors.New("corrupt Lance table")

// ErrUnsupported is the error of a valid table this reader does not read.
var ErrUnsupported = errors.New("unsupported Lance table")

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Bounds on a manifest.
const (
	MaxManifestBytes = 256 << 20
	maxFields        = 1 << 16
	maxFragments     = 1 << 24
)

// Manifest is what a version's manifest says.
type Manifest struct {
	Version     uint64
	Fields      []lancefile.Field
	Fragments   []Fragment
	ReaderFlags uint64
	// DataFormat is the table's file version ("2.2").
	DataFormat string
	Branch     string
	BasePaths  int
}

// Fragment is a set of rows stored in data files of the same rows.
type Fragment struct {
	ID           uint64
	Files        []DataFile
	Deletion     *DeletionFile
	PhysicalRows uint64
	Overlays     bool
}

// DataFile is one file of a fragment: which fields it stores in which of
// its columns.
type DataFile struct {
	Path          string
	Fields        []int32
	ColumnIndices []int32
	Major, Minor  uint32
	Size          uint64
	BaseID        bool
}

// DeletionFile names a fragment's deleted rows.
type DeletionFile struct {
	Bitmap      bool
	ReadVersion uint64
	ID          uint64
	Deleted     uint64
	BaseID      bool
}

// Path is the deletion file's path under the table's root.
func (d *DeletionFile) Path(fragment uint64) string {
	ext := "arrow"
	if d.Bitmap {
		ext = "bin"
	}
	return fmt.Sprintf("_deletions/%d-%d-%d.%s", fragment, d.ReadVersion, d.ID, ext)
}

// ManifestAt reads the manifest in the bytes of a manifest file, b being
// bytes [from, size) of it.
func ManifestAt(b []byte, from, size int64) (*Manifest, error) {
	if len(b) < 16 || int64(len(b)) != size-from || string(b[len(b)-4:]) != "LANC" {
		return nil, corrupt("a manifest file does not end in \"LANC\"")
	}
	pos := int64(binary.LittleEndian.Uint64(b[len(b)-16:])) //nolint:gosec // checked next
	if pos < from || pos+4 > size-16 {
		return nil, fmt.Errorf("%w: the manifest at %d lies outside the %d bytes read", errShort, pos, len(b))
	}
	at := pos - from
	n := int64(binary.LittleEndian.Uint32(b[at:]))
	if at+4+n != int64(len(b))-16 {
		return nil, corrupt("a manifest of %d bytes at %d does not end at the footer", n, pos)
	}
	return parseManifest(b[at+4 : at+4+n])
}

var errShort = errors.New("short read")

func parseManifest(msg []byte) (*Manifest, error) {
	m := &Manifest{}
	err := protowalk.Fields(msg, func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error {
		switch num {
		case 1:
			f, err := parseField(b)
			if err != nil {
				return err
			}
			if len(m.Fields) == maxFields {
				return corrupt("more than %d fields", maxFields)
			}
			m.Fields = append(m.Fields, f)
		case 2:
			f, err := parseFragment(b)
			if err != nil {
				return err
			}
			if len(m.Fragments) == maxFragments {
				return corrupt("more than %d fragments", maxFragments)
			}
			m.Fragments = append(m.Fragments, f)
		case 3:
			m.Version = v
		case 9:
			m.ReaderFlags = v
		case 15:
			return protowalk.Fields(b, func(num protowire.Number, _ protowire.Type, _ uint64, s []byte) error {
				if num == 2 {
					m.DataFormat = string(s)
				}
				return nil
			})
		case 18:
			m.BasePaths++
		case 20:
			m.Branch = string(b)
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			return nil, err
		}
		return nil, corrupt("manifest: %v", err)
	}
	return m, nil
}

func parseField(msg []byte) (lancefile.Field, error) {
	f := lancefile.Field{} // proto3 leaves a parent id of 0 out; a top-level field says -1
	err := protowalk.Fields(msg, func(num protowire.Number, _ protowire.Type, v uint64, b []byte) error {
		switch num {
		case 2:
			f.Name = string(b)
		case 3:
			f.ID = int32(v) //nolint:gosec // an int32 field
		case 4:
			f.Parent = int32(v) //nolint:gosec // an int32 field
		case 5:
			f.LogicalType = string(b)
		case 6:
			f.Nullable = v != 0
		case 9:
			f.Extension = string(b)
		case 10:
			var k, val string
			if err := protowalk.Fields(b, func(num protowire.Number, _ protowire.Type, _ uint64, s []byte) error {
				switch num {
				case 1:
					k = string(s)
				case 2:
					val = string(s)
				}
				return nil
			}); err != nil {
				return err
			}
			if f.Metadata == nil {
				f.Metadata = map[string]string{}
			}
			f.Metadata[k] = val
		}
		return nil
	})
	f.Blob = lancefile.IsBlob(f.Extension, f.Metadata)
	return f, err
}

func parseFragment(msg []byte) (Fragment, error) {
	var f Fragment
	err := protowalk.Fields(msg, func(num protowire.Number, _ protowire.Type, v uint64, b []byte) error {
		switch num {
		case 1:
			f.ID = v
		case 2:
			d, err := parseDataFile(b)
			if err != nil {
				return err
			}
			f.Files = append(f.Files, d)
		case 3:
			d, err := parseDeletion(b)
			if err != nil {
				return err
			}
			f.Deletion = &d
		case 4:
			f.PhysicalRows = v
		case 11:
			f.Overlays = true
		}
		return nil
	})
	return f, err
}

func parseDataFile(msg []byte) (DataFile, error) {
	var d DataFile
	err := protowalk.Fields(msg, func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error {
		var err error
		var xs []uint64
		switch num {
		case 1:
			d.Path = string(b)
		case 2, 3:
			if xs, err = protowalk.Uints(nil, typ, v, b); err != nil {
				return err
			}
			for _, x := range xs {
				if num == 2 {
					d.Fields = append(d.Fields, int32(x)) //nolint:gosec // int32 values
				} else {
					d.ColumnIndices = append(d.ColumnIndices, int32(x)) //nolint:gosec // int32 values
				}
			}
		case 4:
			d.Major = uint32(v) //nolint:gosec // a uint32 field
		case 5:
			d.Minor = uint32(v) //nolint:gosec // a uint32 field
		case 6:
			d.Size = v
		case 7:
			d.BaseID = true
		}
		return nil
	})
	if err == nil && len(d.Fields) != len(d.ColumnIndices) && len(d.ColumnIndices) > 0 {
		err = corrupt("data file %s has %d fields and %d column indices", d.Path, len(d.Fields), len(d.ColumnIndices))
	}
	if err == nil && (d.Path == "" || strings.Contains(d.Path, "..") || strings.HasPrefix(d.Path, "/")) {
		err = corrupt("data file path %q is not a relative path within the table", d.Path)
	}
	return d, err
}

func parseDeletion(msg []byte) (DeletionFile, error) {
	var d DeletionFile
	err := protowalk.Fields(msg, func(num protowire.Number, _ protowire.Type, v uint64, _ []byte) error {
		switch num {
		case 1:
			if v > 1 {
				return corrupt("deletion file type %d", v)
			}
			d.Bitmap = v == 1
		case 2:
			d.ReadVersion = v
		case 3:
			d.ID = v
		case 4:
			d.Deleted = v
		case 7:
			d.BaseID = true
		}
		return nil
	})
	return d, err
}

package lancetable

import (
	"encoding/binary"
	"testing"
)

// FuzzManifest feeds hostile bytes to the manifest's parser and its flag
// check: an error, never a panic.
func FuzzManifest(f *testing.F) {
	msg := []byte{0x18, 0x05, 0x48, 0x01} // version 5, reader flags 1
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(msg)))
	b = append(b, msg...)
	b = binary.LittleEndian.AppendUint64(b, 0)
	b = append(b, 0, 0, 2, 0)
	f.Add(append(b, "LANC"...))
	f.Fuzz(fuzzManifest)
}

func fuzzManifest(_ *testing.T, b []byte) {
	m, err := ManifestAt(b, 0, int64(len(b)))
	if err != nil {
		return
	}
	_ = m.CheckFlags()
}

// FuzzDeleted feeds hostile bytes to both kinds of deletion file.
func FuzzDeleted(f *testing.F) {
	f.Add([]byte{0x3a, 0x30, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 7, 0}, true, uint64(1))
	f.Add([]byte("ARROW1"), false, uint64(1))
	f.Fuzz(fuzzDeleted)
}

func fuzzDeleted(t *testing.T, b []byte, bitmap bool, n uint64) {
	del, err := Deleted(&DeletionFile{Bitmap: bitmap, Deleted: n % 4096}, 1<<16, b)
	if err == nil && uint64(len(del)) != n%4096 {
		t.Fatalf("%d rows deleted, the manifest says %d", len(del), n%4096)
	}
}

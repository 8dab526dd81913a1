package webdataset

// Worked examples: the tar layout of the package doc stated from a few
// hand-made blocks. The recorded oracle (testdata/golden) proves the same
// reader against webdataset's, Energon's and wids' own tars and indexes.

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// header is a 512-byte tar header of a member: name, octal size, type and
// (ustar) prefix, with its checksum.
func header(name string, size int64, typ byte, prefix string) []byte {
	h := make([]byte, block)
	copy(h, name)
	copy(h[100:], "0000644\x00")
	copy(h[124:], fmt.Sprintf("%011o\x00", size))
	h[156] = typ
	copy(h[257:], "ustar\x0000")
	copy(h[345:], prefix)
	copy(h[148:], "        ")
	var sum int64
	for _, c := range h {
		sum += int64(c)
	}
	copy(h[148:], fmt.Sprintf("%06o\x00 ", sum))
	return h
}

// data pads a member's bytes to whole blocks.
func data(b string) []byte {
	return append([]byte(b), make([]byte, padded(int64(len(b)))-int64(len(b)))...)
}

func TestWorkedUstarMembers(t *testing.T) {
	tar := bytes.Join([][]byte{
		header("000001.jpg", 12, '0', ""), data("twelve bytes"),
		header("000001.cls", 1, '0', "shard-a"), data("7"),
		make([]byte, 2*block), // the archive's end
	}, nil)
	m, done, err := nextMember(bytesBlocks(tar), 0, int64(len(tar)))
	if err != nil || done {
		t.Fatalf("first member: %v (done %v)", err, done)
	}
	if want := (member{Name: "000001.jpg", Start: 0, Data: 512, Size: 12, Regular: true}); m != want || m.End() != 1024 {
		t.Fatalf("first member %+v (ends at %d), want %+v ending at 1024", m, m.End(), want)
	}
	// The ustar prefix joins the name; the next member begins at the
	// previous one's padded end.
	m, _, err = nextMember(bytesBlocks(tar), m.End(), int64(len(tar)))
	if err != nil || m.Name != "shard-a/000001.cls" || m.Data != 1536 || m.Size != 1 {
		t.Fatalf("second member %+v, %v", m, err)
	}
	if _, done, err := nextMember(bytesBlocks(tar), m.End(), int64(len(tar))); !done || err != nil {
		t.Fatalf("the zero blocks end the archive: done %v, %v", done, err)
	}
	// A range that ends mid-padding is refused, naming the member.
	if _, _, err := nextMember(bytesBlocks(tar), 0, 600); !errors.Is(err, errCorrupt) {
		t.Fatalf("a member cut by the range's end: %v", err)
	}
}

// A PAX header ('x') before a member overrides its name and size: each
// record is "LEN key=value\n", LEN counting the whole record.
func TestWorkedPAXHeader(t *testing.T) {
	pax := "42 path=a/long/directory/name/000002.json\n10 size=2\n"
	if len(pax) != 42+10 {
		t.Fatalf("the records' lengths are wrong: %d bytes", len(pax))
	}
	tar := bytes.Join([][]byte{
		header("PaxHeaders/000002.json", int64(len(pax)), 'x', ""), data(pax),
		header("000002.json", 99, '0', ""), data("{}"),
	}, nil)
	m, _, err := nextMember(bytesBlocks(tar), 0, int64(len(tar)))
	if err != nil {
		t.Fatal(err)
	}
	if want := (member{Name: "a/long/directory/name/000002.json", Start: 0, Data: 1536, Size: 2, Regular: true}); m != want {
		t.Fatalf("member %+v, want %+v: the PAX header's path and size", m, want)
	}
	if _, _, err := parsePAX([]byte("99 path=x\n")); err == nil {
		t.Fatal("a record longer than its bytes was read")
	}
}

// Numbers are octal, or base-256 (GNU) when the first byte's high bit is
// set; the checksum is the sum of the header's bytes with its own field as
// spaces.
func TestWorkedNumbersAndChecksum(t *testing.T) {
	for _, c := range []struct {
		field []byte
		want  int64
	}{
		{[]byte("00000000144\x00"), 100},
		{[]byte("144 \x00"), 100},
		{[]byte{0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0}, 256},
		{[]byte{0, 0, 0}, 0},
	} {
		if got, err := number(c.field); err != nil || got != c.want {
			t.Errorf("number(%q) = %d, %v; want %d", c.field, got, err, c.want)
		}
	}
	h := header("x.txt", 0, '0', "")
	if err := checkSum(h); err != nil {
		t.Fatal(err)
	}
	h[0] = 'y'
	if err := checkSum(h); err == nil {
		t.Fatal("a header changed after its checksum was accepted")
	}
}

// A sample's key is the member's name up to the first dot of its base
// name, its column the rest, lower-cased; __…__ names are skipped.
func TestWorkedKeysAndColumns(t *testing.T) {
	for _, c := range []struct{ name, key, ext string }{
		{"000001.jpg", "000001", "jpg"},
		{"dir.v2/000001.seg.PNG", "dir.v2/000001", "seg.png"},
		{"__key__", "", ""},
		{"noext", "", ""},
	} {
		key, ext, ok := keyExt(c.name)
		if ok != (c.key != "") || key != c.key || ext != c.ext {
			t.Errorf("keyExt(%q) = %q, %q, %v; want %q, %q", c.name, key, ext, ok, c.key, c.ext)
		}
	}
}

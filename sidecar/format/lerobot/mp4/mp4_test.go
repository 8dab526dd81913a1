package mp4

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
)

// box is a box of type typ around the payloads.
func box(typ string, payload ...[]byte) []byte {
	body := bytes.Join(payload, nil)
	out := binary.BigEndian.AppendUint32(nil, uint32(8+len(body))) //nolint:gosec // test boxes are small
	return append(append(out, typ...), body...)
}

// full is a full box's version (0) and flags, then fields.
func full(fields ...uint32) []byte {
	out := []byte{0, 0, 0, 0}
	for _, f := range fields {
		out = binary.BigEndian.AppendUint32(out, f)
	}
	return out
}

// movie describes a one-track test file.
type movie struct {
	sizes    []uint32
	perChunk []uint32 // samples in each chunk
	deltas   uint32
	cts      []uint32 // per sample; nil: no ctts
	keys     []uint32 // 1-based; nil: no stss
	edit     int32    // media time of the one edit; <0: none
	handler  string
	codec    string
	co64     bool
}

// file writes ftyp, mdat (the samples, chunk after chunk) and moov.
func (m movie) file() []byte {
	ftyp := box("ftyp", []byte("isom"), make([]byte, 4))
	var data []byte
	for i, s := range m.sizes {
		data = append(data, bytes.Repeat([]byte{byte(i)}, int(s))...)
	}
	mdatOff := uint32(len(ftyp)) + 8 //nolint:gosec // small
	var offsets []uint32
	off, s := mdatOff, 0
	for _, n := range m.perChunk {
		offsets = append(offsets, off)
		for range n {
			off += m.sizes[s]
			s++
		}
	}
	stsz := full(0, uint32(len(m.sizes))) //nolint:gosec // small
	for _, s := range m.sizes {
		stsz = binary.BigEndian.AppendUint32(stsz, s)
	}
	stsc := full(uint32(len(m.perChunk))) //nolint:gosec // small
	for i, n := range m.perChunk {
		stsc = binary.BigEndian.AppendUint32(stsc, uint32(i+1)) //nolint:gosec // small
		stsc = binary.BigEndian.AppendUint32(stsc, n)
		stsc = binary.BigEndian.AppendUint32(stsc, 1)
	}
	var co []byte
	if m.co64 {
		co = full(uint32(len(offsets))) //nolint:gosec // small
		for _, o := range offsets {
			co = binary.BigEndian.AppendUint64(co, uint64(o))
		}
		co = box("co64", co)
	} else {
		co = box("stco", full(append([]uint32{uint32(len(offsets))}, offsets...)...)) //nolint:gosec // small
	}
	stbl := [][]byte{
		box("stsd", full(1), m.entry()),
		box("stts", full(1, uint32(len(m.sizes)), m.deltas)), //nolint:gosec // small
		box("stsc", stsc),
		box("stsz", stsz),
		co,
	}
	if m.cts != nil {
		ctts := full(uint32(len(m.cts))) //nolint:gosec // small
		for _, c := range m.cts {
			ctts = binary.BigEndian.AppendUint32(ctts, 1)
			ctts = binary.BigEndian.AppendUint32(ctts, c)
		}
		stbl = append(stbl, box("ctts", ctts))
	}
	if m.keys != nil {
		stbl = append(stbl, box("stss", full(append([]uint32{uint32(len(m.keys))}, m.keys...)...))) //nolint:gosec // small
	}
	handler := m.handler
	if handler == "" {
		handler = "vide"
	}
	trak := [][]byte{
		box("tkhd", full(0, 0, 7)),
		box("mdia",
			box("mdhd", full(0, 0, 12800, 0)),
			box("hdlr", full(0), []byte(handler), make([]byte, 12)),
			box("minf", box("stbl", stbl...))),
	}
	if m.edit >= 0 {
		trak = append(trak, box("edts", box("elst", full(1, 1000, uint32(m.edit), 1<<16)))) //nolint:gosec // test value
	}
	moov := box("moov", box("mvhd", full(0, 0, 1000)), box("trak", trak...))
	return bytes.Join([][]byte{ftyp, box("mdat", data), moov}, nil)
}

func (m movie) entry() []byte {
	codec := m.codec
	if codec == "" {
		codec = "av01"
	}
	e := make([]byte, 6+2+16)
	e = binary.BigEndian.AppendUint16(e, 64)
	e = binary.BigEndian.AppendUint16(e, 48)
	return box(codec, e, make([]byte, 50), box("av1C", []byte{0x81, 0, 0x0c, 0}), box("pasp", full(1, 1)))
}

func read(b []byte) ReadAtFunc {
	return func(off, n int64) ([]byte, error) {
		if off < 0 || off+n > int64(len(b)) {
			return nil, fmt.Errorf("read [%d, %d) of %d", off, off+n, len(b))
		}
		return b[off : off+n], nil
	}
}

func parse(t *testing.T, b []byte) (*Movie, error) {
	t.Helper()
	moov, err := FindMovie(read(b), int64(len(b)))
	if err != nil {
		return nil, err
	}
	return ParseMovie(b[moov.Offset:moov.Offset+moov.Size], int64(len(b)))
}

func TestSampleTables(t *testing.T) {
	m := movie{
		sizes:    []uint32{10, 3, 4, 5, 6, 7},
		perChunk: []uint32{2, 1, 3},
		deltas:   512,
		cts:      []uint32{1024, 2048, 0, 0, 1024, 512},
		keys:     []uint32{1, 4},
		edit:     1024,
	}
	for _, co64 := range []bool{false, true} {
		m.co64 = co64
		b := m.file()
		mv, err := parse(t, b)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := mv.Video()
		if err != nil {
			t.Fatal(err)
		}
		if tr.ConfigType != "av1C" || !bytes.Equal(tr.Config, []byte{0x81, 0, 0x0c, 0}) {
			t.Fatalf("config %s %x", tr.ConfigType, tr.Config)
		}
		if tr.ID != 7 || tr.Codec != "av01" || tr.Width != 64 || tr.Height != 48 || tr.Timescale != 12800 || tr.Edit != 1024 || mv.Timescale != 1000 {
			t.Fatalf("track %+v", tr)
		}
		off := int64(len(box("ftyp", make([]byte, 8))) + 8)
		for i, s := range tr.Samples {
			if s.Offset != off || s.Size != m.sizes[i] || s.DTS != int64(512*i) || s.CTS != int32(m.cts[i]) || s.Key != (i == 0 || i == 3) { //nolint:gosec // test value
				t.Errorf("co64=%t sample %d: %+v", co64, i, s)
			}
			if b[s.Offset] != byte(i) || b[s.Offset+int64(s.Size)-1] != byte(i) {
				t.Errorf("sample %d's bytes are not where its offset says", i)
			}
			off += int64(s.Size)
		}
	}
}

func TestNoSyncTableMeansEverySampleIsKey(t *testing.T) {
	mv, err := parse(t, movie{sizes: []uint32{1, 2}, perChunk: []uint32{2}, deltas: 1, edit: -1}.file())
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := mv.Video()
	if !tr.Samples[0].Key || !tr.Samples[1].Key || tr.Edit != 0 {
		t.Fatalf("%+v", tr)
	}
}

func TestSpan(t *testing.T) {
	// Decode order I P B B | I P: shown at 0, 3, 1, 2 | 4, 5 (deltas of
	// 1, ctts shifting), with an edit of 1 that starts the showing at 0.
	m := movie{
		sizes:    []uint32{5, 5, 5, 5, 5, 5},
		perChunk: []uint32{6},
		deltas:   1,
		cts:      []uint32{1, 3, 0, 0, 1, 1},
		keys:     []uint32{1, 5},
		edit:     1,
	}
	mv, err := parse(t, m.file())
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := mv.Video()
	tests := []struct {
		lo, hi      int64
		first, last int
		ok          bool
	}{
		{lo: 0, hi: 0, first: 0, last: 0, ok: true},
		{lo: 1, hi: 1, first: 0, last: 2, ok: true}, // the B frame needs the P after it in decode order
		{lo: 3, hi: 3, first: 0, last: 1, ok: true},
		{lo: 4, hi: 5, first: 4, last: 5, ok: true},
		{lo: 2, hi: 4, first: 0, last: 4, ok: true},
		{lo: 9, hi: 10, ok: false},
	}
	for _, tt := range tests {
		first, last, ok, err := tr.Span(tt.lo, tt.hi)
		if err != nil || ok != tt.ok || (ok && (first != tt.first || last != tt.last)) {
			t.Errorf("Span(%d, %d) = %d, %d, %t, %v; want %d, %d, %t", tt.lo, tt.hi, first, last, ok, err, tt.first, tt.last, tt.ok)
		}
	}
	off, end := tr.Bytes(4, 5)
	if off != tr.Samples[4].Offset || end != tr.Samples[5].Offset+5 {
		t.Errorf("Bytes(4, 5) = [%d, %d)", off, end)
	}
	m.keys = []uint32{5}
	mv, _ = parse(t, m.file())
	tr, _ = mv.Video()
	if _, _, _, err := tr.Span(0, 0); err == nil || !strings.Contains(err.Error(), "no keyframe precedes sample 1") {
		t.Errorf("a span with no keyframe before it: %v", err)
	}
}

// An open GOP (libx265's default): each keyframe but the first is
// followed in decode order by a leading B-frame shown before it, which
// references the pictures before that keyframe. Decoding a leading frame
// starts at an earlier keyframe, shown no later than it.
func TestSpanOfOpenGOPs(t *testing.T) {
	// Decode order I CRA B P CRA B P: shown at 0, 2, 1, 3, 5, 4, 6 (an
	// edit of 1).
	m := movie{
		sizes:    []uint32{5, 5, 5, 5, 5, 5, 5},
		perChunk: []uint32{7},
		deltas:   1,
		cts:      []uint32{1, 2, 0, 1, 2, 0, 1},
		keys:     []uint32{1, 2, 5},
		edit:     1,
	}
	mv, err := parse(t, m.file())
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := mv.Video()
	tests := []struct {
		lo, hi      int64
		first, last int
	}{
		{lo: 1, hi: 1, first: 0, last: 2}, // leading: not from the CRA before it in decode order
		{lo: 2, hi: 2, first: 1, last: 1},
		{lo: 3, hi: 3, first: 1, last: 3},
		{lo: 4, hi: 4, first: 1, last: 5},
		{lo: 4, hi: 6, first: 1, last: 6},
		{lo: 5, hi: 6, first: 4, last: 6},
	}
	for _, tt := range tests {
		first, last, ok, err := tr.Span(tt.lo, tt.hi)
		if err != nil || !ok || first != tt.first || last != tt.last {
			t.Errorf("Span(%d, %d) = %d, %d, %t, %v; want %d, %d", tt.lo, tt.hi, first, last, ok, err, tt.first, tt.last)
		}
	}
	m.keys = []uint32{2, 5}
	mv, _ = parse(t, m.file())
	tr, _ = mv.Video()
	if _, _, _, err := tr.Span(1, 1); err == nil || !strings.Contains(err.Error(), "no keyframe precedes sample 3") {
		t.Errorf("a leading frame with no keyframe shown before it: %v", err)
	}
}

func TestRefusesBrokenFiles(t *testing.T) {
	good := movie{sizes: []uint32{4, 4, 4}, perChunk: []uint32{3}, deltas: 1, edit: -1}
	tests := []struct {
		name string
		file func() []byte
		want string
	}{
		{name: "truncated before moov", file: func() []byte { b := good.file(); return b[:len(b)-40] }, want: "size"},
		{name: "no moov", file: func() []byte { return append(box("ftyp", make([]byte, 8)), box("mdat", make([]byte, 10))...) }, want: "no movie box"},
		{name: "not mp4", file: func() []byte { return box("RIFF", make([]byte, 8)) }, want: "not an MP4"},
		{name: "fragmented", file: func() []byte { return append(good.file(), box("moof", make([]byte, 8))...) }, want: "fragmented MP4"},
		{name: "sizes past the file", file: func() []byte {
			m := good
			m.sizes = []uint32{4, 4, 4}
			b := m.file()
			// The third sample's size, in stsz: make it huge.
			i := bytes.LastIndex(b, []byte("stsz"))
			binary.BigEndian.PutUint32(b[i+4+12+8:], 1<<30)
			return b
		}, want: "outside the"},
		{name: "more samples than chunks hold", file: func() []byte {
			m := good
			m.perChunk = []uint32{2}
			return m.file()
		}, want: "chunks hold 2 of the track's 3 samples"},
		{name: "sync sample out of range", file: func() []byte {
			m := good
			m.keys = []uint32{9}
			return m.file()
		}, want: "sync sample 9"},
		{name: "no video", file: func() []byte {
			m := good
			m.handler = "soun"
			return m.file()
		}, want: "no video track"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mv, err := parse(t, tt.file())
			if err == nil {
				_, err = mv.Video()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// FuzzMovie: any bytes are parsed or refused, never a panic, and every
// sample of a parsed track lies inside the file.
func FuzzMovie(f *testing.F) {
	f.Add(movie{sizes: []uint32{10, 3, 4}, perChunk: []uint32{2, 1}, deltas: 5, cts: []uint32{1, 2, 0}, keys: []uint32{1}, edit: 2}.file())
	f.Add(movie{sizes: []uint32{1}, perChunk: []uint32{1}, deltas: 1, edit: -1, co64: true}.file())
	f.Fuzz(func(t *testing.T, b []byte) {
		mv, err := parse(t, b)
		if err != nil {
			return
		}
		for _, tr := range mv.Tracks {
			for i, s := range tr.Samples {
				if s.Offset < 0 || s.Offset+int64(s.Size) > int64(len(b)) {
					t.Fatalf("track %d sample %d at [%d, +%d) outside %d bytes", tr.ID, i, s.Offset, s.Size, len(b))
				}
			}
			if len(tr.Samples) > 0 {
				first, last, ok, err := tr.Span(0, 1<<40)
				if err == nil && ok && (first > last || last >= len(tr.Samples)) {
					t.Fatalf("span %d..%d of %d samples", first, last, len(tr.Samples))
				}
			}
		}
	})
}

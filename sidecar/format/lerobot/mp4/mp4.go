// Package mp4 reads the sample tables of an MP4 file (ISO/IEC 14496-12):
// where each video sample's bytes are, when it is decoded and shown, and
// which samples are keyframes. That is what a LeRobot stream's index needs
// to fetch one episode's frames of a video file that holds many, by range,
// and what the decoder is handed: the movie box and those ranges, never
// the whole file. It decodes no picture.
//
// Every count and offset comes from the file and is checked against the
// bytes that hold it and against the file's size, so a hostile file is
// refused with an error, in memory bounded by its movie box.
package mp4

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// MaxMovieBytes bounds the movie box shardfeed reads: its sample tables
// take about 12 bytes per frame, so 64 MiB is over five million frames.
const MaxMovieBytes = 64 << 20

// MaxSamples bounds a track's samples (19 hours at 60 fps): 128 MiB of
// samples in memory at most.
const MaxSamples = 1 << 22

// Movie is a file's movie box: its tracks.
type Movie struct {
	// Timescale is the movie's units per second (mvhd).
	Timescale uint32
	Tracks    []Track
}

// Track is one track of a movie.
type Track struct {
	ID uint32
	// Handler is the track's kind: "vide" for video, "soun" for audio.
	Handler string
	// Codec is the sample entry's four-character code: avc1 or avc3
	// (H.264), hvc1 or hev1 (HEVC), av01 (AV1), ...
	Codec string
	// Width and Height are the sample entry's, in pixels.
	Width, Height uint16
	// Config is the decoder configuration the sample entry carries (the
	// payload of its avcC, hvcC or av1C box), what a decoder is opened
	// with; ConfigType names the box.
	Config     []byte
	ConfigType string
	// Entry is the whole sample entry box, as the file has it (what a
	// clip of the track's samples describes them with).
	Entry []byte
	// Timescale is the track's units per second (mdhd): DTS and PTS are
	// in it.
	Timescale uint32
	// Edit is the media time the track's presentation starts at (the
	// first edit of its edit list that is not empty), 0 without one.
	Edit int64
	// Samples in decode order.
	Samples []Sample
}

// Sample is one sample (a frame of a video track).
type Sample struct {
	// Offset and Size are its bytes in the file.
	Offset int64
	Size   uint32
	// DTS is its decode time; CTS its composition offset: it is shown
	// at DTS+CTS.
	DTS int64
	CTS int32
	// Key says it is a sync sample: decoding may start at it.
	Key bool
}

// PTS is the sample's presentation time, in its track's timescale,
// before the track's edit.
func (s Sample) PTS() int64 { return s.DTS + int64(s.CTS) }

// Video returns the movie's only video track; an error when it has none
// or several (LeRobot writes one per file).
func (m *Movie) Video() (*Track, error) {
	var out *Track
	for i := range m.Tracks {
		if m.Tracks[i].Handler != "vide" {
			continue
		}
		if out != nil {
			return nil, fmt.Errorf("the file has video tracks %d and %d: shardfeed reads files of one video track", out.ID, m.Tracks[i].ID)
		}
		out = &m.Tracks[i]
	}
	if out == nil {
		return nil, errors.New("the file has no video track")
	}
	return out, nil
}

// Box is a box's place in the file: its type, and the bytes [Offset,
// Offset+Size) it spans with its header.
type Box struct {
	Type   string
	Offset int64
	Size   int64
}

// ReadAtFunc reads n bytes at off of the file.
type ReadAtFunc func(off, n int64) ([]byte, error)

// maxTopBoxes bounds the top-level boxes walked to find the movie.
const maxTopBoxes = 1024

// FindMovie walks the top-level boxes of a file of size bytes, reading
// only their headers, and returns its movie box. A fragmented file (moof)
// is refused: its samples are not in the movie box.
func FindMovie(read ReadAtFunc, size int64) (Box, error) {
	var moov Box
	off := int64(0)
	for n := 0; off < size; n++ {
		if n == maxTopBoxes {
			return Box{}, fmt.Errorf("more than %d top-level boxes: not an MP4 file shardfeed reads", maxTopBoxes)
		}
		head, err := read(off, min(16, size-off))
		if err != nil {
			return Box{}, err
		}
		typ, _, bsize, err := boxHeader(head, size-off)
		if err != nil {
			return Box{}, fmt.Errorf("top-level box at byte %d: %w", off, err)
		}
		switch typ {
		case "moov":
			if moov.Type != "" {
				return Box{}, fmt.Errorf("a second movie box at byte %d", off)
			}
			moov = Box{Type: typ, Offset: off, Size: bsize}
		case "moof":
			return Box{}, fmt.Errorf("a movie fragment at byte %d: fragmented MP4 is not read; remux the file without fragments (ffmpeg -i IN -c copy -movflags +faststart OUT.mp4)", off)
		}
		if n == 0 && typ != "ftyp" {
			return Box{}, fmt.Errorf("the file starts with a %q box, not ftyp: not an MP4 file", printable(typ))
		}
		off += bsize
	}
	if moov.Type == "" {
		return Box{}, errors.New("the file has no movie box (moov): it is truncated, or was not finished when written")
	}
	if moov.Size > MaxMovieBytes {
		return Box{}, fmt.Errorf("its movie box is %d bytes, over the %d shardfeed reads", moov.Size, MaxMovieBytes)
	}
	return moov, nil
}

// boxHeader parses a box header at the start of b, where left bytes of
// the file or parent remain: its type, header length and whole size.
func boxHeader(b []byte, left int64) (typ string, hdr, size int64, err error) {
	if len(b) < 8 {
		return "", 0, 0, fmt.Errorf("a box header needs 8 bytes, %d remain", len(b))
	}
	size, hdr = int64(binary.BigEndian.Uint32(b)), 8
	typ = string(b[4:8])
	switch size {
	case 0: // to the end
		size = left
	case 1:
		if len(b) < 16 {
			return "", 0, 0, fmt.Errorf("box %q: a 64-bit size needs 16 header bytes, %d remain", printable(typ), len(b))
		}
		u := binary.BigEndian.Uint64(b[8:])
		if u > math.MaxInt64 {
			return "", 0, 0, fmt.Errorf("box %q: size %d is out of range", printable(typ), u)
		}
		size, hdr = int64(u), 16
	}
	if size < hdr || size > left {
		return "", 0, 0, fmt.Errorf("box %q: size %d, with %d bytes left", printable(typ), size, left)
	}
	return typ, hdr, size, nil
}

func printable(typ string) string {
	for _, c := range []byte(typ) {
		if c < 0x20 || c > 0x7e {
			return fmt.Sprintf("%x", typ)
		}
	}
	return typ
}

// children walks the boxes inside b (a box's payload) and calls fn with
// each one's type and payload.
func children(b []byte, fn func(typ string, payload []byte) error) error {
	for len(b) > 0 {
		typ, hdr, size, err := boxHeader(b, int64(len(b)))
		if err != nil {
			return err
		}
		if err := fn(typ, b[hdr:size]); err != nil {
			return err
		}
		b = b[size:]
	}
	return nil
}

// ParseMovie parses a movie box (moov, with its header) of a file of
// fileSize bytes and checks every sample's range lies in the file.
func ParseMovie(b []byte, fileSize int64) (*Movie, error) {
	if len(b) > MaxMovieBytes {
		return nil, fmt.Errorf("the movie box is %d bytes, over the %d shardfeed reads", len(b), MaxMovieBytes)
	}
	typ, hdr, size, err := boxHeader(b, int64(len(b)))
	if err != nil {
		return nil, err
	}
	if typ != "moov" || size != int64(len(b)) {
		return nil, fmt.Errorf("not a whole movie box: %q of %d bytes in %d", printable(typ), size, len(b))
	}
	m := &Movie{}
	err = children(b[hdr:], func(typ string, p []byte) error {
		switch typ {
		case "mvhd":
			r := reader{b: p}
			v := r.fullBox()
			if v == 1 {
				r.skip(16)
			} else {
				r.skip(8)
			}
			m.Timescale = r.u32()
			return r.err("mvhd")
		case "trak":
			t, err := parseTrack(p, fileSize)
			if err != nil {
				return fmt.Errorf("track %d: %w", len(m.Tracks)+1, err)
			}
			m.Tracks = append(m.Tracks, *t)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("movie box: %w", err)
	}
	return m, nil
}

// tables are a track's sample tables, as stored.
type tables struct {
	stts, ctts, stss, stsc, stsz, stz2, stco, co64, stsd []byte
	hasStss                                              bool
}

func parseTrack(b []byte, fileSize int64) (*Track, error) {
	t := &Track{}
	var tb tables
	var walk func(typ string, p []byte) error
	walk = func(typ string, p []byte) error {
		switch typ {
		case "tkhd":
			r := reader{b: p}
			if r.fullBox() == 1 {
				r.skip(16)
			} else {
				r.skip(8)
			}
			t.ID = r.u32()
			return r.err("tkhd")
		case "edts":
			return children(p, walk)
		case "elst":
			return t.parseEdits(p)
		case "mdia", "minf", "stbl":
			return children(p, walk)
		case "mdhd":
			r := reader{b: p}
			if r.fullBox() == 1 {
				r.skip(16)
			} else {
				r.skip(8)
			}
			t.Timescale = r.u32()
			return r.err("mdhd")
		case "hdlr":
			r := reader{b: p}
			r.fullBox()
			r.skip(4)
			t.Handler = string(r.bytes(4))
			return r.err("hdlr")
		case "stsd":
			tb.stsd = p
		case "stts":
			tb.stts = p
		case "ctts":
			tb.ctts = p
		case "stss":
			tb.stss, tb.hasStss = p, true
		case "stsc":
			tb.stsc = p
		case "stsz":
			tb.stsz = p
		case "stz2":
			tb.stz2 = p
		case "stco":
			tb.stco = p
		case "co64":
			tb.co64 = p
		}
		return nil
	}
	if err := children(b, walk); err != nil {
		return nil, err
	}
	if t.Handler != "vide" {
		return t, nil // only video tracks' samples are read
	}
	if t.Timescale == 0 {
		return nil, errors.New("its media header (mdhd) is missing or has timescale 0")
	}
	if err := t.parseEntry(tb.stsd); err != nil {
		return nil, err
	}
	if err := t.parseSamples(&tb, fileSize); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Track) parseEdits(p []byte) error {
	r := reader{b: p}
	v := r.fullBox()
	n := r.u32()
	width := 8
	if v == 1 {
		width = 16
	}
	if !r.fits(n, width+4) {
		return r.err("elst")
	}
	for range n {
		var mediaTime int64
		if v == 1 {
			r.skip(8)
			mediaTime = int64(r.u64()) //nolint:gosec // a signed field, as stored
		} else {
			r.skip(4)
			mediaTime = int64(int32(r.u32())) //nolint:gosec // a signed field, as stored
		}
		r.skip(4) // media rate
		if mediaTime >= 0 {
			t.Edit = mediaTime
			break
		}
	}
	return r.err("elst")
}

func (t *Track) parseEntry(p []byte) error {
	if p == nil {
		return errors.New("it has no sample description (stsd)")
	}
	r := reader{b: p}
	r.fullBox()
	if n := r.u32(); n != 1 && r.ok() {
		return fmt.Errorf("its sample description has %d entries: shardfeed reads tracks of one", n)
	}
	entry := r.rest()
	if err := r.err("stsd"); err != nil {
		return err
	}
	typ, hdr, size, err := boxHeader(entry, int64(len(entry)))
	if err != nil {
		return fmt.Errorf("sample description: %w", err)
	}
	t.Codec = printable(typ)
	t.Entry = entry[:size]
	e := reader{b: entry[hdr:]}
	// SampleEntry: 6 reserved bytes and a data reference index; then
	// VisualSampleEntry's 16 bytes of pre_defined and reserved fields
	// before its width and height.
	e.skip(6 + 2 + 16)
	t.Width, t.Height = e.u16(), e.u16()
	// The rest of VisualSampleEntry's fields (resolutions, frame count,
	// compressor name, depth), then its boxes.
	e.skip(14 + 36)
	if err := e.err("visual sample entry"); err != nil {
		return err
	}
	return children(e.rest(), func(typ string, p []byte) error {
		switch typ {
		case "avcC", "hvcC", "av1C":
			t.Config, t.ConfigType = p, typ
		}
		return nil
	})
}

// parseSamples expands the sample tables into t.Samples.
func (t *Track) parseSamples(tb *tables, fileSize int64) error {
	sizes, err := sampleSizes(tb, fileSize)
	if err != nil {
		return err
	}
	n := len(sizes)
	chunks, err := chunkOffsets(tb)
	if err != nil {
		return err
	}
	t.Samples = make([]Sample, n)
	for i, s := range sizes {
		t.Samples[i].Size = s
	}
	if err := t.placeSamples(tb.stsc, chunks, fileSize); err != nil {
		return err
	}
	if err := t.timeSamples(tb.stts, tb.ctts); err != nil {
		return err
	}
	if !tb.hasStss {
		for i := range t.Samples {
			t.Samples[i].Key = true
		}
		return nil
	}
	r := reader{b: tb.stss}
	r.fullBox()
	k := r.u32()
	if !r.fits(k, 4) {
		return r.err("stss")
	}
	for range k {
		s := r.u32()
		if s == 0 || int64(s) > int64(n) {
			return fmt.Errorf("sync sample %d is outside the track's %d samples", s, n)
		}
		t.Samples[s-1].Key = true
	}
	return r.err("stss")
}

func sampleSizes(tb *tables, fileSize int64) ([]uint32, error) {
	switch {
	case tb.stsz != nil:
		r := reader{b: tb.stsz}
		r.fullBox()
		fixed, n := r.u32(), r.u32()
		if err := checkCount(n, r.err("stsz")); err != nil {
			return nil, err
		}
		if fixed != 0 {
			if int64(n)*int64(fixed) > fileSize {
				return nil, fmt.Errorf("%d samples of %d bytes do not fit in the %d-byte file", n, fixed, fileSize)
			}
			out := make([]uint32, n)
			for i := range out {
				out[i] = fixed
			}
			return out, nil
		}
		if !r.fits(n, 4) {
			return nil, r.err("stsz")
		}
		out := make([]uint32, n)
		for i := range out {
			out[i] = r.u32()
		}
		return out, r.err("stsz")
	case tb.stz2 != nil:
		r := reader{b: tb.stz2}
		r.fullBox()
		r.skip(3)
		field := r.u8()
		n := r.u32()
		if err := checkCount(n, r.err("stz2")); err != nil {
			return nil, err
		}
		if field != 4 && field != 8 && field != 16 {
			return nil, fmt.Errorf("compact sample sizes (stz2) of %d bits: 4, 8 or 16 are valid", field)
		}
		need := (int64(n)*int64(field) + 7) / 8
		b := r.rest()
		if int64(len(b)) < need {
			return nil, fmt.Errorf("compact sample sizes (stz2): %d samples need %d bytes, the box has %d", n, need, len(b))
		}
		out := make([]uint32, n)
		for i := range out {
			switch field {
			case 4:
				v := b[i/2]
				if i%2 == 0 {
					v >>= 4
				}
				out[i] = uint32(v & 0xf)
			case 8:
				out[i] = uint32(b[i])
			case 16:
				out[i] = uint32(binary.BigEndian.Uint16(b[2*i:]))
			}
		}
		return out, nil
	}
	return nil, errors.New("it has no sample sizes (stsz or stz2)")
}

func checkCount(n uint32, err error) error {
	if err != nil {
		return err
	}
	if n > MaxSamples {
		return fmt.Errorf("%d samples, over the %d shardfeed reads in a track", n, MaxSamples)
	}
	return nil
}

func chunkOffsets(tb *tables) ([]int64, error) {
	var (
		r     reader
		width int
		name  string
	)
	switch {
	case tb.stco != nil:
		r, width, name = reader{b: tb.stco}, 4, "stco"
	case tb.co64 != nil:
		r, width, name = reader{b: tb.co64}, 8, "co64"
	default:
		return nil, errors.New("it has no chunk offsets (stco or co64)")
	}
	r.fullBox()
	n := r.u32()
	if !r.fits(n, width) {
		return nil, r.err(name)
	}
	out := make([]int64, n)
	for i := range out {
		if width == 4 {
			out[i] = int64(r.u32())
		} else {
			u := r.u64()
			if u > math.MaxInt64 {
				return nil, fmt.Errorf("chunk %d's offset %d is out of range", i+1, u)
			}
			out[i] = int64(u)
		}
	}
	return out, r.err(name)
}

// placeSamples sets each sample's offset from the chunk offsets and the
// sample-to-chunk runs, and checks it lies in the file.
func (t *Track) placeSamples(stsc []byte, chunks []int64, fileSize int64) error {
	if stsc == nil {
		return errors.New("it has no sample-to-chunk table (stsc)")
	}
	r := reader{b: stsc}
	r.fullBox()
	n := r.u32()
	if !r.fits(n, 12) {
		return r.err("stsc")
	}
	type run struct{ first, perChunk uint32 }
	runs := make([]run, n)
	for i := range runs {
		runs[i] = run{first: r.u32(), perChunk: r.u32()}
		r.skip(4)
		if runs[i].first == 0 || (i > 0 && runs[i].first <= runs[i-1].first) {
			return fmt.Errorf("sample-to-chunk entry %d starts at chunk %d, not after the one before", i+1, runs[i].first)
		}
	}
	if err := r.err("stsc"); err != nil {
		return err
	}
	s := 0
	for k, ch := range runs {
		last := uint32(len(chunks)) //nolint:gosec // bounded by the box
		if k+1 < len(runs) {
			last = min(runs[k+1].first-1, last)
		}
		for c := ch.first; c <= last && s < len(t.Samples); c++ {
			off := chunks[c-1]
			for range ch.perChunk {
				if s == len(t.Samples) {
					return fmt.Errorf("chunk %d holds more samples than the track's %d", c, len(t.Samples))
				}
				end := off + int64(t.Samples[s].Size)
				if off < 0 || end < off || end > fileSize {
					return fmt.Errorf("sample %d spans bytes [%d, %d), outside the %d-byte file: it is truncated or corrupt", s+1, off, end, fileSize)
				}
				t.Samples[s].Offset = off
				off = end
				s++
			}
		}
	}
	if s != len(t.Samples) {
		return fmt.Errorf("the chunks hold %d of the track's %d samples", s, len(t.Samples))
	}
	return nil
}

// timeSamples sets each sample's decode time and composition offset.
func (t *Track) timeSamples(stts, ctts []byte) error {
	if stts == nil {
		return errors.New("it has no decode times (stts)")
	}
	r := reader{b: stts}
	r.fullBox()
	n := r.u32()
	if !r.fits(n, 8) {
		return r.err("stts")
	}
	s, dts := 0, int64(0)
	for range n {
		count, delta := r.u32(), r.u32()
		if int64(count) > int64(len(t.Samples)-s) {
			return fmt.Errorf("the decode times (stts) are of more samples than the track's %d", len(t.Samples))
		}
		for range count {
			t.Samples[s].DTS = dts
			dts += int64(delta)
			s++
		}
	}
	if err := r.err("stts"); err != nil {
		return err
	}
	if s != len(t.Samples) {
		return fmt.Errorf("the decode times (stts) are of %d of the track's %d samples", s, len(t.Samples))
	}
	if ctts == nil {
		return nil
	}
	r = reader{b: ctts}
	v := r.fullBox()
	n = r.u32()
	if !r.fits(n, 8) {
		return r.err("ctts")
	}
	s = 0
	for range n {
		count, off := r.u32(), r.u32()
		if int64(count) > int64(len(t.Samples)-s) {
			return fmt.Errorf("the composition offsets (ctts) are of more samples than the track's %d", len(t.Samples))
		}
		cts := int32(off) //nolint:gosec // version 1 stores it signed; version 0's writers do too, in practice
		if v == 0 && off > math.MaxInt32 {
			return fmt.Errorf("composition offset %d is out of range", off)
		}
		for range count {
			t.Samples[s].CTS = cts
			s++
		}
	}
	if err := r.err("ctts"); err != nil {
		return err
	}
	if s != len(t.Samples) {
		return fmt.Errorf("the composition offsets (ctts) are of %d of the track's %d samples", s, len(t.Samples))
	}
	return nil
}

// reader reads big-endian fields of a box payload; a read past its end
// sets short, which err reports once.
type reader struct {
	b     []byte
	short bool
}

func (r *reader) bytes(n int) []byte {
	if r.short || n > len(r.b) {
		r.short = true
		return make([]byte, n)
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) skip(n int)    { r.bytes(n) }
func (r *reader) u8() uint8     { return r.bytes(1)[0] }
func (r *reader) u16() uint16   { return binary.BigEndian.Uint16(r.bytes(2)) }
func (r *reader) u32() uint32   { return binary.BigEndian.Uint32(r.bytes(4)) }
func (r *reader) u64() uint64   { return binary.BigEndian.Uint64(r.bytes(8)) }
func (r *reader) ok() bool      { return !r.short }
func (r *reader) rest() []byte  { out := r.b; r.b = nil; return out }
func (r *reader) fullBox() byte { return byte(r.u32() >> 24) }

// fits says n entries of width bytes remain; else the box is short.
func (r *reader) fits(n uint32, width int) bool {
	if r.short || int64(n)*int64(width) > int64(len(r.b)) {
		r.short = true
		return false
	}
	return true
}

func (r *reader) err(box string) error {
	if r.short {
		return fmt.Errorf("the %s box is shorter than its fields", box)
	}
	return nil
}

// Span returns the samples, in decode order [first, last], that decoding
// every frame shown in [lo, hi] (presentation times in the track's
// timescale, after its edit) needs: from the keyframe DecodeStart gives
// for them to the last of them in decode order. ok is false when no frame
// is shown in [lo, hi].
func (t *Track) Span(lo, hi int64) (first, last int, ok bool, err error) {
	first, last = -1, -1
	var shown int64
	for i, s := range t.Samples {
		p := s.PTS() - t.Edit
		if p < lo || p > hi {
			continue
		}
		if first < 0 || i < first {
			first = i
		}
		if last < 0 || s.PTS() < shown {
			shown = s.PTS()
		}
		last = max(last, i)
	}
	if first < 0 {
		return 0, 0, false, nil
	}
	first, err = t.DecodeStart(first, shown)
	if err != nil {
		return 0, 0, false, err
	}
	return first, last, true, nil
}

// DecodeStart is the sample decoding must start at to show sample s and
// every sample after it in decode order shown at pts or later (the
// samples' own times, before the edit): the last keyframe at or before s
// in decode order that is shown no later than pts. A keyframe before s
// is not always enough: the leading pictures of an open GOP (HEVC's RASL
// pictures after a CRA, as libx265 writes by default) follow their
// keyframe in decode order but are shown before it and reference the
// pictures before it, so a decoder starting at that keyframe drops them.
func (t *Track) DecodeStart(s int, pts int64) (int, error) {
	first := s
	for first >= 0 && (!t.Samples[first].Key || t.Samples[first].PTS() > pts) {
		first--
	}
	if first < 0 {
		return 0, fmt.Errorf("no keyframe precedes sample %d (shown at %d/%d s): the track cannot be decoded there", s+1, t.Samples[s].PTS()-t.Edit, t.Timescale)
	}
	return first, nil
}

// Bytes is the range [off, end) of the file that samples [first, last]
// occupy, with whatever lies between them (another track's samples).
func (t *Track) Bytes(first, last int) (off, end int64) {
	off, end = t.Samples[first].Offset, t.Samples[first].Offset
	for _, s := range t.Samples[first : last+1] {
		off = min(off, s.Offset)
		end = max(end, s.Offset+int64(s.Size))
	}
	return off, end
}

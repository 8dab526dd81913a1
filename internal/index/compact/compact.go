package compact

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
)

// The compact form of a shardfeed index (docs/formats.md, "The compact
// index"): the same File, its shards stored as fixed-width columns that a
// reader fetches in parts.
//
//	bytes 0-7    magic "SFINDEX\x01"
//	bytes 8-11   the header's length H, little-endian
//	bytes 12-15  zero
//	bytes 16-    the header: "index", the File's JSON less its shards, and
//	             "compact", the counts, the content hash and each column
//	then         the columns' sections, at offsets from byte 16+H
//
// Each section is cut into blocks of the header's blockSize bytes, each with its
// SHA-256 in the header, so that a reader of a part of a section checks
// what it read against the header alone. The header is the root of trust:
// its content hash is the one a plan's fingerprint takes, and a reader of
// the whole index checks that the shards hash to it.
const (
	FileName = "index.sfi"
	Key      = indexfile.Dir + "/" + FileName

	compactMagic   = "SFINDEX\x01"
	compactPrelude = 16
	// MaxHeader bounds a compact index's header: about 60 000
	// blocks' hashes, a 4 GiB index at the default block size.
	MaxHeader = 8 << 20
	// BlockSize is the block the writer cuts sections into.
	BlockSize        = 4 << 10
	maxCompactShards = 1 << 34
)

// Name rules: how each shard's name follows from its object and part,
// where one rule holds for every shard (no table of names then).
const (
	namesObject     = "object"      // the object's key
	namesObjectPart = "object#part" // the object's key, "#", the part
)

// compactHeader is the JSON header of a compact index: the File with no
// shards ("shards": null), and where its shards are.
type compactHeader struct {
	File    *indexfile.File `json:"index"`
	Compact *compactMeta    `json:"compact"`
}

// compactMeta says what the sections hold and where they are.
type compactMeta struct {
	// Shards and Samples are the index's counts; ContentHash is
	// planner.StreamIndex.ContentHash of its shards.
	Shards      int64  `json:"shards"`
	Samples     int64  `json:"samples"`
	ContentHash string `json:"contentHash"`
	// Bytes and MaxShardBytes are the planner's: the bytes a pod fetches
	// for the shards, and for the largest shard that has a sample.
	Bytes         int64 `json:"bytes"`
	MaxShardBytes int64 `json:"maxShardBytes"`
	BlockSize     int64 `json:"blockSize"`
	// SampleCounts are each shard's samples: what a planner reads whole.
	SampleCounts compactColumn `json:"sampleCounts"`
	// Records are each shard's other integers and its hash, fixed-width
	// rows: one ranged read has a run of shards' whole entries.
	Records compactRecords `json:"records"`
	// Names is a name rule, or "" for NameTable.
	Names     string          `json:"names,omitempty"`
	NameTable *compactStrings `json:"nameTable,omitempty"`
	// Objects are the shards' objects, each once (records.fields.object
	// is each shard's, an index into them).
	Objects compactStrings `json:"objects"`
	// HashTable has the shards' hashes where the records have none (not
	// all of one algorithm and width, in canonical form).
	HashTable *compactStrings `json:"hashTable,omitempty"`
	// Extras are each shard's other fields (deleted rows, partition
	// values, a Lance shard's ranges and files) as JSON, "" for none;
	// absent where no shard has any.
	Extras *compactStrings `json:"extras,omitempty"`
}

// compactRecords are fixed-width rows, one a shard: each field's Width
// bytes in the order of compactInts' fields, then the shard's digest of
// HashAlgo, HashWidth bytes (none without HashAlgo).
type compactRecords struct {
	Fields    compactInts     `json:"fields"`
	HashAlgo  string          `json:"hashAlgo,omitempty"`
	HashWidth int             `json:"hashWidth,omitempty"`
	Section   *compactSection `json:"section,omitempty"`
}

// width is a record's bytes.
func (c *compactRecords) width() int64 {
	w := int64(c.HashWidth)
	for _, f := range intFields {
		w += int64(f.col(&c.Fields).Width)
	}
	return w
}

// compactInts are the integer fields of a record: each a frame of
// reference (a column with no section of its own).
type compactInts struct {
	Object       compactColumn `json:"object"`
	Part         compactColumn `json:"part"`
	Offset       compactColumn `json:"offset"`
	Length       compactColumn `json:"length"`
	ObjectSize   compactColumn `json:"objectSize"`
	FooterOffset compactColumn `json:"footerOffset"`
	FooterLength compactColumn `json:"footerLength"`
	Rows         compactColumn `json:"rows"`
	RowStart     compactColumn `json:"rowStart"`
}

// intField binds an Entry's integer field to its column.
type intField struct {
	name string
	col  func(*compactInts) *compactColumn
	get  func(*indexfile.Entry) int64
	set  func(*indexfile.Entry, int64)
}

var intFields = []intField{
	{"object", func(c *compactInts) *compactColumn { return &c.Object }, nil, nil}, // an id into Objects
	{"part", func(c *compactInts) *compactColumn { return &c.Part }, func(e *indexfile.Entry) int64 { return int64(e.Part) }, func(e *indexfile.Entry, v int64) { e.Part = int(v) }},
	{"offset", func(c *compactInts) *compactColumn { return &c.Offset }, func(e *indexfile.Entry) int64 { return e.Offset }, func(e *indexfile.Entry, v int64) { e.Offset = v }},
	{"length", func(c *compactInts) *compactColumn { return &c.Length }, func(e *indexfile.Entry) int64 { return e.Length }, func(e *indexfile.Entry, v int64) { e.Length = v }},
	{"objectSize", func(c *compactInts) *compactColumn { return &c.ObjectSize }, func(e *indexfile.Entry) int64 { return e.ObjectSize }, func(e *indexfile.Entry, v int64) { e.ObjectSize = v }},
	{"footerOffset", func(c *compactInts) *compactColumn { return &c.FooterOffset }, func(e *indexfile.Entry) int64 { return e.FooterOffset }, func(e *indexfile.Entry, v int64) { e.FooterOffset = v }},
	{"footerLength", func(c *compactInts) *compactColumn { return &c.FooterLength }, func(e *indexfile.Entry) int64 { return e.FooterLength }, func(e *indexfile.Entry, v int64) { e.FooterLength = v }},
	{"rows", func(c *compactInts) *compactColumn { return &c.Rows }, func(e *indexfile.Entry) int64 { return e.Rows }, func(e *indexfile.Entry, v int64) { e.Rows = v }},
	{"rowStart", func(c *compactInts) *compactColumn { return &c.RowStart }, func(e *indexfile.Entry) int64 { return e.RowStart }, func(e *indexfile.Entry, v int64) { e.RowStart = v }},
}

// compactColumn is one integer per shard: value i is Base + Step·i plus
// the i-th unsigned Width-byte integer of Section (none for Width 0), or
// of a record's field.
type compactColumn struct {
	Width   int             `json:"width,omitempty"`
	Base    int64           `json:"base,omitempty"`
	Step    int64           `json:"step,omitempty"`
	Section *compactSection `json:"section,omitempty"`
}

// compactStrings are strings, string i the bytes [offset i, offset i+1)
// of Data, the offsets a column of Count+1 values.
type compactStrings struct {
	Count   int64          `json:"count"`
	Offsets compactColumn  `json:"offsets"`
	Data    compactSection `json:"data"`
}

// compactSection is a run of bytes after the header, with the SHA-256 of
// each of its blocks (base64, concatenated).
type compactSection struct {
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
	Blocks string `json:"blocks"`
}

// entryExtras are the fields of an Entry that no column holds.
type entryExtras struct {
	Deleted   []indexfile.Run           `json:"deleted,omitempty"`
	Partition []*string                 `json:"partition,omitempty"`
	Ranges    []indexfile.Range         `json:"ranges,omitempty"`
	Files     []indexfile.LanceFile     `json:"files,omitempty"`
	Episode   *indexfile.LeRobotEpisode `json:"episode,omitempty"`
}

func (x entryExtras) empty() bool {
	return x.Deleted == nil && x.Partition == nil && x.Ranges == nil && x.Files == nil && x.Episode == nil
}

// Encode writes f in the compact form. f is checked first, as a
// reader checks it.
func Encode(f *indexfile.File) ([]byte, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	n := len(f.Shards)
	w := &compactWriter{blockSize: BlockSize}
	x := f.StreamIndex()
	meta := &compactMeta{Shards: int64(n), Samples: x.Samples(), ContentHash: x.ContentHash(), Bytes: x.Bytes(), MaxShardBytes: maxShardBytes(x), BlockSize: w.blockSize}

	meta.Names = nameRule(f.Shards)
	if meta.Names == "" {
		names := make([]string, n)
		for i := range f.Shards {
			names[i] = f.Shards[i].Name
		}
		meta.NameTable = w.strings(names)
	}

	ids := make([]int64, n)
	var objects []string
	seen := map[string]int64{}
	for i := range f.Shards {
		id, ok := seen[f.Shards[i].Object]
		if !ok {
			id = int64(len(objects))
			seen[f.Shards[i].Object] = id
			objects = append(objects, f.Shards[i].Object)
		}
		ids[i] = id
	}
	meta.Objects = *w.strings(objects)
	samples := make([]int64, n)
	for i := range f.Shards {
		samples[i] = f.Shards[i].Samples
	}
	meta.SampleCounts = w.ints(samples)

	w.records(meta, f.Shards, ids)
	var err error
	if meta.Extras, err = w.extras(f.Shards); err != nil {
		return nil, err
	}

	head := *f
	head.Shards = nil
	header, err := json.Marshal(compactHeader{File: &head, Compact: meta})
	if err != nil {
		return nil, err
	}
	if len(header) > MaxHeader {
		return nil, fmt.Errorf("the compact index's header is %d bytes, over its cap of %d", len(header), MaxHeader)
	}
	out := make([]byte, compactPrelude, compactPrelude+len(header)+w.data.Len())
	copy(out, compactMagic)
	binary.LittleEndian.PutUint32(out[8:], uint32(len(header))) //nolint:gosec // capped above
	out = append(out, header...)
	return append(out, w.data.Bytes()...), nil
}

// records writes the shards' records: each field a frame of reference,
// then the hashes where they are of one form (else a table of them).
func (w *compactWriter) records(meta *compactMeta, shards []indexfile.Entry, ids []int64) {
	n := len(shards)
	rec := &meta.Records
	fields := make([][]int64, len(intFields))
	for k, fl := range intFields {
		vs := ids
		if fl.get != nil {
			vs = make([]int64, n)
			for i := range shards {
				vs[i] = fl.get(&shards[i])
			}
		}
		fields[k] = vs
		*fl.col(&rec.Fields) = frameOf(vs)
	}
	algo, hashWidth := hashForm(shards)
	if algo == "" {
		hashes := make([]string, n)
		for i := range shards {
			hashes[i] = shards[i].Hash
		}
		meta.HashTable = w.strings(hashes)
	}
	rec.HashAlgo, rec.HashWidth = algo, hashWidth
	width := rec.width()
	if width == 0 {
		return
	}
	rows := make([]byte, 0, int64(n)*width)
	var buf [8]byte
	for i := range shards {
		for k, fl := range intFields {
			c := fl.col(&rec.Fields)
			putUint(buf[:], c.Width, uint64(fields[k][i]-c.Base-c.Step*int64(i))) //nolint:gosec // ≥ 0 by frameOf
			rows = append(rows, buf[:c.Width]...)
		}
		if algo != "" {
			_, h, _ := strings.Cut(shards[i].Hash, ":")
			d, _ := hex.DecodeString(h)
			rows = append(rows, d...)
		}
	}
	sec := w.section(rows)
	rec.Section = &sec
}

// extras writes each shard's fields no record holds, as JSON; nil where
// no shard has any.
func (w *compactWriter) extras(shards []indexfile.Entry) (*compactStrings, error) {
	extras := make([]string, len(shards))
	some := false
	for i, e := range shards {
		x := entryExtras{Deleted: e.Deleted, Partition: e.Partition, Ranges: e.Ranges, Files: e.Files, Episode: e.Episode}
		if x.empty() {
			continue
		}
		b, err := json.Marshal(x)
		if err != nil {
			return nil, err
		}
		extras[i], some = string(b), true
	}
	if !some {
		return nil, nil
	}
	return w.strings(extras), nil
}

// nameRule returns the rule every shard's name follows, or "".
func nameRule(shards []indexfile.Entry) string {
	for _, rule := range []string{namesObject, namesObjectPart} {
		ok := true
		for i := range shards {
			if shards[i].Name != ruleName(rule, shards[i].Object, shards[i].Part) {
				ok = false
				break
			}
		}
		if ok {
			return rule
		}
	}
	return ""
}

func ruleName(rule, object string, part int) string {
	if rule == namesObject {
		return object
	}
	return object + "#" + strconv.Itoa(part)
}

// hashForm returns the algorithm and digest width of the shards' hashes
// when every one is canonical "algo:hex" of one algorithm and width.
func hashForm(shards []indexfile.Entry) (string, int) {
	var algo string
	width := -1
	for i := range shards {
		s, err := checksum.Parse(shards[i].Hash)
		if err != nil || s.IsZero() || s.String() != shards[i].Hash || len(s.Hex)%2 != 0 || len(s.Hex) == 0 {
			return "", 0
		}
		if width >= 0 && (s.Algo != algo || len(s.Hex)/2 != width) {
			return "", 0
		}
		algo, width = s.Algo, len(s.Hex)/2
	}
	return algo, width
}

// compactWriter appends sections.
type compactWriter struct {
	blockSize int64
	data      bytes.Buffer
}

func (w *compactWriter) section(b []byte) compactSection {
	s := compactSection{Offset: int64(w.data.Len()), Length: int64(len(b))}
	var sums []byte
	for off := int64(0); off < s.Length; off += w.blockSize {
		sum := sha256.Sum256(b[off:min(off+w.blockSize, s.Length)])
		sums = append(sums, sum[:]...)
	}
	s.Blocks = base64.StdEncoding.EncodeToString(sums)
	w.data.Write(b)
	return s
}

// ints encodes vs as a column: its frame of reference, and a section of
// the values less it where it is not all of them.
func (w *compactWriter) ints(vs []int64) compactColumn {
	c := frameOf(vs)
	if c.Width == 0 {
		return c
	}
	b := make([]byte, len(vs)*c.Width)
	for i, v := range vs {
		putUint(b[i*c.Width:], c.Width, uint64(v-c.Base)) //nolint:gosec // v ≥ c.Base
	}
	s := w.section(b)
	c.Section = &s
	return c
}

// frameOf is the frame of reference of vs: a constant or a count from a
// base in no bytes, else each value less the least in the fewest bytes.
func frameOf(vs []int64) compactColumn {
	if len(vs) == 0 {
		return compactColumn{}
	}
	for _, step := range []int64{0, 1} {
		ok := true
		for i, v := range vs {
			if v != vs[0]+step*int64(i) {
				ok = false
				break
			}
		}
		if ok {
			return compactColumn{Base: vs[0], Step: step}
		}
	}
	lo, hi := vs[0], vs[0]
	for _, v := range vs {
		lo, hi = min(lo, v), max(hi, v)
	}
	return compactColumn{Base: lo, Width: widthOf(uint64(hi - lo))} //nolint:gosec // hi ≥ lo
}

func (w *compactWriter) strings(ss []string) *compactStrings {
	offsets := make([]int64, len(ss)+1)
	var data []byte
	for i, s := range ss {
		data = append(data, s...)
		offsets[i+1] = int64(len(data))
	}
	c := &compactStrings{Count: int64(len(ss)), Offsets: w.ints(offsets)}
	c.Data = w.section(data)
	return c
}

func widthOf(v uint64) int {
	switch {
	case v <= math.MaxUint8:
		return 1
	case v <= math.MaxUint16:
		return 2
	case v <= math.MaxUint32:
		return 4
	}
	return 8
}

func putUint(b []byte, width int, v uint64) {
	switch width {
	case 1:
		b[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	default:
		binary.LittleEndian.PutUint64(b, v)
	}
}

func getUint(b []byte, width int) uint64 {
	switch width {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	}
	return binary.LittleEndian.Uint64(b)
}

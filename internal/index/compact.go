package index

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/planner"
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
	CompactFileName = "index.sfi"
	CompactKey      = Dir + "/" + CompactFileName

	compactMagic   = "SFINDEX\x01"
	compactPrelude = 16
	// MaxCompactHeader bounds a compact index's header: about 60 000
	// blocks' hashes, a 4 GiB index at the default block size.
	MaxCompactHeader = 8 << 20
	// CompactBlockSize is the block the writer cuts sections into.
	CompactBlockSize = 64 << 10
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
	File    *File        `json:"index"`
	Compact *compactMeta `json:"compact"`
}

// compactMeta says what the columns hold and where they are.
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
	// Names is a name rule, or "" for NameTable.
	Names     string          `json:"names,omitempty"`
	NameTable *compactStrings `json:"nameTable,omitempty"`
	// Objects are the shards' objects, each once; Object each shard's.
	Objects compactStrings `json:"objects"`
	Ints    compactInts    `json:"ints"`
	// Hashes are fixed-width digests of HashAlgo, where every shard's hash
	// is one of them in canonical form; else HashTable has the strings.
	HashAlgo  string          `json:"hashAlgo,omitempty"`
	Hashes    *compactSection `json:"hashes,omitempty"`
	HashTable *compactStrings `json:"hashTable,omitempty"`
	// Extras are each shard's other fields (deleted rows, partition
	// values, a Lance shard's ranges and files) as JSON, "" for none;
	// absent where no shard has any.
	Extras *compactStrings `json:"extras,omitempty"`
}

// compactInts are the integer columns, one value per shard each.
type compactInts struct {
	Object       compactColumn `json:"object"`
	Part         compactColumn `json:"part"`
	Offset       compactColumn `json:"offset"`
	Length       compactColumn `json:"length"`
	Samples      compactColumn `json:"samples"`
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
	get  func(*Entry) int64
	set  func(*Entry, int64)
}

var intFields = []intField{
	{"object", func(c *compactInts) *compactColumn { return &c.Object }, nil, nil}, // an id into Objects
	{"part", func(c *compactInts) *compactColumn { return &c.Part }, func(e *Entry) int64 { return int64(e.Part) }, func(e *Entry, v int64) { e.Part = int(v) }},
	{"offset", func(c *compactInts) *compactColumn { return &c.Offset }, func(e *Entry) int64 { return e.Offset }, func(e *Entry, v int64) { e.Offset = v }},
	{"length", func(c *compactInts) *compactColumn { return &c.Length }, func(e *Entry) int64 { return e.Length }, func(e *Entry, v int64) { e.Length = v }},
	{"samples", func(c *compactInts) *compactColumn { return &c.Samples }, func(e *Entry) int64 { return e.Samples }, func(e *Entry, v int64) { e.Samples = v }},
	{"objectSize", func(c *compactInts) *compactColumn { return &c.ObjectSize }, func(e *Entry) int64 { return e.ObjectSize }, func(e *Entry, v int64) { e.ObjectSize = v }},
	{"footerOffset", func(c *compactInts) *compactColumn { return &c.FooterOffset }, func(e *Entry) int64 { return e.FooterOffset }, func(e *Entry, v int64) { e.FooterOffset = v }},
	{"footerLength", func(c *compactInts) *compactColumn { return &c.FooterLength }, func(e *Entry) int64 { return e.FooterLength }, func(e *Entry, v int64) { e.FooterLength = v }},
	{"rows", func(c *compactInts) *compactColumn { return &c.Rows }, func(e *Entry) int64 { return e.Rows }, func(e *Entry, v int64) { e.Rows = v }},
	{"rowStart", func(c *compactInts) *compactColumn { return &c.RowStart }, func(e *Entry) int64 { return e.RowStart }, func(e *Entry, v int64) { e.RowStart = v }},
}

// compactColumn is one integer per shard: value i is Base + Step·i plus
// the i-th unsigned Width-byte integer of Section (none for Width 0).
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
	Deleted   []Run       `json:"deleted,omitempty"`
	Partition []*string   `json:"partition,omitempty"`
	Ranges    []Range     `json:"ranges,omitempty"`
	Files     []LanceFile `json:"files,omitempty"`
}

func (x entryExtras) empty() bool {
	return x.Deleted == nil && x.Partition == nil && x.Ranges == nil && x.Files == nil
}

// EncodeCompact writes f in the compact form. f is checked first, as a
// reader checks it.
func EncodeCompact(f *File) ([]byte, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	n := len(f.Shards)
	w := &compactWriter{blockSize: CompactBlockSize}
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
	values := make([]int64, n)
	for _, fl := range intFields {
		vs := ids
		if fl.get != nil {
			for i := range f.Shards {
				values[i] = fl.get(&f.Shards[i])
			}
			vs = values
		}
		*fl.col(&meta.Ints) = w.ints(vs)
	}

	if algo, width := hashForm(f.Shards); algo != "" {
		meta.HashAlgo = algo
		digests := make([]byte, 0, n*width)
		for i := range f.Shards {
			_, h, _ := strings.Cut(f.Shards[i].Hash, ":")
			d, _ := hex.DecodeString(h)
			digests = append(digests, d...)
		}
		s := w.section(digests)
		meta.Hashes = &s
	} else {
		hashes := make([]string, n)
		for i := range f.Shards {
			hashes[i] = f.Shards[i].Hash
		}
		meta.HashTable = w.strings(hashes)
	}

	extras := make([]string, n)
	some := false
	for i, e := range f.Shards {
		x := entryExtras{Deleted: e.Deleted, Partition: e.Partition, Ranges: e.Ranges, Files: e.Files}
		if x.empty() {
			continue
		}
		b, err := json.Marshal(x)
		if err != nil {
			return nil, err
		}
		extras[i], some = string(b), true
	}
	if some {
		meta.Extras = w.strings(extras)
	}

	head := *f
	head.Shards = nil
	header, err := json.Marshal(compactHeader{File: &head, Compact: meta})
	if err != nil {
		return nil, err
	}
	if len(header) > MaxCompactHeader {
		return nil, fmt.Errorf("the compact index's header is %d bytes, over its cap of %d", len(header), MaxCompactHeader)
	}
	out := make([]byte, compactPrelude, compactPrelude+len(header)+w.data.Len())
	copy(out, compactMagic)
	binary.LittleEndian.PutUint32(out[8:], uint32(len(header))) //nolint:gosec // capped above
	out = append(out, header...)
	return append(out, w.data.Bytes()...), nil
}

// nameRule returns the rule every shard's name follows, or "".
func nameRule(shards []Entry) string {
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
func hashForm(shards []Entry) (string, int) {
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

// ints encodes vs as a column: a constant or a count from a base in no
// bytes, else each value less the least in the fewest bytes.
func (w *compactWriter) ints(vs []int64) compactColumn {
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
	c := compactColumn{Base: lo, Width: widthOf(uint64(hi - lo))} //nolint:gosec // hi ≥ lo
	b := make([]byte, len(vs)*c.Width)
	for i, v := range vs {
		putUint(b[i*c.Width:], c.Width, uint64(v-lo)) //nolint:gosec // v ≥ lo
	}
	s := w.section(b)
	c.Section = &s
	return c
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

// IsCompact says whether data starts as a compact index does.
func IsCompact(data []byte) bool { return bytes.HasPrefix(data, []byte(compactMagic[:7])) }

// CompactReader reads a compact index in parts: its header at once, and
// then the shards asked for, each section's blocks fetched by ranged reads
// and checked against the header's hashes.
type CompactReader struct {
	// File is the header's File, with no shards.
	File *File
	meta *compactMeta
	at   func(off, n int64) ([]byte, error) // reads n bytes of the sections from off
	size int64                              // of the sections
	// Read counts the bytes read, the header's included.
	Read int64
}

// Shards is the number of shards the index lists.
func (r *CompactReader) Shards() int64 { return r.meta.Shards }

// Samples is the number of samples of the index's shards.
func (r *CompactReader) Samples() int64 { return r.meta.Samples }

// ContentHash is the content hash of the index's shards, as its header
// says (planner.StreamIndex.ContentHash).
func (r *CompactReader) ContentHash() string { return r.meta.ContentHash }

// Summary is the planner's view of the index as its header says it: its
// counts and content hash, and no shard (planner.StreamIndex.Summary).
func (r *CompactReader) Summary() planner.StreamIndex {
	x := r.File.StreamIndex()
	x.Summary = &planner.Summary{Shards: r.meta.Shards, Samples: r.meta.Samples, Bytes: r.meta.Bytes,
		MaxShardBytes: r.meta.MaxShardBytes, ContentHash: r.meta.ContentHash}
	return x
}

// maxShardBytes is the planner's largest shard: of those with a sample.
func maxShardBytes(x planner.StreamIndex) int64 {
	var most int64
	for _, s := range x.Shards {
		if s.Samples > 0 {
			most = max(most, s.Bytes)
		}
	}
	return most
}

// compactError is a malformed compact index.
func compactError(format string, args ...any) error {
	return fmt.Errorf("compact shardfeed index: "+format+"; re-run shardfeed index", args...)
}

// NewCompactReader reads the prelude and header of a compact index of size
// bytes, reading through readAt (ranged reads of the object), at most
// maxHeader bytes of header (0: MaxCompactHeader).
func NewCompactReader(size int64, readAt func(off, n int64) ([]byte, error), maxHeader int64) (*CompactReader, error) {
	if maxHeader <= 0 {
		maxHeader = MaxCompactHeader
	}
	if size < compactPrelude {
		return nil, compactError("%d bytes is shorter than its %d-byte prelude", size, compactPrelude)
	}
	head, err := readAt(0, min(size, compactPrelude+min(maxHeader, 64<<10)))
	if err != nil {
		return nil, err
	}
	if string(head[:8]) != compactMagic {
		if IsCompact(head) {
			return nil, fmt.Errorf("compact shardfeed index version %d is not supported: this shardfeed reads version %d; re-run shardfeed index", head[7], compactMagic[7])
		}
		return nil, compactError("it does not start with %q", compactMagic)
	}
	hlen := int64(binary.LittleEndian.Uint32(head[8:]))
	if binary.LittleEndian.Uint32(head[12:]) != 0 {
		return nil, compactError("bytes 12-15 are not zero")
	}
	if hlen > maxHeader {
		return nil, &TooLargeError{URI: "the compact index's header", Limit: maxHeader}
	}
	if compactPrelude+hlen > size {
		return nil, compactError("its header of %d bytes runs past its end (%d bytes)", hlen, size)
	}
	r := &CompactReader{size: size - compactPrelude - hlen, Read: int64(len(head))}
	header := head[compactPrelude:]
	if int64(len(header)) >= hlen {
		header = header[:hlen]
	} else {
		rest, err := readAt(int64(len(head)), compactPrelude+hlen-int64(len(head)))
		if err != nil {
			return nil, err
		}
		r.Read += int64(len(rest))
		header = append(header, rest...)
	}
	var h compactHeader
	if err := decodeStrict(header, &h); err != nil {
		return nil, compactError("header: %v", err)
	}
	if h.File == nil || h.Compact == nil {
		return nil, compactError(`its header needs "index" and "compact"`)
	}
	if h.File.Shards != nil {
		return nil, compactError(`its header lists shards: they are in its columns`)
	}
	r.File, r.meta = h.File, h.Compact
	if err := r.checkMeta(); err != nil {
		return nil, err
	}
	base := compactPrelude + hlen
	r.at = func(off, n int64) ([]byte, error) {
		b, err := readAt(base+off, n)
		if err == nil && int64(len(b)) != n {
			err = compactError("a read of %d bytes at %d gave %d", n, base+off, len(b))
		}
		r.Read += int64(len(b))
		return b, err
	}
	return r, nil
}

// checkMeta checks the header's counts and sections against each other and
// the index's size, before a byte of them is read.
func (r *CompactReader) checkMeta() error {
	m := r.meta
	if err := r.File.checkHead(); err != nil {
		return err
	}
	if m.Shards <= 0 || m.Shards > maxCompactShards {
		return compactError("%d shards is not in [1, %d]", m.Shards, int64(maxCompactShards))
	}
	if m.Shards > r.size {
		// Each shard takes a byte at least (its hash); a header that
		// claims more is not to be believed with an allocation.
		return compactError("%d shards in %d bytes of columns", m.Shards, r.size)
	}
	if m.Samples < 0 || m.Bytes < 0 || m.MaxShardBytes < 0 || m.MaxShardBytes > m.Bytes {
		return compactError("samples %d, bytes %d and maxShardBytes %d are not counts of its shards", m.Samples, m.Bytes, m.MaxShardBytes)
	}
	if m.BlockSize < 1<<10 || m.BlockSize > 64<<20 {
		return compactError("block size %d is not in [1 KiB, 64 MiB]", m.BlockSize)
	}
	if len(m.ContentHash) != 64 {
		return compactError("content hash %q is not a SHA-256 in hex", m.ContentHash)
	}
	if _, err := hex.DecodeString(m.ContentHash); err != nil {
		return compactError("content hash %q is not a SHA-256 in hex", m.ContentHash)
	}
	switch m.Names {
	case namesObject, namesObjectPart:
		if m.NameTable != nil {
			return compactError("names follow the rule %q and a table of names too", m.Names)
		}
	case "":
		if m.NameTable == nil {
			return compactError("it has neither a name rule nor a table of names")
		}
		if err := r.checkStrings("nameTable", m.NameTable, m.Shards); err != nil {
			return err
		}
	default:
		return compactError("name rule %q is not %q or %q", m.Names, namesObject, namesObjectPart)
	}
	if m.Objects.Count <= 0 || m.Objects.Count > m.Shards {
		return compactError("%d objects for %d shards", m.Objects.Count, m.Shards)
	}
	if err := r.checkStrings("objects", &m.Objects, m.Objects.Count); err != nil {
		return err
	}
	for _, f := range intFields {
		if err := r.checkColumn("ints."+f.name, f.col(&m.Ints), m.Shards); err != nil {
			return err
		}
	}
	switch {
	case (m.Hashes == nil) == (m.HashTable == nil):
		return compactError("it needs exactly one of hashes and hashTable")
	case m.Hashes != nil:
		if _, err := checksum.Parse(m.HashAlgo + ":00"); err != nil || m.HashAlgo == "" {
			return compactError("hashAlgo %q is not one of %s", m.HashAlgo, strings.Join(checksum.Algorithms(), ", "))
		}
		if m.Hashes.Length%m.Shards != 0 || m.Hashes.Length == 0 || m.Hashes.Length/m.Shards > 64 {
			return compactError("hashes of %d bytes are not a digest of 1 to 64 bytes for each of %d shards", m.Hashes.Length, m.Shards)
		}
		if err := r.checkSection("hashes", m.Hashes); err != nil {
			return err
		}
	default:
		if m.HashAlgo != "" {
			return compactError("hashAlgo is set for a table of hashes")
		}
		if err := r.checkStrings("hashTable", m.HashTable, m.Shards); err != nil {
			return err
		}
	}
	if m.Extras != nil {
		if err := r.checkStrings("extras", m.Extras, m.Shards); err != nil {
			return err
		}
	}
	return nil
}

func (r *CompactReader) checkSection(name string, s *compactSection) error {
	if s.Offset < 0 || s.Length < 0 || s.Offset > r.size || s.Length > r.size-s.Offset {
		return compactError("section %s [%d, +%d) is not within its %d bytes of columns", name, s.Offset, s.Length, r.size)
	}
	blocks := (s.Length + r.meta.BlockSize - 1) / r.meta.BlockSize
	sums, err := base64.StdEncoding.DecodeString(s.Blocks)
	if err != nil || int64(len(sums)) != blocks*sha256.Size {
		return compactError("section %s has not the %d block hashes of its %d bytes", name, blocks, s.Length)
	}
	return nil
}

func (r *CompactReader) checkColumn(name string, c *compactColumn, n int64) error {
	if c.Base < 0 || (c.Step != 0 && c.Step != 1) {
		return compactError("column %s: base %d and step %d: a base is not negative and a step is 0 or 1", name, c.Base, c.Step)
	}
	if c.Step == 1 && c.Base > math.MaxInt64-n {
		return compactError("column %s counts past the largest integer", name)
	}
	switch c.Width {
	case 0:
		if c.Section != nil {
			return compactError("column %s of width 0 has a section", name)
		}
		return nil
	case 1, 2, 4, 8:
	default:
		return compactError("column %s: width %d is not 0, 1, 2, 4 or 8", name, c.Width)
	}
	if c.Section == nil || c.Section.Length/int64(c.Width) != n || c.Section.Length%int64(c.Width) != 0 {
		return compactError("column %s needs %d values of %d bytes", name, n, c.Width)
	}
	return r.checkSection(name, c.Section)
}

func (r *CompactReader) checkStrings(name string, s *compactStrings, n int64) error {
	if s.Count != n {
		return compactError("%s has %d strings for %d", name, s.Count, n)
	}
	if err := r.checkColumn(name+".offsets", &s.Offsets, n+1); err != nil {
		return err
	}
	return r.checkSection(name+".data", &s.Data)
}

// block reads bytes [lo, hi) of a section, checking every block it reads.
func (r *CompactReader) block(name string, s *compactSection, lo, hi int64) ([]byte, error) {
	if lo < 0 || hi < lo || hi > s.Length {
		return nil, compactError("a read of %s [%d, %d) past its %d bytes", name, lo, hi, s.Length)
	}
	if lo == hi {
		return nil, nil
	}
	bs := r.meta.BlockSize
	first, last := lo/bs, (hi-1)/bs
	start := first * bs
	b, err := r.at(s.Offset+start, min((last+1)*bs, s.Length)-start)
	if err != nil {
		return nil, err
	}
	sums, _ := base64.StdEncoding.DecodeString(s.Blocks) // checked by checkSection
	for k := first; k <= last; k++ {
		blk := b[(k-first)*bs : min((k+1-first)*bs, int64(len(b)))]
		if sum := sha256.Sum256(blk); !bytes.Equal(sum[:], sums[k*sha256.Size:(k+1)*sha256.Size]) {
			return nil, compactError("block %d of %s does not hash to its header's hash: the index changed while read, or is corrupt", k, name)
		}
	}
	return b[lo-start : hi-start], nil
}

// values reads values [lo, hi) of a column.
func (r *CompactReader) values(name string, c *compactColumn, lo, hi int64) ([]int64, error) {
	out := make([]int64, hi-lo)
	var b []byte
	if c.Width > 0 {
		var err error
		if b, err = r.block(name, c.Section, lo*int64(c.Width), hi*int64(c.Width)); err != nil {
			return nil, err
		}
	}
	for i := range out {
		v := c.Base + c.Step*(lo+int64(i))
		if c.Width > 0 {
			d := getUint(b[i*c.Width:], c.Width)
			if d > uint64(math.MaxInt64-v) { //nolint:gosec // v ≥ 0
				return nil, compactError("column %s: value %d is past the largest integer", name, lo+int64(i))
			}
			v += int64(d) //nolint:gosec // checked above
		}
		out[i] = v
	}
	return out, nil
}

// strings reads strings [lo, hi) of a table.
func (r *CompactReader) strings(name string, s *compactStrings, lo, hi int64) ([]string, error) {
	offs, err := r.values(name+".offsets", &s.Offsets, lo, hi+1)
	if err != nil {
		return nil, err
	}
	if lo == 0 && offs[0] != 0 {
		return nil, compactError("%s's first string does not start at 0", name)
	}
	if hi == s.Count && offs[len(offs)-1] != s.Data.Length {
		return nil, compactError("%s's last string does not end its %d bytes", name, s.Data.Length)
	}
	for i := 1; i < len(offs); i++ {
		if offs[i] < offs[i-1] {
			return nil, compactError("%s's offsets go back at %d", name, lo+int64(i))
		}
	}
	data, err := r.block(name+".data", &s.Data, offs[0], offs[len(offs)-1])
	if err != nil {
		return nil, err
	}
	out := make([]string, hi-lo)
	for i := range out {
		v := data[offs[i]-offs[0] : offs[i+1]-offs[0]]
		if !utf8.Valid(v) {
			return nil, compactError("%s[%d] is not UTF-8", name, lo+int64(i))
		}
		out[i] = string(v)
	}
	return out, nil
}

// Entries reads shards [lo, hi) of the index, fetching only the blocks of
// each column that hold them.
func (r *CompactReader) Entries(lo, hi int64) ([]Entry, error) {
	m := r.meta
	if lo < 0 || hi < lo || hi > m.Shards {
		return nil, fmt.Errorf("shards [%d, %d) of an index of %d", lo, hi, m.Shards)
	}
	out := make([]Entry, hi-lo)
	ids, err := r.values("ints.object", &m.Ints.Object, lo, hi)
	if err != nil {
		return nil, err
	}
	// The objects of the range: a run of ids, usually; read it in one.
	idLo, idHi := int64(math.MaxInt64), int64(-1)
	for _, id := range ids {
		if id >= m.Objects.Count {
			return nil, compactError("shard %d's object %d is not one of its %d", lo, id, m.Objects.Count)
		}
		idLo, idHi = min(idLo, id), max(idHi, id)
	}
	objects, err := r.strings("objects", &m.Objects, idLo, idHi+1)
	if err != nil {
		return nil, err
	}
	for i, id := range ids {
		out[i].Object = objects[id-idLo]
	}
	for _, f := range intFields[1:] {
		vs, err := r.values("ints."+f.name, f.col(&m.Ints), lo, hi)
		if err != nil {
			return nil, err
		}
		for i, v := range vs {
			if f.name == "part" && v > math.MaxInt32 {
				return nil, compactError("shard %d's part %d is too large", lo+int64(i), v)
			}
			f.set(&out[i], v)
		}
	}
	if m.NameTable != nil {
		names, err := r.strings("nameTable", m.NameTable, lo, hi)
		if err != nil {
			return nil, err
		}
		for i := range out {
			out[i].Name = names[i]
		}
	} else {
		for i := range out {
			out[i].Name = ruleName(m.Names, out[i].Object, out[i].Part)
		}
	}
	if m.Hashes != nil {
		width := m.Hashes.Length / m.Shards
		b, err := r.block("hashes", m.Hashes, lo*width, hi*width)
		if err != nil {
			return nil, err
		}
		for i := range out {
			out[i].Hash = m.HashAlgo + ":" + hex.EncodeToString(b[int64(i)*width:int64(i+1)*width])
		}
	} else {
		hashes, err := r.strings("hashTable", m.HashTable, lo, hi)
		if err != nil {
			return nil, err
		}
		for i := range out {
			out[i].Hash = hashes[i]
		}
	}
	if m.Extras != nil {
		extras, err := r.strings("extras", m.Extras, lo, hi)
		if err != nil {
			return nil, err
		}
		for i, s := range extras {
			if s == "" {
				continue
			}
			var x entryExtras
			if err := decodeStrict([]byte(s), &x); err != nil {
				return nil, compactError("shard %d's extras: %v", lo+int64(i), err)
			}
			if x.empty() {
				return nil, compactError("shard %d's extras are empty, not \"\"", lo+int64(i))
			}
			out[i].Deleted, out[i].Partition, out[i].Ranges, out[i].Files = x.Deleted, x.Partition, x.Ranges, x.Files
		}
	}
	return out, nil
}

// ReadAll reads the whole index: every shard, checked as a JSON index is,
// and their content hash against the header's.
func (r *CompactReader) ReadAll() (*File, error) {
	shards, err := r.Entries(0, r.meta.Shards)
	if err != nil {
		return nil, err
	}
	f := *r.File
	f.Shards = shards
	if err := f.check(); err != nil {
		return nil, err
	}
	x := f.StreamIndex()
	if got := x.ContentHash(); got != r.meta.ContentHash {
		return nil, compactError("its shards hash to %s, its header says %s", got, r.meta.ContentHash)
	}
	if got := x.Samples(); got != r.meta.Samples {
		return nil, compactError("its shards hold %d samples, its header says %d", got, r.meta.Samples)
	}
	if b, most := x.Bytes(), maxShardBytes(x); b != r.meta.Bytes || most != r.meta.MaxShardBytes {
		return nil, compactError("its shards are %d bytes, the largest %d, its header says %d and %d", b, most, r.meta.Bytes, r.meta.MaxShardBytes)
	}
	return &f, nil
}

// readCompact parses a whole compact index in memory.
func readCompact(data []byte) (*Layout, error) {
	r, err := NewCompactReader(int64(len(data)), func(off, n int64) ([]byte, error) {
		if off < 0 || n < 0 || off > int64(len(data)) || n > int64(len(data))-off {
			return nil, io.ErrUnexpectedEOF
		}
		return data[off : off+n], nil
	}, int64(len(data)))
	if err != nil {
		return nil, err
	}
	f, err := r.ReadAll()
	if err != nil {
		return nil, err
	}
	return f.Layout(), nil
}

// OpenCompact opens the compact index at key in st for reading in parts:
// its header only, at most maxHeader bytes of it (0: MaxCompactHeader).
func OpenCompact(ctx context.Context, st store.Store, key string, maxHeader int64) (*CompactReader, error) {
	o, err := st.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	where := objectURI(st, key)
	r, err := NewCompactReader(o.Size, func(off, n int64) ([]byte, error) {
		return readRange(ctx, st, key, off, n)
	}, maxHeader)
	if err != nil {
		var tl *TooLargeError
		if errors.As(err, &tl) {
			tl.URI = where + "'s header"
			return nil, tl
		}
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return r, nil
}

// readRange reads bytes [off, off+n) of an object, no more whatever the
// store sends.
func readRange(ctx context.Context, st store.Store, key string, off, n int64) ([]byte, error) {
	rc, err := st.Get(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	b := make([]byte, n)
	if _, err := io.ReadFull(rc, b); err != nil {
		return nil, fmt.Errorf("reading %s [%d, +%d): %w", objectURI(st, key), off, n, err)
	}
	return b, nil
}

package compact

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/strictjson"
	"github.com/shardfeed/shardfeed/planner"
)

// HasMagic says whether data starts as a compact index does.
func HasMagic(data []byte) bool { return bytes.HasPrefix(data, []byte(compactMagic[:7])) }

// Reader reads a compact index in parts: its header at once, and
// then the shards asked for, each section's blocks fetched by ranged reads
// and checked against the header's hashes.
type Reader struct {
	// File is the header's File, with no shards.
	File *indexfile.File
	meta *compactMeta
	at   func(off, n int64) ([]byte, error) // reads n bytes of the sections from off
	size int64                              // of the sections
	// Read counts the bytes read, the header's included.
	Read int64

	mu     sync.Mutex
	sums   map[int64][]byte // each section's block hashes, decoded, by its offset
	blocks map[int64][]byte // checked blocks, by their offset, the last cacheBlocks read
	fifo   []int64
	// inflight are the blocks a reader fetches now, by offset: closed
	// when it is done (claim).
	inflight map[int64]chan struct{}
}

// cacheBlocks bounds the checked blocks a reader keeps: 4 MiB of 4 KiB
// blocks, so that shards read one by one read each block once.
const cacheBlocks = 1024

// BytesRead is the bytes read so far, the header's included.
func (r *Reader) BytesRead() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.Read
}

// Shards is the number of shards the index lists.
func (r *Reader) Shards() int64 { return r.meta.Shards }

// Samples is the number of samples of the index's shards.
func (r *Reader) Samples() int64 { return r.meta.Samples }

// ContentHash is the content hash of the index's shards, as its header
// says (planner.StreamIndex.ContentHash).
func (r *Reader) ContentHash() string { return r.meta.ContentHash }

// Summary is the planner's view of the index as its header says it: its
// counts and content hash, and no shard (planner.StreamIndex.Summary).
func (r *Reader) Summary() planner.StreamIndex {
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

// NewReader reads the prelude and header of a compact index of size
// bytes, reading through readAt (ranged reads of the object), at most
// maxHeader bytes of header (0: MaxHeader).
func NewReader(size int64, readAt func(off, n int64) ([]byte, error), maxHeader int64) (*Reader, error) {
	if maxHeader <= 0 {
		maxHeader = MaxHeader
	}
	if size < compactPrelude {
		return nil, compactError("%d bytes is shorter than its %d-byte prelude", size, compactPrelude)
	}
	head, err := readAt(0, min(size, compactPrelude+min(maxHeader, 32<<10)))
	if err != nil {
		return nil, err
	}
	if string(head[:8]) != compactMagic {
		if HasMagic(head) {
			return nil, fmt.Errorf("compact shardfeed index version %d is not supported: this shardfeed reads version %d; re-run shardfeed index", head[7], compactMagic[7])
		}
		return nil, compactError("it does not start with %q", compactMagic)
	}
	hlen := int64(binary.LittleEndian.Uint32(head[8:]))
	if binary.LittleEndian.Uint32(head[12:]) != 0 {
		return nil, compactError("bytes 12-15 are not zero")
	}
	if hlen > maxHeader {
		return nil, &indexfile.TooLargeError{URI: "the compact index's header", Limit: maxHeader}
	}
	if compactPrelude+hlen > size {
		return nil, compactError("its header of %d bytes runs past its end (%d bytes)", hlen, size)
	}
	r := &Reader{size: size - compactPrelude - hlen, Read: int64(len(head))}
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
	if err := strictjson.Decode(header, &h); err != nil {
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
	// The first read's bytes past the header are the sections' first
	// bytes: read once (a small index's sections all).
	var pre []byte
	if int64(len(head)) > base {
		pre = head[base:]
	}
	r.at = func(off, n int64) ([]byte, error) {
		if off >= 0 && n >= 0 && off+n <= int64(len(pre)) {
			return pre[off : off+n], nil
		}
		b, err := readAt(base+off, n)
		if err == nil && int64(len(b)) != n {
			err = compactError("a read of %d bytes at %d gave %d", n, base+off, len(b))
		}
		r.mu.Lock()
		r.Read += int64(len(b))
		r.mu.Unlock()
		return b, err
	}
	return r, nil
}

// checkMeta checks the header's counts and sections against each other and
// the index's size, before a byte of them is read.
func (r *Reader) checkMeta() error {
	m := r.meta
	if err := r.File.CheckHead(); err != nil {
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
	if err := r.checkColumn("sampleCounts", &m.SampleCounts, m.Shards); err != nil {
		return err
	}
	if err := r.checkRecords(); err != nil {
		return err
	}
	if (m.Records.HashAlgo == "") == (m.HashTable == nil) {
		return compactError("it needs exactly one of records.hashAlgo and hashTable")
	}
	if m.HashTable != nil {
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

// checkRecords checks the records' fields and their section's length.
func (r *Reader) checkRecords() error {
	c := &r.meta.Records
	for _, f := range intFields {
		fc := f.col(&c.Fields)
		if fc.Section != nil {
			return compactError("records.fields.%s has a section of its own", f.name)
		}
		if err := r.checkFrame("records.fields."+f.name, fc, r.meta.Shards); err != nil {
			return err
		}
	}
	if c.HashAlgo != "" {
		if _, err := checksum.Parse(c.HashAlgo + ":00"); err != nil {
			return compactError("records.hashAlgo %q is not one of %s", c.HashAlgo, strings.Join(checksum.Algorithms(), ", "))
		}
		if c.HashWidth < 1 || c.HashWidth > 64 {
			return compactError("records.hashWidth %d is not a digest of 1 to 64 bytes", c.HashWidth)
		}
	} else if c.HashWidth != 0 {
		return compactError("records.hashWidth %d without a hashAlgo", c.HashWidth)
	}
	width := c.width()
	switch {
	case width == 0 && c.Section == nil:
		return nil
	case width == 0 || c.Section == nil || c.Section.Length%width != 0 || c.Section.Length/width != r.meta.Shards:
		return compactError("records of %d bytes need a section of %d of them", width, r.meta.Shards)
	}
	return r.checkSection("records", c.Section)
}

func (r *Reader) checkSection(name string, s *compactSection) error {
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

// checkFrame checks a column's frame of reference for n values.
func (r *Reader) checkFrame(name string, c *compactColumn, n int64) error {
	if c.Base < 0 || (c.Step != 0 && c.Step != 1) {
		return compactError("column %s: base %d and step %d: a base is not negative and a step is 0 or 1", name, c.Base, c.Step)
	}
	if c.Step == 1 && c.Base > math.MaxInt64-n {
		return compactError("column %s counts past the largest integer", name)
	}
	switch c.Width {
	case 0, 1, 2, 4, 8:
		return nil
	}
	return compactError("column %s: width %d is not 0, 1, 2, 4 or 8", name, c.Width)
}

func (r *Reader) checkColumn(name string, c *compactColumn, n int64) error {
	if err := r.checkFrame(name, c, n); err != nil {
		return err
	}
	if c.Width == 0 {
		if c.Section != nil {
			return compactError("column %s of width 0 has a section", name)
		}
		return nil
	}
	if c.Section == nil || c.Section.Length/int64(c.Width) != n || c.Section.Length%int64(c.Width) != 0 {
		return compactError("column %s needs %d values of %d bytes", name, n, c.Width)
	}
	return r.checkSection(name, c.Section)
}

func (r *Reader) checkStrings(name string, s *compactStrings, n int64) error {
	if s.Count != n {
		return compactError("%s has %d strings for %d", name, s.Count, n)
	}
	if err := r.checkColumn(name+".offsets", &s.Offsets, n+1); err != nil {
		return err
	}
	return r.checkSection(name+".data", &s.Data)
}

// block reads bytes [lo, hi) of a section, checking every block it reads.
func (r *Reader) block(name string, s *compactSection, lo, hi int64) ([]byte, error) {
	if lo < 0 || hi < lo || hi > s.Length {
		return nil, compactError("a read of %s [%d, %d) past its %d bytes", name, lo, hi, s.Length)
	}
	if lo == hi {
		return nil, nil
	}
	bs := r.meta.BlockSize
	first, last := lo/bs, (hi-1)/bs
	start := first * bs
	if last-first >= cacheBlocks/4 { // a long read: the cache would only churn
		b, err := r.fetch(name, s, first, last, false)
		if err != nil {
			return nil, err
		}
		return b[lo-start : hi-start], nil
	}
	parts := make([][]byte, last-first+1)
	for {
		miss, lastMiss, wait := r.claim(s, first, last, parts)
		if wait != nil { // another reader brings some: take them from the cache
			<-wait
			continue
		}
		if miss < 0 {
			break
		}
		// From the first block not held to the last, in one read.
		b, err := r.fetch(name, s, miss, lastMiss, true)
		r.unclaim(s, miss, lastMiss)
		if err != nil {
			return nil, err
		}
		for k := miss; k <= lastMiss; k++ {
			parts[k-first] = b[(k-miss)*bs : min((k+1-miss)*bs, int64(len(b)))]
		}
		break
	}
	if len(parts) == 1 {
		return parts[0][lo-start : hi-start], nil
	}
	b := make([]byte, 0, (last-first+1)*bs)
	for _, p := range parts {
		b = append(b, p...)
	}
	return b[lo-start : hi-start], nil
}

// fetch reads blocks [first, last] of a section and checks each against
// its hash, keeping them in the cache where asked.
func (r *Reader) fetch(name string, s *compactSection, first, last int64, keep bool) ([]byte, error) {
	bs := r.meta.BlockSize
	start := first * bs
	b, err := r.at(s.Offset+start, min((last+1)*bs, s.Length)-start)
	if err != nil {
		return nil, err
	}
	sums := r.blockSums(s)
	for k := first; k <= last; k++ {
		blk := b[(k-first)*bs : min((k+1-first)*bs, int64(len(b)))]
		if sum := sha256.Sum256(blk); !bytes.Equal(sum[:], sums[k*sha256.Size:(k+1)*sha256.Size]) {
			return nil, compactError("block %d of %s does not hash to its header's hash: the index changed while read, or is corrupt", k, name)
		}
		if keep {
			r.keep(s.Offset+k*bs, blk)
		}
	}
	return b, nil
}

// blockSums are a section's block hashes, decoded once.
func (r *Reader) blockSums(s *compactSection) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sums == nil {
		r.sums = map[int64][]byte{}
	}
	sums, ok := r.sums[s.Offset]
	if !ok {
		sums, _ = base64.StdEncoding.DecodeString(s.Blocks) // checked by checkSection
		r.sums[s.Offset] = sums
	}
	return sums
}

// claim sets parts to the blocks [first, last] of s the cache holds, and
// claims those from the first it lacks to the last for the caller to
// fetch (miss < 0: none lacking); or, where another reader fetches one of
// them now, claims none and returns what closes when it is done, so that
// readers at once read each block once.
func (r *Reader) claim(s *compactSection, first, last int64, parts [][]byte) (miss, lastMiss int64, wait <-chan struct{}) {
	bs := r.meta.BlockSize
	r.mu.Lock()
	defer r.mu.Unlock()
	miss, lastMiss = -1, -1
	for k := first; k <= last; k++ {
		if parts[k-first] = r.blocks[s.Offset+k*bs]; parts[k-first] == nil {
			if miss < 0 {
				miss = k
			}
			lastMiss = k
		}
	}
	if miss < 0 {
		return -1, -1, nil
	}
	for k := miss; k <= lastMiss; k++ {
		if ch, ok := r.inflight[s.Offset+k*bs]; ok {
			return -1, -1, ch
		}
	}
	if r.inflight == nil {
		r.inflight = map[int64]chan struct{}{}
	}
	ch := make(chan struct{})
	for k := miss; k <= lastMiss; k++ {
		r.inflight[s.Offset+k*bs] = ch
	}
	return miss, lastMiss, nil
}

// unclaim ends a claim: the readers waiting on its blocks look again.
func (r *Reader) unclaim(s *compactSection, miss, lastMiss int64) {
	bs := r.meta.BlockSize
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := r.inflight[s.Offset+miss*bs]
	for k := miss; k <= lastMiss; k++ {
		delete(r.inflight, s.Offset+k*bs)
	}
	close(ch)
}

// keep caches a checked block, forgetting the oldest past cacheBlocks.
func (r *Reader) keep(off int64, blk []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.blocks == nil {
		r.blocks = map[int64][]byte{}
	}
	if _, ok := r.blocks[off]; ok {
		return
	}
	if len(r.fifo) == cacheBlocks {
		delete(r.blocks, r.fifo[0])
		r.fifo = r.fifo[1:]
	}
	r.blocks[off] = blk
	r.fifo = append(r.fifo, off)
}

// values reads values [lo, hi) of a column.
func (r *Reader) values(name string, c *compactColumn, lo, hi int64) ([]int64, error) {
	var b []byte
	if c.Width > 0 {
		var err error
		if b, err = r.block(name, c.Section, lo*int64(c.Width), hi*int64(c.Width)); err != nil {
			return nil, err
		}
	}
	out := make([]int64, hi-lo)
	for i := range out {
		var ok bool
		if out[i], ok = c.value(lo+int64(i), b[i*c.Width:]); !ok {
			return nil, pastLargest(name, lo+int64(i))
		}
	}
	return out, nil
}

// value is value i of a column, its stored part at the start of b; false
// past the largest integer.
func (c *compactColumn) value(i int64, b []byte) (int64, bool) {
	v := c.Base + c.Step*i
	if c.Width == 0 {
		return v, true
	}
	d := getUint(b, c.Width)
	if d > uint64(math.MaxInt64-v) { //nolint:gosec // v ≥ 0
		return 0, false
	}
	return v + int64(d), true //nolint:gosec // checked above
}

func pastLargest(name string, i int64) error {
	return compactError("column %s: value %d is past the largest integer", name, i)
}

// strings reads strings [lo, hi) of a table.
func (r *Reader) strings(name string, s *compactStrings, lo, hi int64) ([]string, error) {
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
func (r *Reader) Entries(lo, hi int64) ([]indexfile.Entry, error) {
	return r.entries(lo, hi, nil)
}

// entries is Entries with the shards' samples from counts where given
// (Counts), not read again.
func (r *Reader) entries(lo, hi int64, counts func(h int64) int64) ([]indexfile.Entry, error) {
	m := r.meta
	if lo < 0 || hi < lo || hi > m.Shards {
		return nil, fmt.Errorf("shards [%d, %d) of an index of %d", lo, hi, m.Shards)
	}
	out := make([]indexfile.Entry, hi-lo)
	var samples []int64
	if counts == nil {
		var err error
		if samples, err = r.values("sampleCounts", &m.SampleCounts, lo, hi); err != nil {
			return nil, err
		}
	} else {
		samples = make([]int64, hi-lo)
		for i := range samples {
			samples[i] = counts(lo + int64(i))
		}
	}
	ids, err := r.records(out, lo, hi)
	if err != nil {
		return nil, err
	}
	// The objects of the range: a run of ids, usually; read it in one.
	idLo, idHi := int64(math.MaxInt64), int64(-1)
	for i, id := range ids {
		if id >= m.Objects.Count {
			return nil, compactError("shard %d's object %d is not one of its %d", lo+int64(i), id, m.Objects.Count)
		}
		idLo, idHi = min(idLo, id), max(idHi, id)
	}
	objects, err := r.strings("objects", &m.Objects, idLo, idHi+1)
	if err != nil {
		return nil, err
	}
	for i, id := range ids {
		out[i].Object, out[i].Samples = objects[id-idLo], samples[i]
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
	if m.HashTable != nil {
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
			if err := strictjson.Decode([]byte(s), &x); err != nil {
				return nil, compactError("shard %d's extras: %v", lo+int64(i), err)
			}
			if x.empty() {
				return nil, compactError("shard %d's extras are empty, not \"\"", lo+int64(i))
			}
			out[i].Deleted, out[i].Partition, out[i].Ranges, out[i].Files, out[i].Episode = x.Deleted, x.Partition, x.Ranges, x.Files, x.Episode
		}
	}
	return out, nil
}

// records reads records [lo, hi) into out: every field but the object,
// whose ids it returns, and the hash where the records have it.
func (r *Reader) records(out []indexfile.Entry, lo, hi int64) ([]int64, error) {
	c := &r.meta.Records
	width := c.width()
	var b []byte
	if width > 0 {
		var err error
		if b, err = r.block("records", c.Section, lo*width, hi*width); err != nil {
			return nil, err
		}
	}
	ids := make([]int64, hi-lo)
	for i := range out {
		row := b[int64(i)*width:]
		for k, f := range intFields {
			fc := f.col(&c.Fields)
			v, ok := fc.value(lo+int64(i), row)
			if !ok {
				return nil, pastLargest("records.fields."+f.name, lo+int64(i))
			}
			row = row[fc.Width:]
			switch {
			case k == 0:
				ids[i] = v
			case f.name == "part" && v > math.MaxInt32:
				return nil, compactError("shard %d's part %d is too large", lo+int64(i), v)
			default:
				f.set(&out[i], v)
			}
		}
		if c.HashAlgo != "" {
			out[i].Hash = c.HashAlgo + ":" + hex.EncodeToString(row[:c.HashWidth])
		}
	}
	return ids, nil
}

// ReadAll reads the whole index: every shard, checked as a JSON index is,
// and their content hash against the header's.
func (r *Reader) ReadAll() (*indexfile.File, error) {
	shards, err := r.Entries(0, r.meta.Shards)
	if err != nil {
		return nil, err
	}
	f := *r.File
	f.Shards = shards
	if err := f.Check(); err != nil {
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

// Parse parses a whole compact index in memory.
func Parse(data []byte) (*indexfile.File, error) {
	r, err := NewReader(int64(len(data)), func(off, n int64) ([]byte, error) {
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
	return f, nil
}

// Open opens the compact index at key in st for reading in parts:
// its header only, at most maxHeader bytes of it (0: MaxHeader).
func Open(ctx context.Context, st store.Store, key string, maxHeader int64) (*Reader, error) {
	o, err := st.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	where := indexfile.ObjectURI(st, key)
	r, err := NewReader(o.Size, func(off, n int64) ([]byte, error) {
		return readRange(ctx, st, key, off, n)
	}, maxHeader)
	if err != nil {
		var tl *indexfile.TooLargeError
		if errors.As(err, &tl) {
			tl.URI = where + "'s header"
			return nil, tl
		}
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return r, nil
}

// OpenFile opens a compact index file for reading in parts, its
// header at most maxHeader bytes (0: MaxHeader). Close the file
// when done with the reader.
func OpenFile(path string, maxHeader int64) (*Reader, *os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	r, err := NewReader(fi.Size(), func(off, n int64) ([]byte, error) {
		b := make([]byte, n)
		if _, err := f.ReadAt(b, off); err != nil {
			return nil, fmt.Errorf("reading %s [%d, +%d): %w", path, off, n, err)
		}
		return b, nil
	}, maxHeader)
	if err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, f, nil
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
		return nil, fmt.Errorf("reading %s [%d, +%d): %w", indexfile.ObjectURI(st, key), off, n, err)
	}
	return b, nil
}

package webdataset

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// A read-only walk of one table of an SQLite database file (the format
// sqlite.org/fileformat2.html specifies): what reusing Megatron-Energon's
// index (.nv-meta/index.sqlite) needs, its sample_parts' names, without a
// database engine. Pages are read through a function (ranged reads), each
// page at most once per walk, the walk bounded in pages and depth.

var errSQLite = errors.New("not a readable SQLite database")

// maxSQLiteDepth bounds a b-tree's depth.
const maxSQLiteDepth = 32

type sqliteFile struct {
	read     func(off, n int64) ([]byte, error)
	pageSize int64
	usable   int64
	pages    int64
}

// openSQLite checks a database's header: the magic, a page size, UTF-8.
func openSQLite(size int64, read func(off, n int64) ([]byte, error)) (*sqliteFile, error) {
	h, err := read(0, 100)
	if err != nil {
		return nil, err
	}
	if string(h[:16]) != "SQLite format 3\x00" {
		return nil, fmt.Errorf("%w: no SQLite header", errSQLite)
	}
	ps := int64(binary.BigEndian.Uint16(h[16:]))
	if ps == 1 {
		ps = 65536
	}
	if ps < 512 || ps > 65536 || ps&(ps-1) != 0 {
		return nil, fmt.Errorf("%w: a page size of %d", errSQLite, ps)
	}
	reserved := int64(h[20])
	if enc := binary.BigEndian.Uint32(h[56:]); enc != 1 && enc != 0 {
		return nil, fmt.Errorf("%w: text encoding %d, not UTF-8", errSQLite, enc)
	}
	f := &sqliteFile{read: read, pageSize: ps, usable: ps - reserved, pages: size / ps}
	if f.usable < 480 || size%ps != 0 {
		return nil, fmt.Errorf("%w: %d bytes of %d-byte pages", errSQLite, size, ps)
	}
	return f, nil
}

func (f *sqliteFile) page(n int64) ([]byte, error) {
	if n < 1 || n > f.pages {
		return nil, fmt.Errorf("%w: page %d of %d", errSQLite, n, f.pages)
	}
	return f.read((n-1)*f.pageSize, f.pageSize)
}

// pageSet is the pages a walk has visited, a bit a page: a database of
// tens of GB is millions of pages.
type pageSet []uint64

func newPageSet(pages int64) pageSet { return make(pageSet, pages/64+1) }

// add marks page n (1-based, within the file) and says whether it was
// new.
func (s pageSet) add(n int64) bool {
	if n < 1 || n/64 >= int64(len(s)) {
		return true // past the file: page() refuses it
	}
	w, b := n/64, uint64(1)<<(n%64)
	if s[w]&b != 0 {
		return false
	}
	s[w] |= b
	return true
}

// varint reads an SQLite varint (1–9 bytes, big-endian groups of 7 bits).
func varint(b []byte) (int64, int, error) {
	var v uint64
	for i := range 9 {
		if i >= len(b) {
			return 0, 0, fmt.Errorf("%w: a varint cut short", errSQLite)
		}
		if i == 8 {
			return int64(v<<8 | uint64(b[i])), 9, nil //nolint:gosec // the stored bits
		}
		v = v<<7 | uint64(b[i]&0x7f)
		if b[i] < 0x80 {
			return int64(v), i + 1, nil //nolint:gosec // 63 bits at most
		}
	}
	return 0, 0, errSQLite
}

// scanTable calls fn with every record of the table b-tree rooted at root,
// in rowid order. A cycle, a page of another kind, or a walk past the
// file's pages is an error.
func (f *sqliteFile) scanTable(root int64, fn func(rec []any) error) error {
	seen := newPageSet(f.pages)
	var walk func(n int64, depth int) error
	walk = func(n int64, depth int) error {
		if depth > maxSQLiteDepth || !seen.add(n) {
			return fmt.Errorf("%w: the b-tree revisits page %d or nests past %d", errSQLite, n, maxSQLiteDepth)
		}
		p, err := f.page(n)
		if err != nil {
			return err
		}
		hdr := 0
		if n == 1 {
			hdr = 100
		}
		if hdr+8 > len(p) {
			return errSQLite
		}
		kind := p[hdr]
		cells := int(binary.BigEndian.Uint16(p[hdr+3:]))
		ptrs := hdr + 8
		if kind == 0x05 {
			ptrs = hdr + 12
		}
		if ptrs+2*cells > len(p) {
			return fmt.Errorf("%w: page %d lists %d cells past its end", errSQLite, n, cells)
		}
		for c := range cells {
			at := int(binary.BigEndian.Uint16(p[ptrs+2*c:]))
			if at < ptrs || at >= int(f.usable) {
				return fmt.Errorf("%w: page %d's cell %d at %d", errSQLite, n, c, at)
			}
			switch kind {
			case 0x05: // interior: the left child, then the rowid
				if at+4 > len(p) {
					return errSQLite
				}
				if err := walk(int64(binary.BigEndian.Uint32(p[at:])), depth+1); err != nil {
					return err
				}
			case 0x0d: // leaf: the payload's length, the rowid, the payload
				rec, err := f.leafRecord(p[:f.usable], at, seen)
				if err != nil {
					return fmt.Errorf("page %d cell %d: %w", n, c, err)
				}
				if err := fn(rec); err != nil {
					return err
				}
			default:
				return fmt.Errorf("%w: page %d is of kind %#x in a table b-tree", errSQLite, n, kind)
			}
		}
		if kind == 0x05 {
			return walk(int64(binary.BigEndian.Uint32(p[hdr+8:])), depth+1)
		}
		return nil
	}
	return walk(root, 0)
}

// leafRecord reads the record of a table leaf cell at at, following its
// overflow pages.
func (f *sqliteFile) leafRecord(p []byte, at int, seen pageSet) ([]any, error) {
	size, k, err := varint(p[at:])
	if err != nil {
		return nil, err
	}
	_, r, err := varint(p[at+k:])
	if err != nil {
		return nil, err
	}
	at += k + r
	u := f.usable
	if size < 0 || size > 1<<30 {
		return nil, fmt.Errorf("%w: a payload of %d bytes", errSQLite, size)
	}
	local := size
	if x := u - 35; size > x {
		m := (u-12)*32/255 - 23
		local = m + (size-m)%(u-4)
		if local > x {
			local = m
		}
	}
	if int64(at)+local > int64(len(p)) {
		return nil, fmt.Errorf("%w: a payload past its page", errSQLite)
	}
	payload := append([]byte(nil), p[at:int64(at)+local]...)
	if local < size {
		if int64(at)+local+4 > int64(len(p)) {
			return nil, errSQLite
		}
		next := int64(binary.BigEndian.Uint32(p[int64(at)+local:]))
		for int64(len(payload)) < size {
			if next == 0 || !seen.add(next) {
				return nil, fmt.Errorf("%w: an overflow chain ends early or loops", errSQLite)
			}
			op, err := f.page(next)
			if err != nil {
				return nil, err
			}
			take := min(size-int64(len(payload)), u-4)
			payload = append(payload, op[4:4+take]...)
			next = int64(binary.BigEndian.Uint32(op))
		}
	}
	return record(payload)
}

// record decodes a record: its header of serial types, then the values.
func record(b []byte) ([]any, error) {
	h, k, err := varint(b)
	if err != nil || h < int64(k) || h > int64(len(b)) {
		return nil, fmt.Errorf("%w: a record header of %d bytes", errSQLite, h)
	}
	var types []int64
	for at := k; at < int(h); {
		t, n, err := varint(b[at:h])
		if err != nil {
			return nil, err
		}
		types = append(types, t)
		at += n
	}
	body := b[h:]
	out := make([]any, 0, len(types))
	for _, t := range types {
		var n int
		var v any
		switch {
		case t == 0:
		case t >= 1 && t <= 6:
			n = [...]int{0, 1, 2, 3, 4, 6, 8}[t]
			if n > len(body) {
				return nil, errSQLite
			}
			var x int64
			for _, c := range body[:n] {
				x = x<<8 | int64(c)
			}
			shift := 64 - 8*n
			v = x << shift >> shift // sign-extended
		case t == 7:
			n = 8
			if n > len(body) {
				return nil, errSQLite
			}
			v = math.Float64frombits(binary.BigEndian.Uint64(body))
		case t == 8:
			v = int64(0)
		case t == 9:
			v = int64(1)
		case t >= 12:
			n = int((t - 12) / 2)
			if n > len(body) {
				return nil, fmt.Errorf("%w: a value of %d bytes past its record", errSQLite, n)
			}
			if t%2 == 0 {
				v = append([]byte(nil), body[:n]...)
			} else {
				v = string(body[:n])
			}
		default:
			return nil, fmt.Errorf("%w: serial type %d", errSQLite, t)
		}
		body = body[n:]
		out = append(out, v)
	}
	return out, nil
}

// tableRoot finds a table's root page in the schema table (page 1).
func (f *sqliteFile) tableRoot(name string) (int64, error) {
	var root int64
	err := f.scanTable(1, func(rec []any) error {
		if len(rec) >= 4 && rec[0] == "table" && rec[1] == name {
			if r, ok := rec[3].(int64); ok {
				root = r
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if root == 0 {
		return 0, fmt.Errorf("%w: no table %q", errSQLite, name)
	}
	return root, nil
}

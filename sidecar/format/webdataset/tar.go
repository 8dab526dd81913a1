package webdataset

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// block is a tar's unit: headers are one, and data is padded to a whole
// number of them.
const block = 512

// Bounds on what a header may make a reader hold: a PAX record set or a
// GNU long name larger than this is refused, and so is a member larger
// than maxMemberSize.
const (
	maxExtendedHeader = 1 << 20
	maxMemberSize     = 1 << 40
)

// errCorrupt marks a tar that does not parse.
var errCorrupt = errors.New("corrupt tar")

// member is one entry of a tar: its name, where its headers start (a PAX
// or GNU long-name header before its own included), and its data.
type member struct {
	Name    string
	Start   int64
	Data    int64
	Size    int64
	Regular bool
}

// End is where the member's padded data ends: the next header.
func (m member) End() int64 { return m.Data + padded(m.Size) }

func padded(n int64) int64 { return (n + block - 1) / block * block }

// blocks gives a tar's bytes: exactly n bytes at off, or an error.
type blocks interface {
	at(off int64, n int) ([]byte, error)
}

// bytesBlocks are a tar's bytes in memory (a shard's range, from its start).
type bytesBlocks []byte

func (b bytesBlocks) at(off int64, n int) ([]byte, error) {
	if off < 0 || off+int64(n) > int64(len(b)) {
		return nil, fmt.Errorf("%w: %d bytes at %d run past its %d", errCorrupt, n, off, len(b))
	}
	return b[off : off+int64(n)], nil
}

// nextMember reads the member whose headers start at off, in a tar whose
// bytes end at end. done: off is the end of the bytes or of the archive
// (a zero block).
func nextMember(src blocks, off, end int64) (m member, done bool, err error) {
	m.Start = off
	var longName, paxPath string
	paxSize := int64(-1)
	for {
		if off == end {
			if off != m.Start {
				return member{}, false, fmt.Errorf("%w: headers at byte %d name no member before the end", errCorrupt, m.Start)
			}
			return member{}, true, nil
		}
		if off+block > end {
			return member{}, false, fmt.Errorf("%w: a header at byte %d is cut short by the end at %d", errCorrupt, off, end)
		}
		h, err := src.at(off, block)
		if err != nil {
			return member{}, false, err
		}
		if isZero(h) {
			if off != m.Start {
				return member{}, false, fmt.Errorf("%w: headers at byte %d end in the archive's end", errCorrupt, m.Start)
			}
			return member{}, true, nil
		}
		if err := checkSum(h); err != nil {
			return member{}, false, fmt.Errorf("%w: the header at byte %d (%q): %w", errCorrupt, off, cString(h[:100]), err)
		}
		size, err := number(h[124:136])
		if err != nil || size < 0 || size > maxMemberSize {
			return member{}, false, fmt.Errorf("%w: the header at byte %d (%q) has a size %q that is not a number of bytes", errCorrupt, off, cString(h[:100]), cString(h[124:136]))
		}
		typ := h[156]
		data := off + block
		switch typ {
		case 'x', 'g', 'L', 'K':
			if size > maxExtendedHeader {
				return member{}, false, fmt.Errorf("%w: an extended header at byte %d of %d bytes, above the bound of %d", errCorrupt, off, size, maxExtendedHeader)
			}
			if data+padded(size) > end {
				return member{}, false, fmt.Errorf("%w: the extended header at byte %d holds %d bytes, past the end at %d", errCorrupt, off, size, end)
			}
			body, err := src.at(data, int(size))
			if err != nil {
				return member{}, false, err
			}
			switch typ {
			case 'x':
				if paxPath, paxSize, err = parsePAX(body); err != nil {
					return member{}, false, fmt.Errorf("%w: the PAX header at byte %d: %w", errCorrupt, off, err)
				}
			case 'L':
				longName = cString(body)
			}
			off = data + padded(size)
			continue
		}
		m.Name = headerName(h)
		if longName != "" {
			m.Name = longName
		}
		if paxPath != "" {
			m.Name = paxPath
		}
		if paxSize >= 0 {
			size = paxSize
		}
		m.Data, m.Size = data, size
		m.Regular = typ == '0' || typ == '7' || (typ == 0 && !strings.HasSuffix(m.Name, "/"))
		if typ == 'S' {
			return member{}, false, fmt.Errorf("%w: %q is a GNU sparse file, which a tar reader cannot read as a range: rewrite the tar without --sparse", errCorrupt, m.Name)
		}
		if m.Data+m.Size > end {
			return member{}, false, fmt.Errorf("%w: %q at byte %d holds %d bytes, past the end of the tar at %d", errCorrupt, m.Name, m.Start, m.Size, end)
		}
		if m.End() > end { // the last member's padding may be cut by a range or a truncated archive
			return member{}, false, fmt.Errorf("%w: %q at byte %d: its padding runs past the end of the tar at %d", errCorrupt, m.Name, m.Start, end)
		}
		return m, false, nil
	}
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// checkSum checks a header's checksum: the sum of its bytes with the
// checksum field taken as spaces, unsigned or (as old tars wrote it)
// signed.
func checkSum(h []byte) error {
	want, err := number(h[148:156])
	if err != nil {
		return fmt.Errorf("its checksum %q is not a number", cString(h[148:156]))
	}
	var unsigned, signed int64
	for i, c := range h {
		if i >= 148 && i < 156 {
			c = ' '
		}
		unsigned += int64(c)
		signed += int64(int8(c)) //nolint:gosec // the signed sum of old tars
	}
	if want != unsigned && want != signed {
		return fmt.Errorf("bad checksum (%d, the header sums to %d)", want, unsigned)
	}
	return nil
}

// number parses a header's numeric field: octal, or base-256 (GNU) when
// its first byte's high bit is set.
func number(b []byte) (int64, error) {
	if len(b) > 0 && b[0]&0x80 != 0 {
		if b[0]&0x40 != 0 {
			return 0, errors.New("a negative base-256 number")
		}
		var v int64
		for i, c := range b {
			if i == 0 {
				c &= 0x3f
			}
			if v > (1<<55)-1 {
				return 0, errors.New("a base-256 number out of range")
			}
			v = v<<8 | int64(c)
		}
		return v, nil
	}
	s := strings.Trim(string(b), " \x00")
	if s == "" {
		return 0, nil
	}
	return strconv.ParseInt(s, 8, 64)
}

// headerName is a ustar header's name: its prefix and name fields (GNU
// headers have no prefix field).
func headerName(h []byte) string {
	name := cString(h[:100])
	if bytes.Equal(h[257:263], []byte("ustar\x00")) {
		if prefix := cString(h[345:500]); prefix != "" {
			name = prefix + "/" + name
		}
	}
	return name
}

func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// parsePAX reads PAX records ("LEN key=value\n"), keeping the path and the
// size.
func parsePAX(b []byte) (path string, size int64, err error) {
	size = -1
	for len(b) > 0 {
		sp := bytes.IndexByte(b, ' ')
		if sp <= 0 {
			return "", 0, errors.New("a record without its length")
		}
		n, err := strconv.Atoi(string(b[:sp]))
		if err != nil || n <= sp+1 || n > len(b) || b[n-1] != '\n' {
			return "", 0, fmt.Errorf("a record of length %q that does not fit", b[:sp])
		}
		kv := b[sp+1 : n-1]
		k, v, ok := bytes.Cut(kv, []byte("="))
		if !ok {
			return "", 0, fmt.Errorf("a record %q without '='", kv)
		}
		switch string(k) {
		case "path":
			path = string(v)
		case "size":
			if size, err = strconv.ParseInt(string(v), 10, 64); err != nil || size < 0 || size > maxMemberSize {
				return "", 0, fmt.Errorf("a size %q that is not a number of bytes", v)
			}
		}
		b = b[n:]
	}
	return path, size, nil
}

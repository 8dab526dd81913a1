package lancefile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/shardfeed/shardfeed/internal/protowalk"
)

// ErrCorrupt is the error of bytes that are not a valid Lance file.
var ErrCorrupt = errors.New("corrupt Lance file")

// ErrUnsupported is the error of a valid Lance file that this reader does
// not read (its message says what was found and how to rewrite it).
var ErrUnsupported = errors.New("unsupported Lance file")

const (
	footerSize = 40
	magic      = "LANC"
	// MaxTailBytes bounds a file's tail (its column metadata and schema).
	MaxTailBytes = 64 << 20
	// MaxPageBytes bounds what one page's decoding may allocate.
	MaxPageBytes = 1 << 30
	// maxColumns and maxPages bound the tail's tables.
	maxColumns = 1 << 16
	maxPages   = 1 << 22
	// maxRows20 bounds a 2.0 column's rows (a list's items may outnumber
	// the file's rows).
	maxRows20 = 1 << 40
)

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Footer is a Lance file's last 40 bytes.
type Footer struct {
	ColumnMetaStart uint64
	ColumnMetaTable uint64
	GlobalTable     uint64
	GlobalBuffers   uint32
	Columns         uint32
	Major, Minor    uint16
}

// ParseFooter reads a file's footer from its last 40 bytes.
func ParseFooter(b []byte) (Footer, error) {
	if len(b) < footerSize {
		return Footer{}, corrupt("a file of %d bytes has no 40-byte footer", len(b))
	}
	b = b[len(b)-footerSize:]
	if string(b[36:]) != magic {
		return Footer{}, corrupt("the file does not end in %q", magic)
	}
	le := binary.LittleEndian
	return Footer{
		ColumnMetaStart: le.Uint64(b[0:]), ColumnMetaTable: le.Uint64(b[8:]), GlobalTable: le.Uint64(b[16:]),
		GlobalBuffers: le.Uint32(b[24:]), Columns: le.Uint32(b[28:]), Major: le.Uint16(b[32:]), Minor: le.Uint16(b[34:]),
	}, nil
}

// Version is the file version as Lance names it ("2.1").
func (f Footer) Version() string {
	if f.Major == 0 && f.Minor == 3 {
		return "2.0" // 2.0 files say (0, 3) in their footer
	}
	if f.Major == 0 {
		return fmt.Sprintf("legacy 0.%d", f.Minor)
	}
	return fmt.Sprintf("%d.%d", f.Major, f.Minor)
}

// CheckVersion refuses what this reader does not decode, saying how to
// rewrite the table so that it can.
func (f Footer) CheckVersion() error {
	if (f.Major == 2 && (f.Minor == 1 || f.Minor == 2)) || (f.Major == 0 && f.Minor == 3) {
		return nil
	}
	why := "shardfeed reads Lance file versions 2.0, 2.1 and 2.2"
	switch {
	case f.Major == 0:
		why += " (legacy files predate the 2.x format)"
	case f.Major == 2 && f.Minor >= 3:
		why += " (Lance marks 2.3 and later unstable: they may change)"
	}
	return fmt.Errorf("%w: file version %s: %s; rewrite the table with lance.write_dataset(lance.dataset(URI).to_batches(), NEW_URI, data_storage_version=\"2.2\")",
		ErrUnsupported, f.Version(), why)
}

// TailStart is where a file of size bytes begins its tail: its global
// buffers (the schema), column metadata and the tables after them. end
// holds the file's last bytes (at least the footer and the global buffer
// table, which a 64 KiB read of the end holds in practice); ok is false
// when it does not hold those, and start is then how much more to read.
func TailStart(end []byte, size int64) (start int64, err error) {
	f, err := ParseFooter(end)
	if err != nil {
		return 0, err
	}
	from := size - int64(len(end))
	lo := min(f.ColumnMetaStart, f.ColumnMetaTable, f.GlobalTable)
	if size < footerSize || lo > uint64(size-footerSize) || f.GlobalBuffers > maxColumns {
		return 0, corrupt("the footer's offsets (%d) lie past the file's %d bytes", lo, size)
	}
	if f.GlobalTable > uint64(size) || uint64(f.GlobalBuffers)*16 > uint64(size)-f.GlobalTable {
		return 0, corrupt("the global buffer table lies past the file's end")
	}
	tableEnd := f.GlobalTable + uint64(f.GlobalBuffers)*16
	if f.GlobalTable < uint64(from) {
		return int64(f.GlobalTable), nil // read from the table, then ask again
	}
	table := end[f.GlobalTable-uint64(from) : tableEnd-uint64(from)]
	for i := 0; i+16 <= len(table); i += 16 {
		lo = min(lo, binary.LittleEndian.Uint64(table[i:]))
	}
	if lo > uint64(size-footerSize) {
		return 0, corrupt("a global buffer lies past the file's %d bytes", size)
	}
	return int64(lo), nil
}

// Tail is what a file's tail says: its rows and its columns' pages.
type Tail struct {
	Footer Footer
	// Rows in the file (its FileDescriptor's length).
	Rows uint64
	// Start is where the tail begins in the file, and Size its bytes.
	Start, Size int64
	// GlobalStart is where the first global buffer begins (the schema).
	Columns []Column
}

// Column is one column of a file: its pages, in row order.
type Column struct {
	Pages []Page
	// Err says why this reader does not decode the column (nil: it does).
	Err error
}

// Page is one page of a column.
type Page struct {
	// Offsets and Sizes of the page's buffers in the file.
	Offsets, Sizes []uint64
	// Rows in the page, and the file row it begins at.
	Rows, FirstRow uint64
	// Layout is a 2.1/2.2 page's structure, Enc20 a 2.0 page's encoding.
	Layout *Layout
	Enc20  *Encoding20
}

// ParseTail reads a file's tail: tail holds the file's bytes from start to
// its end (size bytes in all).
func ParseTail(tail []byte, start, size int64) (*Tail, error) {
	if int64(len(tail)) != size-start || len(tail) < footerSize {
		return nil, corrupt("the tail is %d bytes, not the file's last %d", len(tail), size-start)
	}
	ft, err := ParseFooter(tail)
	if err != nil {
		return nil, err
	}
	if err := ft.CheckVersion(); err != nil {
		return nil, err
	}
	if ft.Columns > maxColumns {
		return nil, corrupt("%d columns", ft.Columns)
	}
	t := &Tail{Footer: ft, Start: start, Size: size - start}
	at := func(off, n uint64, what string) ([]byte, error) {
		if off < uint64(start) || n > uint64(len(tail)) || off-uint64(start) > uint64(len(tail))-n {
			return nil, corrupt("%s at [%d, %d) lies outside the tail [%d, %d)", what, off, off+n, start, size)
		}
		o := off - uint64(start)
		return tail[o : o+n], nil
	}
	globals, err := at(ft.GlobalTable, uint64(ft.GlobalBuffers)*16, "the global buffer table")
	if err != nil {
		return nil, err
	}
	if ft.GlobalBuffers == 0 {
		return nil, corrupt("no global buffers: a 2.x file's first holds its schema")
	}
	le := binary.LittleEndian
	desc, err := at(le.Uint64(globals), le.Uint64(globals[8:]), "the file descriptor")
	if err != nil {
		return nil, err
	}
	if t.Rows, err = fileRows(desc); err != nil {
		return nil, err
	}
	table, err := at(ft.ColumnMetaTable, uint64(ft.Columns)*16, "the column metadata table")
	if err != nil {
		return nil, err
	}
	pages := 0
	t.Columns = make([]Column, ft.Columns)
	for c := range t.Columns {
		meta, err := at(le.Uint64(table[16*c:]), le.Uint64(table[16*c+8:]), fmt.Sprintf("column %d's metadata", c))
		if err != nil {
			return nil, err
		}
		if t.Columns[c], err = parseColumn(meta, size, ft.Major == 0); err != nil {
			if !errors.Is(err, ErrUnsupported) {
				return nil, fmt.Errorf("column %d: %w", c, err)
			}
			// Refused when read: a projection may leave the column out.
			t.Columns[c] = Column{Err: fmt.Errorf("column %d: %w", c, err)}
			continue
		}
		if pages += len(t.Columns[c].Pages); pages > maxPages {
			return nil, corrupt("more than %d pages", maxPages)
		}
		var rows uint64
		for p := range t.Columns[c].Pages {
			t.Columns[c].Pages[p].FirstRow = rows
			if t.Columns[c].Pages[p].Rows > maxRows20-rows {
				return nil, corrupt("column %d's pages hold more than %d rows", c, uint64(maxRows20))
			}
			rows += t.Columns[c].Pages[p].Rows
		}
		if rows != t.Rows && ft.Major != 0 { // a 2.0 list's items column holds its items
			return nil, corrupt("column %d's pages hold %d rows, the file %d", c, rows, t.Rows)
		}
	}
	return t, nil
}

// fileRows reads the row count of a FileDescriptor.
func fileRows(desc []byte) (uint64, error) {
	var rows uint64
	err := protowalk.Fields(desc, func(num protowire.Number, _ protowire.Type, v uint64, _ []byte) error {
		if num == 2 {
			rows = v
		}
		return nil
	})
	if err != nil {
		return 0, corrupt("file descriptor: %v", err)
	}
	return rows, nil
}

// parseColumn reads a ColumnMetadata message.
func parseColumn(meta []byte, size int64, v20 bool) (Column, error) {
	var c Column
	err := protowalk.Fields(meta, func(num protowire.Number, typ protowire.Type, _ uint64, b []byte) error {
		if num != 2 {
			return nil
		}
		if typ != protowire.BytesType {
			return corrupt("a page is not a message")
		}
		p, err := parsePage(b, size, v20)
		if err != nil {
			return err
		}
		c.Pages = append(c.Pages, p)
		return nil
	})
	if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
		err = corrupt("column metadata: %v", err)
	}
	return c, err
}

// parsePage reads a ColumnMetadata.Page message.
func parsePage(msg []byte, size int64, v20 bool) (Page, error) {
	var (
		p   Page
		enc []byte
	)
	err := protowalk.Fields(msg, func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error {
		var err error
		switch num {
		case 1:
			p.Offsets, err = protowalk.Uints(p.Offsets, typ, v, b)
		case 2:
			p.Sizes, err = protowalk.Uints(p.Sizes, typ, v, b)
		case 3:
			p.Rows = v
		case 4:
			enc = b
		}
		return err
	})
	if err != nil {
		return p, corrupt("page: %v", err)
	}
	if len(p.Offsets) != len(p.Sizes) {
		return p, corrupt("a page has %d buffer offsets and %d sizes", len(p.Offsets), len(p.Sizes))
	}
	for i, off := range p.Offsets {
		if off > uint64(size) || p.Sizes[i] > uint64(size)-off {
			return p, corrupt("page buffer %d at [%d, +%d) lies past the file's %d bytes", i, off, p.Sizes[i], size)
		}
	}
	url, any, err := directEncoding(enc)
	if err != nil {
		return p, err
	}
	switch {
	case v20 && strings.HasSuffix(url, "/lance.encodings.ArrayEncoding"):
		p.Enc20, err = parseEncoding20(any, 0)
	case !v20 && strings.HasSuffix(url, "/lance.encodings21.PageLayout"):
		p.Layout, err = parsePageLayout(any)
	default:
		err = fmt.Errorf("%w: a page encoded as %q in a file of version %s", ErrUnsupported, url, map[bool]string{true: "2.0", false: "2.1+"}[v20])
	}
	return p, err
}

// directEncoding returns the bytes of an Encoding's direct encoding: a
// google.protobuf.Any: its type URL and value.
func directEncoding(msg []byte) (string, []byte, error) {
	var direct []byte
	var kind protowire.Number
	err := protowalk.Fields(msg, func(num protowire.Number, _ protowire.Type, _ uint64, b []byte) error {
		kind = num
		if num == 2 {
			direct = b
		}
		return nil
	})
	if err != nil {
		return "", nil, corrupt("page encoding: %v", err)
	}
	switch kind {
	case 1:
		return "", nil, fmt.Errorf("%w: a page's encoding is deferred to a buffer, which Lance's own reader does not read", ErrUnsupported)
	case 2:
	default:
		return "", nil, corrupt("a page has no encoding")
	}
	var anyMsg []byte
	if err := protowalk.Fields(direct, func(num protowire.Number, _ protowire.Type, _ uint64, b []byte) error {
		if num == 1 {
			anyMsg = b
		}
		return nil
	}); err != nil {
		return "", nil, corrupt("page encoding: %v", err)
	}
	var url string
	var value []byte
	if err := protowalk.Fields(anyMsg, func(num protowire.Number, _ protowire.Type, _ uint64, b []byte) error {
		switch num {
		case 1:
			url = string(b)
		case 2:
			value = b
		}
		return nil
	}); err != nil {
		return "", nil, corrupt("page encoding: %v", err)
	}
	return url, value, nil
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

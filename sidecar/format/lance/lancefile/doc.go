// Package lancefile reads Lance data files (the Lance file format, versions
// 2.0, 2.1 and 2.2): the tail that describes a file's columns and pages, the
// structural layouts of its pages (mini-block, full-zip, constant), the
// compressive encodings inside them, and the assembly of decoded levels and
// values into Arrow arrays. It is written from Lance's specification and
// from the bytes pylance writes (docs/formats.md, Lance), and decodes rows
// by ranges: a reader asks for the byte ranges a row range needs, so a shard
// of a table fetches only its rows' bytes.
//
// # Byte layout
//
// All integers are little-endian. A file (2.0, 2.1, 2.2):
//
//	[data pages' buffers][column metadata][global buffers (the schema)]
//	[column metadata offset table][global buffer offset table][footer]
//
//	footer (40 bytes): u64 column metadata start, u64 column metadata
//	offset table, u64 global buffer offset table, u32 global buffers,
//	u32 columns, u16 major, u16 minor, "LANC" (2.0 says 0.3)
//	offset tables: a (u64 offset, u64 size) pair per entry
//
// Each column's metadata (a protobuf ColumnMetadata) lists its pages: the
// (offset, size) of each buffer, the rows, and the page's layout, whose
// compressive encodings (encoding.go) form a tree over the buffers:
//
//	mini-block page: buffer 0 the chunk table, one u16 e a chunk (u32 in
//	  2.2's large chunks): 8·(e>>4 + 1) bytes, 2^(e&15) values (the last
//	  chunk: what is left); buffer 1 the chunks; buffer 2 the dictionary;
//	  then the repetition index, (u64 rows ended, u64 items carried over)
//	  a chunk.
//	  chunk: u16 levels, [u16 repetition bytes], [u16 definition bytes],
//	  a u16 (u32) size a value buffer, then each part 8-byte aligned.
//	full-zip page: buffer 0 the values one after another, each behind its
//	  control word (levels) and, when variable, its length; buffer 1 the
//	  repetition index, rows+1 offsets into buffer 0.
//	constant page: the value inline in the layout, or all null.
//
//	Flat: values of Bits bits. Variable: n+1 offsets (u32 or u64) into
//	its own buffer, then the bytes. Rle: run values (Flat) and u8 run
//	lengths. InlineBitpacking: FastLanes blocks of 1024 values, each a
//	T-bit width then the packed lanes (bitpack.go). Fsst: a symbol table
//	and codes (fsst.go). ByteStreamSplit: byte k of every value
//	together. Dictionary: indices into the page's dictionary. General:
//	a zstd or lz4 frame around another encoding.
//
// 2.0 files (decode20.go, read20.go) are a separate encoding tree of
// ArrayEncoding messages: flat, nullable, list, struct, binary,
// dictionary, fixed-size list, each page one array.
//
// The worked examples (worked_test.go) state each from a few bytes.
//
// Hostile bytes are refused with ErrCorrupt, never a panic; every length is
// checked against the bytes there are, and the memory a page may claim is
// bounded (MaxPageBytes).
package lancefile

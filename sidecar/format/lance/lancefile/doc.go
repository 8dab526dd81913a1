// Package lancefile reads Lance data files (the Lance file format, versions
// 2.1 and 2.2): the tail that describes a file's columns and pages, the
// structural layouts of its pages (mini-block, full-zip, constant), the
// compressive encodings inside them, and the assembly of decoded levels and
// values into Arrow arrays. It is written from Lance's specification and
// from the bytes pylance writes (docs/formats.md, Lance), and decodes rows
// by ranges: a reader asks for the byte ranges a row range needs, so a shard
// of a table fetches only its rows' bytes.
//
// Hostile bytes are refused with ErrCorrupt, never a panic; every length is
// checked against the bytes there are, and the memory a page may claim is
// bounded (MaxPageBytes).
package lancefile

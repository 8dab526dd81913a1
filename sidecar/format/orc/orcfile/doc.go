// Package orcfile reads Apache ORC files (https://orc.apache.org/specification/)
// into Arrow record batches, one stripe at a time: the file tail (postscript
// and footer), the compression chunks of each stream (zlib, snappy, zstd,
// lz4), the run-length encodings of integers, bytes and booleans (RLE v1 and
// v2), and the columns of the types training data uses.
//
// Every length, count and offset comes from the file, which may be hostile:
// each is checked against what is left of its buffer before it is used, so
// a corrupt file gives an error, never a panic or an unbounded allocation.
package orcfile

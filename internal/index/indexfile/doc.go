// Package indexfile is the shardfeed index's file: where it sits in a
// stream's store (Key), its schema (File, each shard's Entry, the
// sections each format adds: a table's snapshot, Lance's fragments,
// Megatron's documents, LitData's chunks, a Hugging Face split, hive
// partitions; the column types of coltype.go) and the checks a file must
// pass, with the bounded read of an object that every index form shares.
// It reads no form but its own JSON (Parse): package index recognises the
// forms, and package compact writes and reads the compact one.
package indexfile

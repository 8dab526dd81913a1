// Package compact writes and reads the compact form of a shardfeed index
// (index.sfi, docs/formats.md): the index's header as JSON and its shards
// as columns cut into hashed blocks, about a tenth of the JSON's size. A
// sidecar reads its header and sample counts (Counts) and fetches the
// entries of its own shards by ranged reads; the control plane reads it
// whole (Parse). Package index recognises it among the index's forms.
package compact

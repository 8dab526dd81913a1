// Package sidefile writes and reads the files `shardfeed index` keeps
// beside a stream's index, each keyed by what it was made from (the
// index's content hash and the option that made it), so one made from
// other inputs is refused, never served: a filter's selection (which rows
// of each shard match), sample lengths (packing and bucketing), packs (the
// samples each packed row joins) and buckets (the split of a stream by
// length or aspect ratio). It also keeps earlier indexes a rewrite
// replaced, for jobs still reading them (kept.go). The index itself is
// package index's; the side files read it and add to it, never the other
// way round.
package sidefile

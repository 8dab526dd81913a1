package sidefile

import (
	"errors"
	"fmt"

	"github.com/shardfeed/shardfeed/internal/checksum"
)

// JoinFilters joins the selections of consecutive ranges of a stream's
// shards (each with its runs object, as format.Registry.SelectShards
// writes them) into the selection of every shard and its runs object:
// byte for byte what one run over all of them writes. Each part's shards
// must lie end to end in its object with their hashes; the caller checks
// the whole against the index (FilterIndex.Check).
func JoinFilters(parts []*FilterIndex, objects [][]byte) (*FilterIndex, []byte, error) {
	if len(parts) == 0 || len(parts) != len(objects) {
		return nil, nil, errors.New("no selections to join")
	}
	out := *parts[0]
	out.Shards, out.Pruned = nil, 0
	var joined []byte
	for k, p := range parts {
		if p.Shardfeed != out.Shardfeed || p.Filter != out.Filter || p.Nulls != out.Nulls || p.Index != out.Index {
			return nil, nil, fmt.Errorf("part %d's selection (version %d) is of filter %q with nulls %q over index %s, part 0's (version %d) of %q with nulls %q over %s",
				k, p.Shardfeed, p.Filter, p.Nulls, p.Index, out.Shardfeed, out.Filter, out.Nulls, out.Index)
		}
		base := int64(len(joined))
		spans := make([][2]int64, len(p.Shards))
		for j, s := range p.Shards {
			spans[j] = [2]int64{s.Offset, s.Length}
		}
		if err := endToEnd(spans, objects[k], func(j int) string { return p.Shards[j].Hash }); err != nil {
			return nil, nil, fmt.Errorf("part %d's selection: %w", k, err)
		}
		for _, s := range p.Shards {
			s.Offset += base
			out.Shards = append(out.Shards, s)
		}
		out.Pruned += p.Pruned
		joined = append(joined, objects[k]...)
	}
	return &out, joined, nil
}

// JoinLengths joins the lengths of consecutive ranges of a stream's
// shards as JoinFilters joins selections; the caller checks the whole
// (LengthsIndex.Check).
func JoinLengths(parts []*LengthsIndex, objects [][]byte) (*LengthsIndex, []byte, error) {
	if len(parts) == 0 || len(parts) != len(objects) {
		return nil, nil, errors.New("no lengths to join")
	}
	out := *parts[0]
	out.Shards = nil
	var joined []byte
	for k, p := range parts {
		if p.Shardfeed != out.Shardfeed || p.Column != out.Column || p.Measure != out.Measure || p.Filter != out.Filter ||
			p.Index != out.Index || p.Tokenize != out.Tokenize {
			return nil, nil, fmt.Errorf("part %d's lengths are of column %q (%s, filter %q, tokenize %q, index %s), part 0's of %q (%s, %q, %q, %s)",
				k, p.Column, p.Measure, p.Filter, p.Tokenize, p.Index, out.Column, out.Measure, out.Filter, out.Tokenize, out.Index)
		}
		base := int64(len(joined))
		spans := make([][2]int64, len(p.Shards))
		for j, s := range p.Shards {
			spans[j] = [2]int64{s.Offset, s.Length}
		}
		if err := endToEnd(spans, objects[k], func(j int) string { return p.Shards[j].Hash }); err != nil {
			return nil, nil, fmt.Errorf("part %d's lengths: %w", k, err)
		}
		for _, s := range p.Shards {
			s.Offset += base
			out.Shards = append(out.Shards, s)
		}
		joined = append(joined, objects[k]...)
	}
	return &out, joined, nil
}

// endToEnd checks that spans (offset, length) cover object end to end, in
// order, each with the hash hash(j) says.
func endToEnd(spans [][2]int64, object []byte, hash func(j int) string) error {
	var end int64
	for j, s := range spans {
		if s[0] != end || s[1] < 0 || s[1] > int64(len(object))-end {
			return fmt.Errorf("shard %d's bytes [%d, +%d) do not follow the shard before it (at %d) within the object's %d bytes", j, s[0], s[1], end, len(object))
		}
		sum, _ := checksum.Of("xxh64", object[s[0]:s[0]+s[1]]) // a known algorithm
		if sum.String() != hash(j) {
			return fmt.Errorf("shard %d's bytes hash to %s, its record says %s", j, sum, hash(j))
		}
		end += s[1]
	}
	if end != int64(len(object)) {
		return fmt.Errorf("the object is %d bytes, its shards cover %d", len(object), end)
	}
	return nil
}

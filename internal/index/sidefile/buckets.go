package sidefile

import (
	"fmt"
	"math/big"
	"strings"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
)

// Buckets (spec.bucketing, docs/planner.md, sample lengths): each sample of
// a stream in one bucket by its length, or an image's by its aspect ratio.
// shardfeed index writes each bucket's rows as a selection, as it writes a
// row filter's (FilterIndex and runs), under a name of its own
// (Buckets.Filter): the control plane reads each bucket's counts per
// shard, O(shards), and a sidecar serves a bucket's rows as it serves a
// filter's.

// Buckets cut a column's samples by their lengths at Bounds (elements, or
// an image's pixels), or an image's by its width over height at Ratios.
// Bucket 0 is below the first bound, bucket i at or above bound i-1 and
// below bound i, the last at or above the last bound.
type Buckets struct {
	Column  string
	Measure Measure
	Bounds  []int64
	Ratios  []*big.Rat
}

// MaxBuckets bounds the buckets of a column: each is a selection of its
// own, beside the index.
const MaxBuckets = 64

// Check refuses bounds that do not cut the measure into buckets: none, or
// both kinds, not ascending, not positive, aspect ratios of something
// other than images, or more than MaxBuckets buckets.
func (b Buckets) Check() error {
	switch {
	case len(b.Bounds) > 0 == (len(b.Ratios) > 0):
		return fmt.Errorf("buckets are cut by lengths or by aspect ratios: give one of them")
	case len(b.Ratios) > 0 && b.Measure != ImageSize:
		return fmt.Errorf("aspect ratios cut images: column %q holds %s", b.Column, b.Measure)
	case b.Count() > MaxBuckets:
		return fmt.Errorf("%d buckets, at most %d", b.Count(), MaxBuckets)
	}
	for i, v := range b.Bounds {
		if v <= 0 || i > 0 && v <= b.Bounds[i-1] {
			return fmt.Errorf("length bounds %v: each above 0 and above the one before", b.Bounds)
		}
	}
	for i, r := range b.Ratios {
		if r.Sign() <= 0 || i > 0 && r.Cmp(b.Ratios[i-1]) <= 0 {
			return fmt.Errorf("aspect ratios %s: each above 0 and above the one before", b.bounds())
		}
	}
	return nil
}

// Count is the number of buckets.
func (b Buckets) Count() int { return max(len(b.Bounds), len(b.Ratios)) + 1 }

// Of returns the bucket of a sample of length l.
func (b Buckets) Of(l Length) int {
	if len(b.Ratios) > 0 {
		// width/height at or above ratio r: w·den >= r·num·h, exactly.
		h, w := big.NewInt(int64(l[0])), big.NewInt(int64(l[1]))
		return sortSearch(len(b.Ratios), func(i int) bool {
			r := b.Ratios[i]
			lhs := new(big.Int).Mul(w, r.Denom())
			rhs := new(big.Int).Mul(h, r.Num())
			return lhs.Cmp(rhs) < 0
		})
	}
	n := l.Of(b.Measure)
	return sortSearch(len(b.Bounds), func(i int) bool { return n < b.Bounds[i] })
}

// sortSearch is the first i in [0, n) where f holds (f false then true),
// n if none.
func sortSearch(n int, f func(int) bool) int {
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if f(m) {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

func (b Buckets) bounds() string {
	var parts []string
	for _, v := range b.Bounds {
		parts = append(parts, fmt.Sprint(v))
	}
	for _, r := range b.Ratios {
		parts = append(parts, r.RatString())
	}
	return strings.Join(parts, ",")
}

// Filter is the name of bucket i's selection of the rows filter matches
// (empty: every row): what the selection is written and read under, and
// a plan input. It leaves the measure out, which the column's type fixes,
// so that a spec names its buckets' selections without reading a shard.
func (b Buckets) Filter(i int, filter string) string {
	kind := "length"
	if len(b.Ratios) > 0 {
		kind = "aspect ratio"
	}
	name := fmt.Sprintf("shardfeed.bucket(%s: %s at %s)[%d]", b.Column, kind, b.bounds(), i)
	if filter != "" {
		name += " && (" + filter + ")"
	}
	return name
}

// BucketSelections cuts a stream's samples into buckets by their lengths
// (x, with values its lengths object): per bucket, each shard's rows in it
// as a selection of the shard's rows, over the stream's index of content
// hash contentHash. With a row filter, the lengths are of its matching
// rows, which runs(i) gives for shard i in order; rows are numbered among
// all of the shard's rows.
func BucketSelections(x *LengthsIndex, values []byte, b Buckets, filter string, runs func(i int) ([]indexfile.Run, error)) ([]*FilterIndex, [][]byte, error) {
	if err := b.Check(); err != nil {
		return nil, nil, err
	}
	if b.Measure != x.Measure || b.Column != x.Column || filter != x.Filter {
		return nil, nil, fmt.Errorf("buckets of column %q (%s, filter %q) from the lengths of %q (%s, filter %q)", b.Column, b.Measure, filter, x.Column, x.Measure, x.Filter)
	}
	n := b.Count()
	sels := make([]*FilterIndex, n)
	objects := make([][]byte, n)
	for k := range sels {
		sels[k] = &FilterIndex{Shardfeed: indexfile.Version, Filter: b.Filter(k, filter), Nulls: "three-valued", Index: x.Index}
	}
	for i, s := range x.Shards {
		if s.Offset < 0 || s.Length < 0 || s.Offset > int64(len(values))-s.Length {
			return nil, nil, fmt.Errorf("%w: shard %d's lengths are past the object's %d bytes", errLengths, i, len(values))
		}
		ls, err := x.ShardLengths(i, values[s.Offset:s.Offset+s.Length])
		if err != nil {
			return nil, nil, fmt.Errorf("shard %d: %w", i, err)
		}
		rows := []indexfile.Run{{0, int64(len(ls))}}
		if runs != nil {
			if rows, err = runs(i); err != nil {
				return nil, nil, fmt.Errorf("shard %d: %w", i, err)
			}
		}
		per := make([][]indexfile.Run, n)
		j := 0
		for _, r := range rows {
			for row := r[0]; row < r[1]; row++ {
				if j == len(ls) {
					return nil, nil, fmt.Errorf("shard %d: the filter matches more rows than the %d lengths", i, len(ls))
				}
				k := b.Of(ls[j])
				if last := len(per[k]) - 1; last >= 0 && per[k][last][1] == row {
					per[k][last][1]++
				} else {
					per[k] = append(per[k], indexfile.Run{row, row + 1})
				}
				j++
			}
		}
		if j != len(ls) {
			return nil, nil, fmt.Errorf("shard %d: the filter matches %d rows, the lengths are of %d", i, j, len(ls))
		}
		for k := range sels {
			objects[k] = sels[k].AppendShard(objects[k], per[k])
		}
	}
	return sels, objects, nil
}

// ParseRatios parses aspect ratios written as decimals or fractions
// ("0.75", "4/3").
func ParseRatios(s []string) ([]*big.Rat, error) {
	var out []*big.Rat
	for _, v := range s {
		r, ok := new(big.Rat).SetString(strings.TrimSpace(v))
		if !ok {
			return nil, fmt.Errorf("aspect ratio %q: write a decimal or a fraction of width over height, e.g. 0.75 or 4/3", v)
		}
		out = append(out, r)
	}
	return out, nil
}

package sidefile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/strictjson"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/store"
)

// A row filter's selection (spec.streams[].filter, docs/planner.md): which
// rows of each shard match the filter, computed once by shardfeed index.
// Its index (FilterIndex, bounded: a count and a range per shard) is what
// the control plane reads; the runs of matching rows, one encoded range
// per shard in one object, are what a sidecar fetches with the shard.

// FilterHash is the key of a filter: "sha256:<hex>" of its expression.
func FilterHash(expr string) string {
	sum := sha256.Sum256([]byte(expr))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// FilterIndex lists, per shard of a stream's index, the rows a filter
// matches.
type FilterIndex struct {
	// RunsKey is where ReadFilter found the runs (under indexfile.Dir, or beside
	// the index where a selection was written before indexfile.Dir).
	RunsKey   string `json:"-"`
	Shardfeed int    `json:"shardfeed"`
	// Filter is the CEL expression; FilterHash(Filter) names the files.
	Filter string `json:"filter"`
	// Nulls is the semantics of null the rows were matched with
	// (expr.Nulls); empty in a selection written before it was recorded,
	// where x != 'a' matched a null x.
	Nulls string `json:"nulls,omitempty"`
	// Index is the content hash of the stream index the rows were matched
	// in (planner.StreamIndex.ContentHash): a selection of another index
	// is refused.
	Index  string        `json:"index"`
	Shards []FilterShard `json:"shards"`
	// Pruned counts the shards ruled out, unread, by their statistics.
	Pruned int `json:"pruned,omitempty"`
}

// FilterShard is one shard's selection: how many rows match, and where
// their runs are encoded in the selection object.
type FilterShard struct {
	Matching int64 `json:"matching"`
	Offset   int64 `json:"offset"`
	Length   int64 `json:"length"`
	// Hash is the "xxh64:<hex>" digest of the runs' bytes, checked by the
	// cache that fetches them.
	Hash string `json:"hash"`
}

// FilterObjects are the keys of a filter's selection beside its stream's
// index: the selection's index and its runs.
func FilterObjects(expr string) (indexKey, runsKey string) {
	name := indexfile.Dir + "/filter-" + strings.TrimPrefix(FilterHash(expr), "sha256:")
	return name + ".json", name + ".runs"
}

// legacyFilterObjects are where a selection was written before indexfile.Dir.
func legacyFilterObjects(expr string) (indexKey, runsKey string) {
	indexKey, runsKey = FilterObjects(expr)
	return strings.TrimPrefix(indexKey, indexfile.Dir+"/"), strings.TrimPrefix(runsKey, indexfile.Dir+"/")
}

// Own reports whether key is an object shardfeed index writes beside a
// stream's data, never data itself: its index.json, or a filter's
// selection (".json" is a JSON Lines suffix).
func Own(key string) bool {
	if key == indexfile.FileName || strings.HasPrefix(key, indexfile.Dir+"/") {
		return true
	}
	name, ok := strings.CutPrefix(key, "filter-")
	sum, ext, _ := strings.Cut(name, ".")
	_, err := hex.DecodeString(sum)
	return ok && len(sum) == 2*sha256.Size && err == nil && (ext == "json" || ext == "runs")
}

// AppendShard appends one shard's matching runs to a selection's runs
// object and records them in f.
func (f *FilterIndex) AppendShard(object []byte, runs []indexfile.Run) []byte {
	start := int64(len(object))
	object = EncodeRuns(object, runs)
	var matching int64
	for _, r := range runs {
		matching += r.Count()
	}
	sum, _ := checksum.Of("xxh64", object[start:]) // a known algorithm
	f.Shards = append(f.Shards, FilterShard{Matching: matching, Offset: start, Length: int64(len(object)) - start, Hash: sum.String()})
	return object
}

// WriteFilter stores a selection beside its stream's index: the runs
// first, so that a reader never finds an index without them.
func WriteFilter(ctx context.Context, st store.Store, f *FilterIndex, runs []byte) error {
	indexKey, runsKey := FilterObjects(f.Filter)
	return putBeside(ctx, st, indexKey, runsKey, f, runs)
}

// putBeside stores an object beside a stream's index and then its index
// as JSON, so that a reader never finds the index without the object.
func putBeside(ctx context.Context, st store.Store, indexKey, objectKey string, x any, object []byte) error {
	if err := st.Put(ctx, objectKey, bytes.NewReader(object), int64(len(object))); err != nil {
		return err
	}
	data, err := json.MarshalIndent(x, "", " ")
	if err != nil {
		return err
	}
	return st.Put(ctx, indexKey, bytes.NewReader(data), int64(len(data)))
}

// ErrNoSelection is a filtered stream whose selection was not written.
var ErrNoSelection = errors.New("the stream has no selection for its filter")

// ReadFilter reads the selection of filter expr beside a stream's index
// (at most maxBytes of its index, 0: indexfile.DefaultMaxBytes) and checks it against
// the index (its content hash and shards' rows) and the size of its runs.
func ReadFilter(ctx context.Context, st store.Store, expr, contentHash string, samples []int64, maxBytes int64) (*FilterIndex, error) {
	indexKey, runsKey := FilterObjects(expr)
	data, err := indexfile.ReadObject(ctx, st, indexKey, maxBytes)
	if errors.Is(err, store.ErrNotFound) { // written before indexfile.Dir?
		oldIndex, oldRuns := legacyFilterObjects(expr)
		if data, err = indexfile.ReadObject(ctx, st, oldIndex, maxBytes); err == nil {
			indexKey, runsKey = oldIndex, oldRuns
		} else if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("%w: %s is missing", ErrNoSelection, indexfile.ObjectURI(st, indexKey))
		}
	}
	if err != nil {
		return nil, err
	}
	var f FilterIndex
	if err := strictjson.Decode(data, &f); err != nil {
		return nil, fmt.Errorf("%s: not a shardfeed filter index (%w): re-run shardfeed index --filter", indexfile.ObjectURI(st, indexKey), err)
	}
	if f.Filter != expr {
		return nil, fmt.Errorf("%s is the selection of filter %q, not %q: re-run shardfeed index --filter", indexfile.ObjectURI(st, indexKey), f.Filter, expr)
	}
	o, err := st.Stat(ctx, runsKey)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s is missing", ErrNoSelection, indexfile.ObjectURI(st, runsKey))
	}
	if err != nil {
		return nil, err
	}
	if err := f.Check(contentHash, samples, o.Size); err != nil {
		return nil, fmt.Errorf("%s: %w", indexfile.ObjectURI(st, indexKey), err)
	}
	f.RunsKey = runsKey
	return &f, nil
}

// ShardRuns decodes shard i's runs from their bytes and checks that they
// cover its matching rows, of its rows.
func (f *FilterIndex) ShardRuns(i int, b []byte, rows int64) ([]indexfile.Run, error) {
	runs, covered, err := DecodeRuns(b, rows)
	if err != nil {
		return nil, err
	}
	if covered != f.Shards[i].Matching {
		return nil, fmt.Errorf("%w: %d rows, the selection's index says %d match", errRuns, covered, f.Shards[i].Matching)
	}
	return runs, nil
}

// maxRunBytes bounds one shard's encoded runs: two varints per run, at
// most one run per two rows.
const maxRunBytes = 64 << 20

// EncodeRuns appends runs (sorted, disjoint, non-empty) to dst: their
// number, then each run's gap from the previous run's end and its length,
// as unsigned varints.
func EncodeRuns(dst []byte, runs []indexfile.Run) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(runs)))
	var end int64
	for _, r := range runs {
		dst = binary.AppendUvarint(dst, uint64(r[0]-end))  //nolint:gosec // sorted: r[0] >= end
		dst = binary.AppendUvarint(dst, uint64(r.Count())) //nolint:gosec // non-empty
		end = r[1]
	}
	return dst
}

var errRuns = errors.New("corrupt selection runs")

// DecodeRuns decodes the runs of a shard of rows rows, exactly as
// EncodeRuns wrote them: sorted, disjoint, non-empty, within the rows, and
// no byte left over. It returns the runs and the rows they cover.
func DecodeRuns(b []byte, rows int64) ([]indexfile.Run, int64, error) {
	if len(b) > maxRunBytes {
		return nil, 0, fmt.Errorf("%w: %d bytes, above the bound of %d", errRuns, len(b), maxRunBytes)
	}
	uv := func() (int64, error) {
		v, n := binary.Uvarint(b)
		// A value in more bytes than it needs (a last byte of 0) is not
		// what EncodeRuns writes.
		if n <= 0 || n > 1 && b[n-1] == 0 || v > uint64(rows) { //nolint:gosec // rows >= 0
			return 0, fmt.Errorf("%w: a value past the shard's %d rows, or cut short", errRuns, rows)
		}
		b = b[n:]
		return int64(v), nil //nolint:gosec // bounded by rows
	}
	if rows < 0 {
		return nil, 0, fmt.Errorf("%w: %d rows", errRuns, rows)
	}
	n, err := uv()
	if err != nil {
		return nil, 0, err
	}
	if n > int64(len(b))/2 { // two bytes at least per run
		return nil, 0, fmt.Errorf("%w: %d runs in %d bytes", errRuns, n, len(b))
	}
	runs := make([]indexfile.Run, 0, n)
	var end, covered int64
	for range n {
		gap, err := uv()
		if err != nil {
			return nil, 0, err
		}
		length, err := uv()
		if err != nil {
			return nil, 0, err
		}
		start := end + gap
		if (gap == 0 && len(runs) > 0) || length == 0 || start > rows-length {
			return nil, 0, fmt.Errorf("%w: run [%d, +%d) after %d, in %d rows", errRuns, start, length, end, rows)
		}
		runs = append(runs, indexfile.Run{start, start + length})
		end, covered = start+length, covered+length
	}
	if len(b) != 0 {
		return nil, 0, fmt.Errorf("%w: %d bytes after the runs", errRuns, len(b))
	}
	return runs, covered, nil
}

// Complement returns the rows of [0, rows) that runs do not cover, as
// runs: a filter's unmatched rows are served as a table's deleted rows
// are, never.
func Complement(runs []indexfile.Run, rows int64) []indexfile.Run {
	var out []indexfile.Run
	var end int64
	for _, r := range runs {
		if r[0] > end {
			out = append(out, indexfile.Run{end, r[0]})
		}
		end = r[1]
	}
	if end < rows {
		out = append(out, indexfile.Run{end, rows})
	}
	return out
}

// Check checks a filter index against the stream index it is for (its
// content hash and shards' rows) and the size of its selection object.
func (f *FilterIndex) Check(contentHash string, samples []int64, selectionSize int64) error {
	switch {
	case f.Shardfeed != indexfile.Version:
		return fmt.Errorf("filter index version %d is not supported: re-run shardfeed index --filter", f.Shardfeed)
	case f.Index != contentHash:
		return fmt.Errorf("the filter's selection was computed over another index (%s, the stream's is %s): re-run shardfeed index --filter", f.Index, contentHash)
	case len(f.Shards) != len(samples):
		return fmt.Errorf("the filter's selection has %d shards, the index %d: re-run shardfeed index --filter", len(f.Shards), len(samples))
	}
	var end int64
	for i, s := range f.Shards {
		if _, err := checksum.Parse(s.Hash); err != nil || s.Hash == "" {
			return fmt.Errorf("the filter's selection of shard %d has hash %q: re-run shardfeed index --filter", i, s.Hash)
		}
		if s.Matching < 0 || s.Matching > samples[i] || s.Offset != end || s.Length < 1 || s.Length > maxRunBytes || s.Offset > selectionSize-s.Length {
			return fmt.Errorf("the filter's selection of shard %d (%d matching of %d rows, bytes [%d, +%d) of %d) is corrupt: re-run shardfeed index --filter",
				i, s.Matching, samples[i], s.Offset, s.Length, selectionSize)
		}
		end = s.Offset + s.Length
	}
	if end != selectionSize {
		return fmt.Errorf("the filter's selection object is %d bytes, its index covers %d: re-run shardfeed index --filter", selectionSize, end)
	}
	return nil
}

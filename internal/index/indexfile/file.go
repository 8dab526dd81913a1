package indexfile

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/strictjson"
	"github.com/shardfeed/shardfeed/planner"
)

// Version is the version of the shardfeed index format.
const Version = 1

// File is a shardfeed index (docs/formats.md): the shards of a stream as
// byte ranges of its objects, written by `shardfeed index` as index.json.
type File struct {
	// Shardfeed is the index format version.
	Shardfeed int `json:"shardfeed"`
	// Format of the stream's objects (spec.streams[].format).
	Format datav1alpha1.ShardFormat `json:"format"`
	// Schema of a stream whose objects carry none (JSON Lines, CSV, TSV),
	// as shardfeed index inferred it or was given it.
	Schema []Field `json:"schema,omitempty"`
	// Table is the Iceberg table of an iceberg stream, at the snapshot
	// the index was resolved at.
	Table *Table `json:"table,omitempty"`
	// Lance is the Lance dataset of a lance stream, at the version the
	// index was resolved at.
	Lance *Lance `json:"lance,omitempty"`
	// Megatron says how a megatron stream's shards are read.
	Megatron *Megatron `json:"megatron,omitempty"`
	// LeRobot is the LeRobot dataset of a lerobot stream.
	LeRobot *LeRobot `json:"lerobot,omitempty"`
	// LitData says how a litdata stream's chunks are read.
	LitData *LitData `json:"litdata,omitempty"`
	// HuggingFace names the split a huggingface stream's index is of,
	// where its source holds several.
	HuggingFace *HuggingFace `json:"huggingface,omitempty"`
	// Partitions are the partition columns of a hive-partitioned stream,
	// and the selection its files were indexed with.
	Partitions *Partitions `json:"partitions,omitempty"`
	// Listing is what the stream's objects were when they were indexed:
	// a later listing that differs means the source changed.
	Listing *Listing `json:"listing,omitempty"`
	Shards  []Entry  `json:"shards"`
	// parts, for an index read in parts (InParts), holds the entries of
	// the shards resolved so far, in place of Shards.
	parts Parts
}

// Parts are the shards of an index read in parts (the compact index's
// counts, internal/index/compact): each entry is resolved before it is
// asked for.
type Parts interface {
	Shards() int64
	// MustEntry is shard h's entry, resolved before: asking for another
	// is the caller's mistake, and panics.
	MustEntry(h int64) *Entry
}

// InParts is f with its shards read through p (f's header, without its
// Shards).
func (f File) InParts(p Parts) *File {
	f.parts = p
	return &f
}

// Len is the number of shards the index lists.
func (f *File) Len() int {
	if f.parts != nil {
		return int(f.parts.Shards())
	}
	return len(f.Shards)
}

// Shard is shard i's entry, not to be changed. An index read in parts
// (Lean) has the entries of the shards it resolved: asking for another is
// the caller's mistake, and panics.
func (f *File) Shard(i int) *Entry {
	if f.parts != nil {
		return f.parts.MustEntry(int64(i))
	}
	return &f.Shards[i]
}

// Parts is the shards of an index read in parts, which resolves them;
// nil for an index read whole.
func (f *File) Parts() Parts { return f.parts }

// Listing sums up the objects an index was made of. It is not part of
// the plan: two indexes of the same bytes listed at other times plan the
// same.
type Listing struct {
	// Objects is how many there were.
	Objects int `json:"objects"`
	// Digest is the sha256 of their keys, sizes and version tags (a
	// store's ETag, a local file's modification time), in key order.
	Digest string `json:"digest"`
	// ObjectList says the objects came from an object list (an S3
	// Inventory's), not a listing: the digest is of keys and sizes, and
	// a source that large is not listed again to compare.
	ObjectList bool `json:"objectList,omitempty"`
	// Shards is the brace pattern that named them (--shards), if one did.
	Shards string `json:"shards,omitempty"`
	// Empty are the objects listed that hold no sample (no shard names
	// them): listed, so not new.
	Empty []string `json:"empty,omitempty"`
}

// Partitions describe a hive-partitioned stream's index.
type Partitions struct {
	// Columns in the tree's order, each of PartitionTypes.
	Columns []Field `json:"columns"`
	// Given says the types were given (spec.streams[].partitions.columns),
	// not inferred.
	Given bool `json:"given,omitempty"`
	// Select is the CEL expression that selected the indexed partitions
	// ("" for all).
	Select string `json:"select,omitempty"`
}

// PartitionTypes are the types a partition column may have.
var PartitionTypes = []string{"utf8", "int32", "int64", "float64", "bool"}

// NullPartition is the directory value of a null partition, as Hive and
// pyarrow write it.
const NullPartition = "__HIVE_DEFAULT_PARTITION__"

// Key is the partitions' plan input: columns, how their types were
// decided, and the selection.
func (p *Partitions) Key() string {
	var b strings.Builder
	for _, c := range p.Columns {
		fmt.Fprintf(&b, "%s:%s,", c.Name, c.Type)
	}
	fmt.Fprintf(&b, "given=%t;select=%s", p.Given, p.Select)
	return b.String()
}

// ParsePartitionValue parses a partition's directory value (already
// unescaped) as a column of type typ: nil for a null partition.
func ParsePartitionValue(v, typ string) (any, error) {
	if v == NullPartition {
		return nil, nil
	}
	var (
		out any
		err error
	)
	switch typ {
	case "utf8":
		out = v
	case "int32":
		var n int64
		n, err = strconv.ParseInt(v, 10, 32)
		out = int32(n) //nolint:gosec // parsed as 32 bits
	case "int64":
		out, err = strconv.ParseInt(v, 10, 64)
	case "float64":
		out, err = strconv.ParseFloat(v, 64)
	case "bool":
		out, err = strconv.ParseBool(v)
	default:
		return nil, fmt.Errorf("type %q is not one of %s", typ, strings.Join(PartitionTypes, ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("%q is not a %s", v, typ)
	}
	return out, nil
}

func (p *Partitions) check(shards []Entry) error {
	if len(p.Columns) == 0 {
		return errors.New("a partitioned index has no partition columns")
	}
	seen := map[string]bool{}
	for _, c := range p.Columns {
		if c.Name == "" || seen[c.Name] || !slices.Contains(PartitionTypes, c.Type) {
			return fmt.Errorf("partition column %q of type %q: each needs a distinct name and one of %s", c.Name, c.Type, strings.Join(PartitionTypes, ", "))
		}
		seen[c.Name] = true
	}
	for i, e := range shards {
		if len(e.Partition) != len(p.Columns) {
			return fmt.Errorf("shards[%d] %q has %d partition values for %d columns", i, e.Name, len(e.Partition), len(p.Columns))
		}
		for j, v := range e.Partition {
			if v == nil {
				continue
			}
			if _, err := ParsePartitionValue(*v, p.Columns[j].Type); err != nil || *v == NullPartition {
				return fmt.Errorf("shards[%d] %q: partition %s: %q is not a %s", i, e.Name, p.Columns[j].Name, *v, p.Columns[j].Type)
			}
		}
	}
	return nil
}

// Entry is one shard: part Part (a Parquet row group, or a run of text
// records) of Object, stored in bytes [Offset, Offset+Length).
type Entry struct {
	Name    string `json:"name"`
	Object  string `json:"object"`
	Part    int    `json:"part"`
	Offset  int64  `json:"offset"`
	Length  int64  `json:"length"`
	Samples int64  `json:"samples"`
	// Hash is the "algo:hex" digest of the shard's bytes.
	Hash string `json:"hash"`
	// ObjectSize is the size of the whole object.
	ObjectSize int64 `json:"objectSize,omitempty"`
	// FooterOffset and FooterLength give a Parquet object's footer range
	// (the footer, its length and PAR1): with the shard's own range, all a
	// reader fetches to decode the row group.
	FooterOffset int64 `json:"footerOffset,omitempty"`
	FooterLength int64 `json:"footerLength,omitempty"`
	// Rows of the part before deletes, where deletes apply: an Iceberg
	// row group's rows, of which Deleted are never served, so that
	// Samples = Rows - the deleted rows.
	Rows int64 `json:"rows,omitempty"`
	// Deleted are the part's deleted rows, as sorted, disjoint runs
	// [start, end) of row positions within the part.
	Deleted []Run `json:"deleted,omitempty"`
	// Partition holds the values of a partitioned stream's partition
	// columns for the part's rows, as its directories say them (null: a
	// null partition).
	Partition []*string `json:"partition,omitempty"`
	// RowStart is the first of a Lance shard's Rows, a physical row of
	// fragment Part.
	RowStart int64 `json:"rowStart,omitempty"`
	// Ranges are the byte ranges of a Lance shard's own bytes (its rows'
	// pages), in order: Offset and Length are the first range's, Length
	// the bytes of them all, and Hash the digest of them in order.
	Ranges []Range `json:"ranges,omitempty"`
	// Files are a Lance shard's data files (one, or more where columns
	// were added to its fragment), with their tails.
	Files []LanceFile `json:"files,omitempty"`
	// Episode is a lerobot shard's frames of one episode; its Ranges are
	// the data file's row groups that hold them, its footer the data
	// file's.
	Episode *LeRobotEpisode `json:"episode,omitempty"`
}

// Run is the rows [Run[0], Run[1]) of a part.
type Run [2]int64

// LiveRows lists the rows of the shard's object it serves, in order: its
// Rows from RowStart, less its Deleted runs.
func (e Entry) LiveRows() []int64 {
	out := make([]int64, 0, max(e.Samples, 0))
	d := 0
	for r := int64(0); r < e.Rows; r++ {
		for d < len(e.Deleted) && e.Deleted[d][1] <= r {
			d++
		}
		if d < len(e.Deleted) && e.Deleted[d][0] <= r {
			continue
		}
		out = append(out, e.RowStart+r)
	}
	return out
}

// Count is the number of rows in the run.
func (r Run) Count() int64 { return r[1] - r[0] }

// ShardOf is the planner's view of one of the index's shards.
func (f *File) ShardOf(e *Entry) planner.Shard {
	out := planner.Shard{Name: e.Name, Samples: e.Samples, Bytes: e.Length, Hash: e.Hash}
	if e.FooterLength > 0 {
		out.Shared, out.SharedBytes = e.Object, e.FooterLength
	}
	if f.Megatron != nil { // the shard's .idx ranges are fetched with its tokens
		for _, r := range e.Ranges {
			out.Bytes += r.Length
		}
	}
	if ep := e.Episode; ep != nil { // its row groups, and each camera's samples and movie box
		out.Bytes = 0
		for _, r := range e.Ranges {
			out.Bytes += r.Length
		}
		for _, c := range ep.Clips {
			out.Bytes += c.Movie.Length + c.Samples.Length
		}
	}
	for k, lf := range e.Files { // the first tail is shared; the others count as the shard's
		if k == 0 {
			out.Shared, out.SharedBytes = lf.Tail.Object+"#tail", lf.Tail.Length
		} else {
			out.Bytes += lf.Tail.Length
		}
	}
	return out
}

// StreamIndex returns the planner's view of the index.
func (f *File) StreamIndex() planner.StreamIndex {
	out := planner.StreamIndex{Shards: make([]planner.Shard, len(f.Shards))}
	for i := range f.Shards {
		out.Shards[i] = f.ShardOf(&f.Shards[i])
	}
	if f.Table != nil {
		out.Snapshot = strconv.FormatInt(f.Table.Snapshot, 10)
	}
	if f.Lance != nil {
		out.Snapshot = f.Lance.Snapshot()
	}
	if f.Partitions != nil {
		out.Partitions = f.Partitions.Key()
	}
	return out
}

// Check checks the index whole: its head, then its shards.
func (f *File) Check() error {
	if err := f.CheckHead(); err != nil {
		return err
	}
	if len(f.Shards) == 0 {
		return errors.New(`shardfeed index lists no shards ("shards" is empty)`)
	}
	return f.CheckShards()
}

// CheckHead checks what the index says besides its shards.
func (f *File) CheckHead() error {
	if f.Shardfeed != Version {
		return fmt.Errorf("shardfeed index version %d is not supported: this shardfeed reads version %d; re-run shardfeed index", f.Shardfeed, Version)
	}
	if f.Format == "" {
		return errors.New(`shardfeed index names no "format": re-run shardfeed index`)
	}
	for _, fl := range f.Schema {
		if err := fl.check(); err != nil {
			return fmt.Errorf("shardfeed index schema: %w", err)
		}
	}
	if (f.Format == datav1alpha1.FormatIceberg) != (f.Table != nil) {
		return fmt.Errorf(`shardfeed index of format %q has %s "table": an iceberg index has one, no other does; re-run shardfeed index`, f.Format, map[bool]string{true: "a", false: "no"}[f.Table != nil])
	}
	if f.Table != nil {
		if err := f.Table.check(); err != nil {
			return fmt.Errorf("shardfeed index table: %w", err)
		}
	}
	if (f.Format == datav1alpha1.FormatLance) != (f.Lance != nil) {
		return fmt.Errorf(`shardfeed index of format %q has %s "lance": a lance index has one, no other does; re-run shardfeed index`, f.Format, map[bool]string{true: "a", false: "no"}[f.Lance != nil])
	}
	if f.Lance != nil {
		if err := f.Lance.check(); err != nil {
			return fmt.Errorf("shardfeed index lance: %w", err)
		}
	}
	if (f.Format == datav1alpha1.FormatMegatron) != (f.Megatron != nil) {
		return fmt.Errorf(`shardfeed index of format %q has %s "megatron": a megatron index has one, no other does; re-run shardfeed index`, f.Format, map[bool]string{true: "a", false: "no"}[f.Megatron != nil])
	}
	if f.Megatron != nil {
		if err := f.Megatron.check(); err != nil {
			return fmt.Errorf("shardfeed index megatron: %w; re-run shardfeed index", err)
		}
	}
	if (f.Format == datav1alpha1.FormatLeRobot) != (f.LeRobot != nil) {
		return fmt.Errorf(`shardfeed index of format %q has %s "lerobot": a lerobot index has one, no other does; re-run shardfeed index`, f.Format, map[bool]string{true: "a", false: "no"}[f.LeRobot != nil])
	}
	if f.LeRobot != nil {
		if err := f.LeRobot.check(); err != nil {
			return fmt.Errorf("shardfeed index lerobot: %w; re-run shardfeed index", err)
		}
	}
	if (f.Format == datav1alpha1.FormatLitData) != (f.LitData != nil) {
		return fmt.Errorf(`shardfeed index of format %q has %s "litdata": a litdata index has one, no other does; re-run shardfeed index`, f.Format, map[bool]string{true: "a", false: "no"}[f.LitData != nil])
	}
	if f.LitData != nil {
		if err := f.LitData.check(); err != nil {
			return fmt.Errorf("shardfeed index litdata: %w; re-run shardfeed index", err)
		}
	}
	return nil
}

// CheckShards checks the shards against each other and the head.
func (f *File) CheckShards() error {
	if f.Partitions != nil {
		if err := f.Partitions.check(f.Shards); err != nil {
			return fmt.Errorf("shardfeed index: %w; re-run shardfeed index", err)
		}
	}
	seen := make(map[string]int, len(f.Shards))
	for i, e := range f.Shards {
		if f.Partitions == nil && e.Partition != nil {
			return fmt.Errorf("shardfeed index: shards[%d] %q has partition values and the index no partition columns; re-run shardfeed index", i, e.Name)
		}
		if e.Name == "" || e.Object == "" || e.Offset < 0 || e.Length < 0 || e.Samples < 0 || e.Part < 0 {
			return fmt.Errorf("shardfeed index: shards[%d] needs a name, an object and non-negative part, offset, length and samples", i)
		}
		if j, dup := seen[e.Name]; dup {
			return fmt.Errorf("shardfeed index: shards[%d] %q is also shards[%d]", i, e.Name, j)
		}
		seen[e.Name] = i
		if _, err := checksum.Parse(e.Hash); err != nil {
			return fmt.Errorf("shardfeed index: shards[%d]: %w", i, err)
		}
		if err := e.checkDeleted(); err != nil {
			return fmt.Errorf("shardfeed index: shards[%d] %q: %w", i, e.Name, err)
		}
		switch {
		case f.Lance != nil:
			if err := e.checkLance(); err != nil {
				return fmt.Errorf("shardfeed index: shards[%d] %q: %w; re-run shardfeed index", i, e.Name, err)
			}
		case f.Megatron != nil:
			if err := e.checkMegatron(f.Megatron); err != nil {
				return fmt.Errorf("shardfeed index: shards[%d] %q: %w; re-run shardfeed index", i, e.Name, err)
			}
		case f.LeRobot != nil:
			if err := e.checkLeRobot(f.LeRobot); err != nil {
				return fmt.Errorf("shardfeed index: shards[%d] %q: %w; re-run shardfeed index", i, e.Name, err)
			}
		case e.Episode != nil:
			return fmt.Errorf("shardfeed index: shards[%d] %q has a lerobot shard's episode in a %s index; re-run shardfeed index", i, e.Name, f.Format)
		case e.Ranges != nil || e.Files != nil || e.RowStart != 0:
			return fmt.Errorf("shardfeed index: shards[%d] %q has a lance shard's ranges in a %s index; re-run shardfeed index", i, e.Name, f.Format)
		}
	}
	return nil
}

// checkDeleted checks that the deleted runs are sorted, disjoint and
// within the part's rows, and that the samples are the rows left.
func (e Entry) checkDeleted() error {
	if e.Rows == 0 && len(e.Deleted) == 0 {
		return nil
	}
	if e.Rows < 0 {
		return fmt.Errorf("rows %d is negative", e.Rows)
	}
	var deleted, end int64
	for j, r := range e.Deleted {
		if r[0] < end || r[1] <= r[0] || r[1] > e.Rows {
			return fmt.Errorf("deleted[%d] %v is not a sorted, disjoint, non-empty run within its %d rows", j, r, e.Rows)
		}
		deleted += r.Count()
		end = r[1]
	}
	if e.Samples != e.Rows-deleted {
		return fmt.Errorf("samples %d is not its %d rows less %d deleted", e.Samples, e.Rows, deleted)
	}
	return nil
}

// Field is a column of a File's schema: a name and its type, as
// ColumnType.String spells it (each format that reads a schema from the
// index maps it to an Arrow type).
type Field struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

func (f Field) check() error {
	if _, err := CheckColumnType(f.Type); err != nil {
		return fmt.Errorf("column %q: %w", f.Name, err)
	}
	return nil
}

// Parse parses a shardfeed index in JSON, strictly, and checks it.
func Parse(data []byte) (*File, error) {
	var f File
	if err := strictjson.Decode(data, &f); err != nil {
		return nil, fmt.Errorf("shardfeed index: %w", err)
	}
	if err := f.Check(); err != nil {
		return nil, err
	}
	return &f, nil
}

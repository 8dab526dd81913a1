// Package index reads and writes the index of a stream: the list of its
// shards with their sample counts, sizes and hashes that the planner
// needs, and, for the sidecar, where each shard's bytes are. It decodes no
// shard: the control plane reads indexes with it and links no decoder.
//
// Three forms are read, each recognised by a key of its JSON object (the
// forms table): shardfeed's own index (written by `shardfeed index`, see
// File, in JSON or compact, compact.go and compactread.go); MDS's
// index.json (version 2, internal/index/mdsindex); and a plain JSON list
// of shards, {"shards": [{"name": …, "samples": …, "bytes": …, "hash":
// …}]}, for indexes written by hand or by tools, which plans but does not
// say how to read its shards. A Layout holds the index as its form parsed
// it.
//
// The per-format sections of File (table.go, lance.go, megatron.go,
// litdata.go, huggingface.go; the column types of coltype.go) are what a
// format's reader needs beyond the byte ranges, written by its indexer.
// Checkpoint keeps a long indexing run's progress. The files kept beside
// the index (selections, lengths, packs, buckets) are package sidefile's.
package index

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index/compact"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/index/mdsindex"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/strictjson"
	"github.com/shardfeed/shardfeed/planner"
)

// Layout is a stream's index as its form read it: the planner's view, and
// what a reader of the stream needs beyond it, where each shard's bytes are
// and how to decode them.
type Layout struct {
	// Format is the format of the stream's shards, as the index says.
	Format datav1alpha1.ShardFormat
	Index  planner.StreamIndex
	// The index as its form parsed it, one of the two set: File for
	// shardfeed's own, MDS for MDS's index.json. The format's reader takes
	// what it needs from it (sidecar/format).
	File *indexfile.File
	MDS  *mdsindex.Index
	// Lean, for an index read in parts (LeanLayout), resolves its
	// shards' entries as a sidecar needs them; File reads them through it.
	Lean *compact.Counts
}

// Form names the form the index was read in, for errors.
func (l *Layout) Form() string {
	switch {
	case l.File != nil:
		return "a shardfeed index"
	case l.MDS != nil:
		return "an MDS index.json"
	}
	return "no index"
}

// ErrNoLayout is returned for a plain list of shards: it has the counts a
// plan needs but not where a shard's bytes are or how to decode them.
var ErrNoLayout = errors.New(`the index is a plain list of shards, which plans but does not say how to read them: serve the stream with MDS's index.json or one written by "shardfeed index"`)

// form is one form of index, recognised by a top-level key.
type form struct {
	key  string
	read func(data []byte) (*Layout, error)
}

// forms are the index forms that say how to read their shards, in the
// order they are tried.
var forms = []form{
	{key: "shardfeed", read: readFile},
	{key: "version", read: readMDS},
}

// LayoutOf is how to read the shards f lists.
func LayoutOf(f *indexfile.File) *Layout {
	return &Layout{Format: f.Format, Index: f.StreamIndex(), File: f}
}

// LeanLayout is the index r reads as a sidecar reads it
// (compact.Reader.LeanFile): the first shard's entry resolved, the
// others as the returned counts resolve them.
func LeanLayout(r *compact.Reader) (*Layout, *compact.Counts, error) {
	f, x, c, err := r.LeanFile()
	if err != nil {
		return nil, nil, err
	}
	return &Layout{Format: f.Format, Index: x, File: f, Lean: c}, c, nil
}

func readFile(data []byte) (*Layout, error) {
	f, err := indexfile.Parse(data)
	if err != nil {
		return nil, err
	}
	return LayoutOf(f), nil
}

func readCompact(data []byte) (*Layout, error) {
	f, err := compact.Parse(data)
	if err != nil {
		return nil, err
	}
	return LayoutOf(f), nil
}

func readMDS(data []byte) (*Layout, error) {
	x, err := mdsindex.Parse(data)
	if err != nil {
		return nil, err
	}
	return &Layout{Format: datav1alpha1.FormatMDS, Index: x.StreamIndex(), MDS: x}, nil
}

// readLayout parses data in the form its keys say; a plain list of shards
// is ErrNoLayout.
func readLayout(data []byte) (*Layout, error) {
	if compact.HasMagic(data) {
		return readCompact(data)
	}
	// The top-level keys, walked in place: decoding the document twice
	// (once to learn its form) cost a fifth of reading a large index.
	present, err := strictjson.TopKeys(data)
	if err != nil {
		// Let encoding/json say what is wrong, as it does everywhere.
		var v map[string]json.RawMessage
		if jerr := json.Unmarshal(data, &v); jerr != nil {
			return nil, fmt.Errorf("index is not valid JSON: %w", jerr)
		}
		return nil, fmt.Errorf("index is not valid JSON: %w", err)
	}
	for _, f := range forms {
		if present[f.key] {
			return f.read(data)
		}
	}
	return nil, ErrNoLayout
}

// ReadLayout parses an index that says how to read its shards: MDS's
// index.json or a shardfeed index.
func ReadLayout(r io.Reader) (*Layout, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return readLayout(data)
}

// Read parses an index in any form, for the planner.
func Read(r io.Reader) (planner.StreamIndex, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return planner.StreamIndex{}, err
	}
	l, err := readLayout(data)
	if err == nil {
		return l.Index, nil
	}
	if !errors.Is(err, ErrNoLayout) {
		return planner.StreamIndex{}, err
	}
	return readList(data)
}

// readList parses a plain list of shards.
func readList(data []byte) (planner.StreamIndex, error) {
	var x planner.StreamIndex
	if err := strictjson.Decode(data, &x); err != nil {
		return planner.StreamIndex{}, fmt.Errorf("index is neither MDS (no \"version\") nor a list of shards: %w", err)
	}
	if len(x.Shards) == 0 {
		return planner.StreamIndex{}, errors.New(`index lists no shards ("shards" is empty)`)
	}
	for i, s := range x.Shards {
		if s.Name == "" || s.Samples < 0 || s.Bytes < 0 {
			return planner.StreamIndex{}, fmt.Errorf("index: shards[%d] needs a name and non-negative samples and bytes, got %+v", i, s)
		}
	}
	return x, nil
}

// ReadDir reads dir/_shardfeed/index.json, else dir/_shardfeed/index.sfi,
// else dir/index.json.
func ReadDir(dir string) (planner.StreamIndex, error) {
	var (
		x   planner.StreamIndex
		err error
	)
	for _, key := range []string{indexfile.Key, compact.Key, indexfile.FileName} {
		if x, err = ReadFile(filepath.Join(dir, filepath.FromSlash(key))); !errors.Is(err, os.ErrNotExist) {
			break
		}
	}
	return x, err
}

// ReadFile reads an index file in any form.
func ReadFile(path string) (planner.StreamIndex, error) {
	f, err := os.Open(path)
	if err != nil {
		return planner.StreamIndex{}, err
	}
	defer func() { _ = f.Close() }()
	x, err := Read(f)
	if err != nil {
		return planner.StreamIndex{}, fmt.Errorf("%s: %w", path, err)
	}
	return x, nil
}

// ReadStoreIndex reads the index of a stream's prefix once, in any form
// (_shardfeed/index.json, else the prefix's own index.json), reading at
// most maxBytes (0: DefaultMaxBytes): its planner view, and its layout
// (nil for a plain list of shards, which plans but cannot be served:
// NoLayout says why).
func ReadStoreIndex(ctx context.Context, st store.Store, maxBytes int64) (*Layout, planner.StreamIndex, error) {
	return readStoreIndex(ctx, st, maxBytes, readWhole, indexfile.Key, compact.Key, indexfile.FileName)
}

// ReadStoreIndexOf is ReadStoreIndex for a stream of format kind: an MDS
// stream's index is MDS's own, in the prefix itself, so it is looked for
// there first (one request, not a miss under Dir before it).
func ReadStoreIndexOf(ctx context.Context, st store.Store, maxBytes int64, kind datav1alpha1.ShardFormat) (*Layout, planner.StreamIndex, error) {
	return readStoreIndex(ctx, st, maxBytes, readWhole, keysOf(kind)...)
}

// ReadStoreSummaryOf is ReadStoreIndexOf for a reader that plans and
// serves nothing (the operator): a compact index is read by its header
// alone, at most maxBytes of it; its layout has no shards and its planner
// view is the header's Summary. Other forms are read whole.
func ReadStoreSummaryOf(ctx context.Context, st store.Store, maxBytes int64, kind datav1alpha1.ShardFormat) (*Layout, planner.StreamIndex, error) {
	return readStoreIndex(ctx, st, maxBytes, readSummary, keysOf(kind)...)
}

// ReadStoreLeanOf is ReadStoreIndexOf for a reader that serves a few of
// the shards (a sidecar): a compact index is read in parts
// (LeanLayout), its header at most maxBytes; its layout's
// File resolves the shards asked for (File.Lean) and its planner view
// counts them (StreamIndex.Counts). Other forms are read whole.
func ReadStoreLeanOf(ctx context.Context, st store.Store, maxBytes int64, kind datav1alpha1.ShardFormat) (*Layout, planner.StreamIndex, error) {
	return readStoreIndex(ctx, st, maxBytes, readLean, keysOf(kind)...)
}

// readMode is how much of a compact index a reader reads.
type readMode int

const (
	readWhole   readMode = iota // every shard
	readSummary                 // the header
	readLean                    // the header, the counts, and shards as asked
)

// keysOf are the keys a stream's index may be at, in the order looked at:
// an MDS stream's index is MDS's own, in the prefix itself, so it is
// looked for there first (one request, not a miss under Dir before it).
func keysOf(kind datav1alpha1.ShardFormat) []string {
	switch kind {
	case datav1alpha1.FormatMDS, "":
		return []string{indexfile.FileName, indexfile.Key, compact.Key}
	case datav1alpha1.FormatLitData: // the prefix's own index.json is LitData's, not ours
		return []string{indexfile.Key, compact.Key}
	}
	return []string{indexfile.Key, compact.Key, indexfile.FileName}
}

func readStoreIndex(ctx context.Context, st store.Store, maxBytes int64, mode readMode, keys ...string) (*Layout, planner.StreamIndex, error) {
	for _, key := range keys {
		if mode != readWhole && key == compact.Key {
			r, err := compact.Open(ctx, st, key, maxBytes)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, planner.StreamIndex{}, err
			}
			if mode == readLean {
				l, _, err := LeanLayout(r)
				if err != nil {
					return nil, planner.StreamIndex{}, fmt.Errorf("%s: %w", indexfile.ObjectURI(st, key), err)
				}
				return l, l.Index, nil
			}
			x := r.Summary()
			return &Layout{Format: r.File.Format, Index: x, File: r.File}, x, nil
		}
		data, err := indexfile.ReadObject(ctx, st, key, maxBytes)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, planner.StreamIndex{}, err
		}
		return parseStoreIndex(data, indexfile.ObjectURI(st, key))
	}
	return nil, planner.StreamIndex{}, missingIndex(store.ErrNotFound, st, keys)
}

// parseStoreIndex parses an index read from where.
func parseStoreIndex(data []byte, where string) (*Layout, planner.StreamIndex, error) {
	l, err := readLayout(data)
	if err == nil {
		return l, l.Index, nil
	}
	if !errors.Is(err, ErrNoLayout) {
		return nil, planner.StreamIndex{}, fmt.Errorf("%s: %w", where, err)
	}
	x, err := readList(data)
	if err != nil {
		return nil, planner.StreamIndex{}, fmt.Errorf("%s: %w", where, err)
	}
	return nil, x, nil
}

// NoLayout is the error of serving a stream whose index is a plain list.
func NoLayout(st store.Store) error {
	return fmt.Errorf("%s: %w", indexURI(st), ErrNoLayout)
}

// ReadStore reads the index.json of a stream's prefix, for the planner.
func ReadStore(ctx context.Context, st store.Store) (planner.StreamIndex, error) {
	_, x, err := ReadStoreIndex(ctx, st, 0)
	return x, err
}

// ReadStoreLayout reads the layout from the index.json of a stream's prefix.
func ReadStoreLayout(ctx context.Context, st store.Store) (*Layout, error) {
	l, _, err := ReadStoreIndex(ctx, st, 0)
	if err == nil && l == nil {
		err = NoLayout(st)
	}
	return l, err
}

// indexURI is where a store's index is (path.Join would fold the "//"
// of the scheme).
func indexURI(st store.Store) string { return indexfile.ObjectURI(st, indexfile.Key) }

// MissingError is a stream with no index where it was looked for.
type MissingError struct {
	// Tried are the URIs looked at, in order.
	Tried []string
	// Command writes the index; the stream's own, where a caller knows it.
	Command string
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("no index at %s: write one with: %s", strings.Join(e.Tried, " or "), e.Command)
}

func (e *MissingError) Unwrap() error { return store.ErrNotFound }

// missingIndex says which index objects were missing from st, and how to
// write one, when none of keys was found.
func missingIndex(err error, st store.Store, keys []string) error {
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	e := &MissingError{Command: "shardfeed index " + st.URI()}
	for _, k := range keys {
		e.Tried = append(e.Tried, indexfile.ObjectURI(st, k))
	}
	return e
}

// Form is the form an index is written in.
type Form string

// The forms of a shardfeed index: JSON (index.json), compact
// (index.sfi), or compact only above CompactAbove shards.
const (
	FormAuto    Form = "auto"
	FormJSON    Form = "json"
	FormCompact Form = "compact"
)

// Forms lists the forms, as flags spell them.
var Forms = []Form{FormAuto, FormJSON, FormCompact}

// CompactAbove is the number of shards above which FormAuto writes the
// compact form: a JSON index of that many is about 2 MiB.
const CompactAbove = 10_000

// CheckCompactEnv names a variable that, set, makes WriteForm encode every JSON index it
// writes in the compact form too, and refuse it unless it reads back the
// same: the test suite sets it, so that every format's indexes, as their
// real writers make them, are checked against the compact form.
const CheckCompactEnv = "SHARDFEED_CHECK_COMPACT_INDEX"

func checkCompact(data []byte) error {
	l, err := readLayout(data)
	if err != nil {
		return err
	}
	if l.File == nil {
		return fmt.Errorf("%s: the index is %s, which has no compact form", CheckCompactEnv, l.Form())
	}
	c, err := compact.Encode(l.File)
	if err != nil {
		return fmt.Errorf("%s: the index does not encode compact: %w", CheckCompactEnv, err)
	}
	back, err := readLayout(c)
	if err != nil {
		return fmt.Errorf("%s: the compact index does not read back: %w", CheckCompactEnv, err)
	}
	if !reflect.DeepEqual(back.File, l.File) || !reflect.DeepEqual(back.Index, l.Index) {
		return fmt.Errorf("%s: the compact index reads back other than its JSON", CheckCompactEnv)
	}
	return nil
}

// Of is the form f is written in: FormAuto's choice by its shards.
func (form Form) Of(f *indexfile.File) Form {
	if form != FormAuto && form != "" {
		return form
	}
	if len(f.Shards) > CompactAbove {
		return FormCompact
	}
	return FormJSON
}

// Key is where an index of the form is, in a stream's prefix.
func (form Form) Key() string {
	if form == FormCompact {
		return compact.Key
	}
	return indexfile.Key
}

// Write stores the index in the stream's prefix under _shardfeed, as JSON
// or compact by its number of shards (FormAuto).
func Write(ctx context.Context, st store.Store, f *indexfile.File) error {
	_, err := WriteForm(ctx, st, f, FormAuto)
	return err
}

// WriteForm stores the index in the form given and removes the other
// form's object, once the new one is in place (a reader looks for the
// JSON first: it finds the old index or the new, never a mix). It
// returns the key written.
func WriteForm(ctx context.Context, st store.Store, f *indexfile.File, form Form) (string, error) {
	form = form.Of(f)
	var (
		data       []byte
		err        error
		key, stale = indexfile.Key, compact.Key
	)
	switch form {
	case FormJSON:
		if data, err = json.MarshalIndent(f, "", " "); err == nil && os.Getenv(CheckCompactEnv) != "" {
			err = checkCompact(data)
		}
	case FormCompact:
		key, stale = compact.Key, indexfile.Key
		data, err = compact.Encode(f)
	default:
		return "", fmt.Errorf("index form %q is not one of auto, json, compact", form)
	}
	if err != nil {
		return "", err
	}
	if err := st.Put(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
		return "", err
	}
	if err := st.Delete(ctx, stale); err != nil {
		return "", fmt.Errorf("removing the index's other form %s: %w", indexfile.ObjectURI(st, stale), err)
	}
	return key, nil
}

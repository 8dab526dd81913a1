package format

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
)

// Change is how a stream's source differs from what its index was made
// of. The index still plans and serves what it lists; what changed is
// what it does not serve.
type Change struct {
	// Added are the objects an index made now would list and this one
	// does not; Removed those it lists that are gone; Resized those whose
	// size is not the one indexed. Keys, sorted.
	Added, Removed, Resized []string
	// Rewritten says that the objects are the same keys and sizes, and
	// one at least has another version tag (ETag, or a local file's
	// modification time) than when it was indexed.
	Rewritten bool
	// Table says how a table's version differs ("" when it does not).
	Table string
}

// None says the source is as it was indexed.
func (c *Change) None() bool {
	return c == nil || len(c.Added)+len(c.Removed)+len(c.Resized) == 0 && !c.Rewritten && c.Table == ""
}

// OfIndexed says an object the index lists changed: removed, resized or
// rewritten (an index of it no longer reads as it did).
func (c *Change) OfIndexed() bool {
	return c != nil && (len(c.Removed)+len(c.Resized) > 0 || c.Rewritten)
}

// String says what changed, naming the first few objects of each kind.
func (c *Change) String() string {
	var parts []string
	for _, k := range []struct {
		keys []string
		verb string
	}{{c.Added, "added"}, {c.Removed, "removed"}, {c.Resized, "of another size"}} {
		if len(k.keys) > 0 {
			parts = append(parts, fmt.Sprintf("%d %s %s (%s)", len(k.keys), objects(len(k.keys)), k.verb, firstKeys(k.keys, 3)))
		}
	}
	if c.Rewritten {
		parts = append(parts, "objects rewritten in place (the same names and sizes, another ETag or modification time)")
	}
	if c.Table != "" {
		parts = append(parts, c.Table)
	}
	return strings.Join(parts, "; ")
}

func objects(n int) string {
	if n == 1 {
		return "object"
	}
	return "objects"
}

func firstKeys(keys []string, n int) string {
	if len(keys) <= n {
		return strings.Join(keys, ", ")
	}
	return strings.Join(keys[:n], ", ") + fmt.Sprintf(", … %d more", len(keys)-n)
}

// TableChanger is a TableIndexer that can tell whether its table has a
// newer version than the one an index is of.
type TableChanger interface {
	// TableChange says how the table the index f is of differs from what
	// pin resolves to now ("" when it does not).
	TableChange(ctx context.Context, st store.Store, f *indexfile.File, pin TableOptions) (string, error)
}

// Changes compares a stream's source with its index f, as `shardfeed
// index` would list it now with the options the index records (its
// split, its partitions, its shards pattern): nil when nothing can be
// compared (a table format that cannot tell, an index read in parts, an
// index of objects from an object list: a source too large to list).
// pin is the stream's table section, for a table format.
func (r Registry) Changes(ctx context.Context, st store.Store, f *indexfile.File, pin TableOptions) (*Change, error) {
	if f == nil || f.Parts() != nil || f.Listing != nil && f.Listing.ObjectList {
		return nil, nil
	}
	fm, ok := r[f.Format]
	if !ok {
		return nil, nil
	}
	if tc, ok := fm.(TableChanger); ok {
		table, err := tc.TableChange(ctx, st, f, pin)
		if err != nil {
			return nil, err
		}
		return &Change{Table: table}, nil
	}
	ix, ok := fm.(Indexer)
	if !ok || IsTable(fm) {
		return nil, nil
	}
	opts := IndexOptions{Own: r.indexedOptions(f)}
	if p := f.Partitions; p != nil {
		opts.Partitions = &PartitionOptions{Select: p.Select}
		if p.Given {
			opts.Partitions.Columns = p.Columns
		}
	}
	exts := ix.Suffixes()
	keep := func(key string) bool {
		return slices.ContainsFunc(exts, func(ext string) bool { return strings.HasSuffix(key, ext) })
	}
	files, err := sourceFiles(ctx, st, ix, keep, &indexfile.File{Shardfeed: indexfile.Version, Format: f.Format}, opts)
	if err != nil {
		return nil, err
	}
	listed := objectsOf(files)
	if f.Listing != nil && f.Listing.Shards != "" {
		if listed, err = namedOnly(listed, f.Listing.Shards); err != nil {
			return nil, err
		}
	}
	return compareListing(f, listed, keep), nil
}

// compareListing compares the objects a source lists now with those the
// index f lists, by key and size, and by the digest of their version tags
// where f recorded one.
func compareListing(f *indexfile.File, listed []store.Object, keep func(string) bool) *Change {
	indexed := indexedSizes(f, true)
	out := &Change{}
	now := map[string]bool{}
	for _, o := range listed {
		now[o.Key] = true
		size, ok := indexed[o.Key]
		switch {
		case !ok:
			out.Added = append(out.Added, o.Key)
		case size >= 0 && size != o.Size:
			out.Resized = append(out.Resized, o.Key)
		}
	}
	for key := range indexed {
		if keep(key) && !now[key] {
			out.Removed = append(out.Removed, key)
		}
	}
	slices.Sort(out.Added)
	slices.Sort(out.Removed)
	slices.Sort(out.Resized)
	if out.None() && f.Listing != nil && f.Listing.Digest != digest(listed, !f.Listing.ObjectList) {
		out.Rewritten = true
	}
	return out
}

// listingOf sums up the objects an index is made of. Their version tags
// count unless they come from an object list (an S3 Inventory gives
// sizes alone).
func listingOf(objs []store.Object, shards string, objectList bool) *indexfile.Listing {
	return &indexfile.Listing{Objects: len(objs), Digest: digest(objs, !objectList), ObjectList: objectList, Shards: shards}
}

// digest is the SHA-256 of the objects' keys, sizes and (tagged) version
// tags, in key order.
func digest(objs []store.Object, tagged bool) string {
	sorted := slices.Clone(objs)
	slices.SortFunc(sorted, func(a, b store.Object) int { return strings.Compare(a.Key, b.Key) })
	h := sha256.New()
	for _, o := range sorted {
		tag := ""
		if tagged {
			tag = o.ETag
		}
		_, _ = fmt.Fprintf(h, "%q %d %q\n", o.Key, o.Size, tag)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// emptyObjects are the objects listed that no shard of f names.
func emptyObjects(listed []store.Object, f *indexfile.File) []string {
	named := map[string]bool{}
	for i := range f.Shards {
		named[f.Shards[i].Object] = true
		for _, r := range f.Shards[i].Ranges {
			named[r.Object] = true
		}
	}
	var out []string
	for _, o := range listed {
		if !named[o.Key] {
			out = append(out, o.Key)
		}
	}
	slices.Sort(out)
	return out
}

// namedOnly keeps the objects a brace pattern names (those missing are
// the index's to miss: a change, not an error).
func namedOnly(objs []store.Object, pattern string) ([]store.Object, error) {
	names, err := ExpandBraces(pattern)
	if err != nil {
		return nil, err
	}
	named := make(map[string]bool, len(names))
	for _, n := range names {
		named[n] = true
	}
	return slices.DeleteFunc(objs, func(o store.Object) bool { return !named[o.Key] }), nil
}

// TableChangeOptions is the table section of a stream, as Changes takes it.
func TableChangeOptions(s datav1alpha1.Stream) TableOptions {
	var out TableOptions
	if s.Lance != nil {
		out.Lance = *s.Lance
	}
	if s.Iceberg != nil {
		out.Iceberg = *s.Iceberg
	}
	return out
}

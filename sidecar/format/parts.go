package format

import (
	"context"
	"errors"
	"fmt"
	"slices"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
)

// A stream indexed in parts (shardfeed index --list-parts, --part,
// --merge-parts) is indexed by the same code as in one run, cut three
// ways: ListObjects lists the objects once, IndexPart indexes a
// contiguous run of them (on another machine, at the same time as the
// others), and MergeParts folds the parts in order as indexEach folds
// the objects it indexed at once. Each part's objects are indexed against
// the stream's head, the index of its first objects up to the first that
// has a shard (what every later object is checked against and indexed
// into a copy of): every part indexes the head again (usually one object)
// before its own objects, so every object is indexed exactly as the one
// run indexes it, and the merged index is the one run's byte for byte.

// PartsListing is the listing of a stream to be indexed in parts.
type PartsListing struct {
	// Objects are those the index is of, in key order.
	Objects []store.Object
	// Listing is the index's record of them (without Empty, which the
	// merge finds).
	Listing *indexfile.Listing
	// Head is how many of the first objects make the stream's head: the
	// objects up to and with the first that has a shard.
	Head int
}

// partsIndexer returns the Indexer of kind, refusing what is not indexed
// object by object.
func (r Registry) partsIndexer(kind datav1alpha1.ShardFormat, opts IndexOptions) (Indexer, error) {
	f, ok := r[kind]
	if !ok {
		return nil, fmt.Errorf("format %q is not supported: use %s", kind, r.names(IndexesObjects))
	}
	if err := r.CheckOptions(kind, opts.Own, "--format"); err != nil {
		return nil, err
	}
	ix, isIx := f.(Indexer)
	_, table := f.(TableIndexer)
	_, together := f.(StreamIndexer)
	_, selects := f.(Selector)
	switch {
	case table || !isIx:
		return nil, fmt.Errorf("a %s stream is indexed in one run (its index is of a table or of the format's own, not of its objects one by one): index it without --list-parts, --part or --merge-parts", kind)
	case together || selects:
		return nil, fmt.Errorf("a %s stream's objects are indexed together (an index beside them reused, or a data set chosen among them), not yet in parts: index it without --list-parts, --part or --merge-parts", kind)
	case opts.Partitions != nil:
		return nil, errors.New("a hive-partitioned stream (--hive) is not indexed in parts yet: index it without --list-parts, --part or --merge-parts")
	case opts.Append != nil:
		return nil, errors.New("--append is not indexed in parts: drop --append, or index without --list-parts, --part or --merge-parts")
	case opts.Table != nil:
		return nil, fmt.Errorf("a table (--table) is for a table format, and %s is not one", kind)
	}
	return ix, nil
}

// IndexesInParts says whether a stream of kind (hive-partitioned or not)
// is indexed in parts (--list-parts, --part, --merge-parts); the others
// are indexed in one run.
func (r Registry) IndexesInParts(kind datav1alpha1.ShardFormat, hive bool) bool {
	opts := IndexOptions{}
	if hive {
		opts.Partitions = &PartitionOptions{}
	}
	_, err := r.partsIndexer(kind, opts)
	return err == nil
}

// ListObjects lists the objects a stream's index in kind is of, as Index
// lists them (the format's suffixes, the brace pattern of opts.Shards, the
// listing a store.Listed gives), and indexes its head to know how many
// objects it is.
func (r Registry) ListObjects(ctx context.Context, st store.Store, kind datav1alpha1.ShardFormat, opts IndexOptions) (*PartsListing, error) {
	ix, err := r.partsIndexer(kind, opts)
	if err != nil {
		return nil, err
	}
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	head := &indexfile.File{Shardfeed: indexfile.Version, Format: kind}
	files, _, err := formatFiles(ctx, st, kind, ix, head, opts)
	if err != nil {
		return nil, err
	}
	_, fromList := st.(store.Listed)
	objs := objectsOf(files)
	n := 0
	for ; n < len(files) && len(head.Shards) == 0; n++ {
		if err := ix.IndexObject(ctx, st, files[n].Object, head, opts); err != nil {
			return nil, err
		}
	}
	return &PartsListing{Objects: objs, Listing: listingOf(objs, opts.Shards, fromList), Head: n}, nil
}

// IndexPart indexes objects[skip:], one part of a stream's objects, in
// kind, objects[:skip] being the stream's head objects that come before
// the part (none for a part that starts with the stream's first object):
// they are indexed again, as the head every later object is indexed
// against, and their shards left out of the part's index. With
// opts.Checkpoints the part resumes and keeps its progress as Index does.
func (r Registry) IndexPart(ctx context.Context, st store.Store, kind datav1alpha1.ShardFormat, objects []store.Object, skip int, opts IndexOptions) (*indexfile.File, error) {
	ix, err := r.partsIndexer(kind, opts)
	if err != nil {
		return nil, err
	}
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if skip < 0 || skip > len(objects) {
		return nil, fmt.Errorf("a part after %d head objects of %d", skip, len(objects))
	}
	files := make([]partitionFile, len(objects))
	for k, o := range objects {
		files[k] = partitionFile{Object: o}
	}
	out := &indexfile.File{Shardfeed: indexfile.Version, Format: kind}
	if err := indexEach(ctx, st, ix, files, out, opts); err != nil {
		return nil, err
	}
	before := map[string]bool{}
	for _, o := range objects[:skip] {
		before[o.Key] = true
	}
	n := 0
	for n < len(out.Shards) && before[out.Shards[n].Object] {
		n++
	}
	out.Shards = slices.Clone(out.Shards[n:])
	return out, nil
}

// MergeParts folds the indexes of a stream's parts, in order, into the
// stream's index as Index writes it: the first part with a shard is the
// head (the parts before it indexed only objects with none), each later
// one folded in as indexEach folds an object, and the listing's empty
// objects found among objects, every object listed. A part with no shard
// may be nil.
func (r Registry) MergeParts(kind datav1alpha1.ShardFormat, parts []*indexfile.File, objects []store.Object, listing *indexfile.Listing, opts IndexOptions) (*indexfile.File, error) {
	ix, err := r.partsIndexer(kind, opts)
	if err != nil {
		return nil, err
	}
	if len(parts) == 0 {
		return nil, errors.New("no part to merge")
	}
	// A part with no shard adds nothing: its objects hold no sample, and
	// what the parts before it indexed is in the one after it (which
	// indexed them again, as its head).
	base := slices.IndexFunc(parts, func(p *indexfile.File) bool { return p != nil && len(p.Shards) > 0 })
	if base < 0 {
		return nil, fmt.Errorf("none of the %d objects holds a %s sample", len(objects), kind)
	}
	out := cloneIndex(parts[base])
	for k := base + 1; k < len(parts); k++ {
		if parts[k] == nil || len(parts[k].Shards) == 0 {
			continue
		}
		if err := foldInto(ix, out, cloneIndex(parts[k])); err != nil {
			return nil, fmt.Errorf("part %d: %w", k, err)
		}
	}
	l := *listing
	l.Empty = emptyObjects(objects, out)
	out.Listing = &l
	return out, nil
}

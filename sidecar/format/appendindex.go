package format

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
)

// appendTo returns the files opts.Append does not list, and the index
// they are to be appended to; opts takes its schema, which they must fit.
func appendTo(kind datav1alpha1.ShardFormat, files []partitionFile, opts *IndexOptions, keep func(string) bool, uri string) ([]partitionFile, *indexfile.File, error) {
	if kind == datav1alpha1.FormatLitData {
		return nil, nil, errors.New("--append: a litdata stream's chunks are those its own index.json lists: index the stream again")
	}
	files, err := newObjects(files, opts.Append, keep, uri)
	if err != nil {
		return nil, nil, err
	}
	if opts.Schema == nil {
		opts.Schema = opts.Append.Schema // new objects fit the stream's schema
	}
	return files, cloneIndex(opts.Append), nil
}

// newObjects returns the files an index does not list yet, refusing a
// change to one it lists: an object of the format it indexed that is
// gone, or whose size is not the one indexed. The shards of what was
// indexed must stay what they are, sample for sample.
func newObjects(files []partitionFile, f *indexfile.File, keep func(string) bool, uri string) ([]partitionFile, error) {
	indexed := indexedSizes(f, false)
	var out []partitionFile
	listed := map[string]bool{}
	for _, o := range files {
		listed[o.Key] = true
		size, ok := indexed[o.Key]
		switch {
		case !ok:
			out = append(out, o)
		case size >= 0 && size != o.Size:
			return nil, fmt.Errorf("--append: %s%s is %d bytes, and was %d when indexed: a changed object changes its shards; index the stream again, without --append", uri, o.Key, o.Size, size)
		}
	}
	for key := range indexed {
		if keep(key) && !listed[key] {
			return nil, fmt.Errorf("--append: %s%s is in the index and no longer in the stream: index the stream again, without --append", uri, key)
		}
	}
	return out, nil
}

// indexedSizes maps each object an index names to its size where the
// index has it, else -1; with listed, the objects its listing recorded as
// holding no sample too.
func indexedSizes(f *indexfile.File, listed bool) map[string]int64 {
	indexed := map[string]int64{}
	see := func(key string, size int64) {
		if old, ok := indexed[key]; !ok || old < 0 {
			indexed[key] = size
		}
	}
	for i := range f.Shards {
		e := &f.Shards[i]
		see(e.Object, cmp.Or(max(e.ObjectSize, 0), -1))
		for _, r := range e.Ranges {
			see(r.Object, -1)
		}
	}
	if listed && f.Listing != nil {
		for _, key := range f.Listing.Empty {
			see(key, -1)
		}
	}
	return indexed
}

// cloneIndex copies an index deep enough that appending to it leaves the
// original as it was.
func cloneIndex(f *indexfile.File) *indexfile.File {
	out := *f
	out.Shards = append([]indexfile.Entry(nil), f.Shards...)
	out.Schema = append([]indexfile.Field(nil), f.Schema...)
	return &out
}

// sameHead refuses an appended index whose facts beyond its shards (a
// schema, a token type) are not the index's it was appended to.
func sameHead(got, was *indexfile.File) error {
	a, b := *got, *was
	a.Shards, b.Shards = nil, nil
	a.Listing, b.Listing = nil, nil // the listing is the whole stream's, set once indexed
	if len(a.Schema) == 0 && len(b.Schema) == 0 {
		a.Schema, b.Schema = nil, nil
	}
	if !reflect.DeepEqual(a, b) {
		return fmt.Errorf("--append: the new objects do not fit the index (its schema or how its objects are read, %s): index the stream again, without --append", headDiff(&a, &b))
	}
	return nil
}

func headDiff(a, b *indexfile.File) string {
	switch {
	case !reflect.DeepEqual(a.Schema, b.Schema):
		return fmt.Sprintf("columns %v, indexed %v", a.Schema, b.Schema)
	case !reflect.DeepEqual(a.Megatron, b.Megatron):
		return fmt.Sprintf("megatron %+v, indexed %+v", a.Megatron, b.Megatron)
	}
	return "the stream's settings"
}

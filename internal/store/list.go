package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
)

// ListTree lists every object under st's prefix as List does (sorted by
// key), walking its tree with ListDir: each directory's listing is one
// request stream of its own, parallel of them at once, so a prefix of
// many directories lists in a fraction of one recursive listing's time (a
// store lists a prefix one page of keys after another). progress, when
// set, is called with the objects listed so far after each directory, one
// call at a time.
func ListTree(ctx context.Context, st Store, parallel int, progress func(objects int64)) ([]Object, error) {
	if parallel < 1 {
		parallel = 1
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	var (
		mu  sync.Mutex
		out []Object
	)
	var walk func(dir string) error
	walk = func(dir string) error {
		l, err := st.ListDir(ctx, dir)
		if err != nil {
			return err
		}
		objs := slices.DeleteFunc(l.Objects, func(o Object) bool { return strings.HasSuffix(o.Key, "/") }) // a directory's marker
		mu.Lock()
		out = append(out, objs...)
		if progress != nil { // one call at a time
			progress(int64(len(out)))
		}
		mu.Unlock()
		for _, d := range l.Dirs {
			if d == dir || !strings.HasPrefix(d, dir) || !strings.HasSuffix(d, "/") {
				continue // a marker listed as itself, or not below dir
			}
			if !g.TryGo(func() error { return walk(d) }) {
				if err := walk(d); err != nil { // every worker busy: this one walks it
					return err
				}
			}
		}
		return nil
	}
	g.Go(func() error { return walk("") })
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("listing %s: %w", st.URI(), err)
	}
	slices.SortFunc(out, func(a, b Object) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// ParallelList is a store whose List walks its tree with ListTree.
type ParallelList struct {
	Store
	// Parallel bounds the directories listed at once.
	Parallel int
	// Progress, when set, is told the objects listed so far.
	Progress func(objects int64)
}

// List lists the tree in parallel.
func (p ParallelList) List(ctx context.Context) ([]Object, error) {
	return ListTree(ctx, p.Store, p.Parallel, p.Progress)
}

// Listed is a store whose objects are given (an inventory's, say): List
// and ListDir answer from them, with no request.
type Listed struct {
	Store
	// Objects are the store's objects, sorted by key.
	Objects []Object
}

// List returns the given objects.
func (l Listed) List(context.Context) ([]Object, error) { return slices.Clone(l.Objects), nil }

// ListDir returns one level of the given objects' tree.
func (l Listed) ListDir(_ context.Context, dir string) (Listing, error) {
	if dir != "" {
		if err := CheckKey(strings.TrimSuffix(dir, "/")); err != nil || !strings.HasSuffix(dir, "/") {
			return Listing{}, fmt.Errorf("directory %q is not a plain relative path ending in /", dir)
		}
	}
	var out Listing
	for _, o := range l.Objects {
		rest, ok := strings.CutPrefix(o.Key, dir)
		if !ok {
			continue
		}
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			if d := dir + rest[:i+1]; len(out.Dirs) == 0 || out.Dirs[len(out.Dirs)-1] != d {
				out.Dirs = append(out.Dirs, d)
			}
			continue
		}
		out.Objects = append(out.Objects, o)
	}
	slices.Sort(out.Dirs)
	out.Dirs = slices.Compact(out.Dirs)
	return out, nil
}

package format

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/shardfeed/shardfeed/internal/expr"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/index/sidefile"
	"github.com/shardfeed/shardfeed/internal/store"
)

// PartitionOptions read a stream as a hive-partitioned tree.
type PartitionOptions struct {
	// Select is a CEL expression over the partition columns; "" selects
	// every partition.
	Select string
	// Columns are the partition columns with their types, in the tree's
	// order; nil: named by the tree, typed as pyarrow infers them.
	Columns []indexfile.Field
}

// partitionFile is an object to index, with the values of its partition
// (none outside a partitioned tree).
type partitionFile struct {
	store.Object
	values []*string
}

// branch is a directory of the tree, with the partition values of its path.
type branch struct {
	dir    string
	values []*string
}

// ignored are the names pyarrow's dataset discovery skips.
func ignored(name string) bool { return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") }

// walkPartitions lists a hive-partitioned tree level by level, listing only
// the directories the selection may keep: a directory whose values already
// decide the selection false is never listed. It returns the files (those
// keep takes) of the selected partitions, and the partition columns.
func walkPartitions(ctx context.Context, st store.Store, opts PartitionOptions, keep func(key string) bool) ([]partitionFile, *indexfile.Partitions, error) {
	parts := &indexfile.Partitions{Columns: slices.Clone(opts.Columns), Given: opts.Columns != nil, Select: opts.Select}
	if opts.Select != "" {
		if err := expr.Check(opts.Select); err != nil {
			return nil, nil, fmt.Errorf("partitions.select: %w", err)
		}
	}
	var files []partitionFile
	leafDepth := -1
	level := []branch{{}}
	for depth := 0; len(level) > 0; depth++ {
		var next []branch
		var values []string // this depth's, for inferring its type
		for _, b := range level {
			l, err := st.ListDir(ctx, b.dir)
			if err != nil {
				return nil, nil, err
			}
			var objs []store.Object
			for _, o := range l.Objects {
				if name := path.Base(o.Key); !ignored(name) && !sidefile.Own(name) && keep(o.Key) {
					objs = append(objs, o)
				}
			}
			var dirs []string
			for _, d := range l.Dirs {
				if !ignored(path.Base(d)) {
					dirs = append(dirs, d)
				}
			}
			switch {
			case len(objs) > 0 && len(dirs) > 0:
				return nil, nil, fmt.Errorf("%s%s holds both files and partition directories: a hive-partitioned tree has its files at the leaves", st.URI(), b.dir)
			case len(objs) > 0 && leafDepth >= 0 && leafDepth != depth:
				return nil, nil, fmt.Errorf("%s%s holds files at partition depth %d, others are at depth %d: every file is under one directory per partition column", st.URI(), b.dir, depth, leafDepth)
			case len(objs) > 0:
				leafDepth = depth
				for _, o := range objs {
					files = append(files, partitionFile{Object: o, values: b.values})
				}
			}
			for _, d := range dirs {
				key, raw, ok := strings.Cut(path.Base(d), "=")
				if !ok || key == "" {
					return nil, nil, fmt.Errorf("%s%s is not a key=value directory of a hive-partitioned tree", st.URI(), d)
				}
				v, err := url.PathUnescape(raw)
				if err != nil {
					return nil, nil, fmt.Errorf("%s%s: %w", st.URI(), d, err)
				}
				if err := nameColumn(parts, depth, key, st.URI()+d); err != nil {
					return nil, nil, err
				}
				var value *string
				if v != indexfile.NullPartition {
					value = &v
					values = append(values, v)
				}
				next = append(next, branch{dir: d, values: append(slices.Clip(b.values), value)})
			}
		}
		if len(next) == 0 {
			break
		}
		if !parts.Given {
			parts.Columns[depth].Type = inferType(values)
		}
		var err error
		if next, err = prune(parts, depth, next, st.URI()); err != nil {
			return nil, nil, err
		}
		level = next
	}
	if len(parts.Columns) == 0 {
		return nil, nil, fmt.Errorf("%s has no key=value directories: it is not a hive-partitioned tree (drop partitions, or give the tree's root)", st.URI())
	}
	if parts.Given && leafDepth >= 0 && leafDepth != len(parts.Columns) {
		return nil, nil, fmt.Errorf("%s: files are under %d partition directories, and %d partition columns are given", st.URI(), leafDepth, len(parts.Columns))
	}
	if opts.Select != "" { // every name the selection uses is a column
		if _, err := expr.Compile(opts.Select, exprColumns(parts.Columns)); err != nil {
			return nil, nil, fmt.Errorf("partitions.select: %w", err)
		}
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("%s: partitions.select %q selects no partition's files", st.URI(), opts.Select)
	}
	return files, parts, nil
}

// nameColumn checks (or, when the columns are not given, records) the
// column of the directories at depth.
func nameColumn(parts *indexfile.Partitions, depth int, key, dir string) error {
	switch {
	case depth < len(parts.Columns) && parts.Columns[depth].Name != key:
		return fmt.Errorf("%s: partition column %d is %q, and %q here", dir, depth+1, parts.Columns[depth].Name, key)
	case depth < len(parts.Columns):
		return nil
	case parts.Given:
		return fmt.Errorf("%s: a partition column %q beyond the %d given", dir, key, len(parts.Columns))
	}
	if slices.ContainsFunc(parts.Columns, func(f indexfile.Field) bool { return f.Name == key }) {
		return fmt.Errorf("%s: partition column %q at two depths", dir, key)
	}
	parts.Columns = append(parts.Columns, indexfile.Field{Name: key})
	return nil
}

// inferType is pyarrow's inference of a hive partition column's type:
// int32 where every value is one, else utf8 (utf8 for no value at all).
func inferType(values []string) string {
	if len(values) == 0 {
		return "utf8"
	}
	for _, v := range values {
		if _, err := indexfile.ParsePartitionValue(v, "int32"); err != nil {
			return "utf8"
		}
	}
	return "int32"
}

// prune keeps the branches at depth whose values may be selected.
func prune(parts *indexfile.Partitions, depth int, next []branch, root string) ([]branch, error) {
	known := exprColumns(parts.Columns[:depth+1])
	var e *expr.Expr
	if parts.Select != "" {
		var err error
		if e, err = expr.CompilePartial(parts.Select, known); err != nil {
			return nil, fmt.Errorf("partitions.select: %w", err)
		}
	}
	kept := next[:0]
	for _, b := range next {
		vals := map[string]any{}
		for j, c := range parts.Columns[:depth+1] {
			if b.values[j] == nil {
				vals[c.Name] = nil
				continue
			}
			v, err := indexfile.ParsePartitionValue(*b.values[j], c.Type)
			if err != nil {
				return nil, fmt.Errorf("%s%s: partition %s: %w (give its type in partitions.columns)", root, b.dir, c.Name, err)
			}
			vals[c.Name] = expr.Value(v)
		}
		if e != nil {
			selected, decided, err := e.Decide(vals)
			if err != nil {
				return nil, fmt.Errorf("partitions.select at %s%s: %w", root, b.dir, err)
			}
			if decided && !selected {
				continue // never listed
			}
		}
		kept = append(kept, b)
	}
	return kept, nil
}

func exprColumns(fields []indexfile.Field) []expr.Column {
	out := make([]expr.Column, len(fields))
	for i, f := range fields {
		out[i] = expr.Column{Name: f.Name, Type: f.Type}
	}
	return out
}

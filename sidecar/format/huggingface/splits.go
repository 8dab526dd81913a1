package huggingface

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// dictFile is what DatasetDict.save_to_disk writes beside its splits'
// folders: {"splits": ["train", "test"]}.
const dictFile = "dataset_dict.json"

// maxDictBytes bounds dataset_dict.json, a list of names.
const maxDictBytes = 1 << 20

// cacheName is a datasets cache file's name: <builder>-<split>.arrow, or
// <builder>-<split>-NNNNN-of-NNNNN.arrow when the split is in shards (a
// split's name is \w+(\.\w+)*, as datasets checks; here it starts with a
// letter or _, so a save_to_disk file's data-NNNNN-of-NNNNN is none).
var cacheName = regexp.MustCompile(`^(.+?)-([A-Za-z_][\w.]*?)(?:-\d{5}-of-\d{5})?\.arrow$`)

// mapCache is the name of a file Dataset.map or .filter wrote into the
// cache (cache-<fingerprint>.arrow): rows of some split, made over, not a
// split of its own name.
var mapCache = regexp.MustCompile(`^cache-[0-9a-f]{16}(_\d{5}_of_\d{5})?\.arrow$`)

// splitName is a split's name as datasets allows it.
var splitName = regexp.MustCompile(`^\w+(\.\w+)*$`)

var _ format.Selector = Format{}

// Select implements format.Selector. A DatasetDict's folder (its
// dataset_dict.json names the splits, each in a folder of its name) and a
// datasets cache folder (files named by split) hold several splits: the
// one opts.Own["split"] names is kept, a source of one split is that split, and a
// source of several is refused without a choice, naming them: a split's
// rows are never served with another's (a test split in training).
func (Format) Select(ctx context.Context, st store.Store, listing, files []store.Object, out *indexfile.File, opts format.IndexOptions) ([]store.Object, error) {
	groups, how, err := splitsOf(ctx, st, listing, files)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(groups))
	for name := range groups {
		names = append(names, name)
	}
	slices.Sort(names)
	chosen := opts.Own[splitOption]
	switch {
	case chosen == "" && len(names) <= 1:
		if len(names) == 1 && names[0] != "" {
			out.HuggingFace = &indexfile.HuggingFace{Split: names[0]}
			return groups[names[0]], nil
		}
		return files, nil
	case chosen == "":
		return nil, fmt.Errorf("%s holds the splits %s (%s): choose one, --split %s (spec.streams[].huggingface.split), "+
			"or index that split's files alone; splits are never served together", st.URI(), quoted(names), how, firstTrain(names))
	case !splitName.MatchString(chosen):
		return nil, fmt.Errorf("--split %q is not a split's name (letters, digits and _, parts joined by dots: train, validation, test)", chosen)
	}
	if kept, ok := groups[chosen]; ok && chosen != "" {
		out.HuggingFace = &indexfile.HuggingFace{Split: chosen}
		return kept, nil
	}
	if len(names) == 1 && names[0] == "" && path.Base(strings.TrimSuffix(st.URI(), "/")) == chosen {
		// The split's own folder (a DatasetDict's train/): its files are
		// that split's.
		out.HuggingFace = &indexfile.HuggingFace{Split: chosen}
		return files, nil
	}
	if len(names) == 1 && names[0] == "" {
		return nil, fmt.Errorf("--split %s: %s holds one dataset, not splits (no %s, no files named by split): drop --split", chosen, st.URI(), dictFile)
	}
	return nil, fmt.Errorf("--split %s: %s has no such split; its splits are %s (%s)", chosen, st.URI(), quoted(names), how)
}

// splitsOf groups the files by the split they hold: the folders a
// dataset_dict.json names, else the split in each cache file's name
// ("" for a file named by no split, as save_to_disk's data-NNNNN-of-NNNNN).
// how says where the splits were read.
func splitsOf(ctx context.Context, st store.Store, listing, files []store.Object) (map[string][]store.Object, string, error) {
	groups := map[string][]store.Object{}
	if slices.ContainsFunc(listing, func(o store.Object) bool { return o.Key == dictFile }) {
		splits, err := readDict(ctx, st)
		if err != nil {
			return nil, "", err
		}
		for _, s := range splits {
			groups[s] = nil
		}
		for _, o := range files {
			split, _, found := strings.Cut(o.Key, "/")
			if _, named := groups[split]; found && named {
				groups[split] = append(groups[split], o)
			}
		}
		return groups, "a DatasetDict: " + dictFile, nil
	}
	if saved := savedFolders(listing); len(saved) > 1 {
		// Datasets saved side by side (each split's save_to_disk, with no
		// dataset_dict.json): each folder is one.
		for _, o := range files {
			dir := path.Dir(o.Key)
			if saved[dir] {
				groups[dir] = append(groups[dir], o)
			}
		}
		return groups, "folders each saved by save_to_disk (state.json), with no dataset_dict.json", nil
	}
	for _, o := range files {
		name := ""
		if m := cacheName.FindStringSubmatch(path.Base(o.Key)); m != nil && !mapCache.MatchString(path.Base(o.Key)) {
			name = m[2]
		}
		groups[name] = append(groups[name], o)
	}
	return groups, "files named <builder>-<split>.arrow, as the datasets cache names them", nil
}

// savedFolders are the folders below the stream's (not itself) that hold a
// dataset save_to_disk wrote: its state.json.
func savedFolders(listing []store.Object) map[string]bool {
	out := map[string]bool{}
	for _, o := range listing {
		if dir, base := path.Split(o.Key); base == "state.json" && dir != "" {
			out[strings.TrimSuffix(dir, "/")] = true
		}
	}
	return out
}

// readDict reads the splits a DatasetDict's dataset_dict.json names.
func readDict(ctx context.Context, st store.Store) ([]string, error) {
	body, err := st.Get(ctx, dictFile, 0, -1)
	if err != nil {
		return nil, fmt.Errorf("%s%s: %w", st.URI(), dictFile, err)
	}
	data, err := io.ReadAll(io.LimitReader(body, maxDictBytes+1))
	_ = body.Close()
	if err != nil {
		return nil, fmt.Errorf("%s%s: %w", st.URI(), dictFile, err)
	}
	var dict struct {
		Splits []string `json:"splits"`
	}
	if len(data) > maxDictBytes {
		return nil, fmt.Errorf("%s%s is over %d bytes: not a DatasetDict's list of splits", st.URI(), dictFile, maxDictBytes)
	}
	if err := json.Unmarshal(data, &dict); err != nil {
		return nil, fmt.Errorf("%s%s is not a DatasetDict's {\"splits\": [...]} (%w): save the DatasetDict again, or index one split's folder", st.URI(), dictFile, err)
	}
	if len(dict.Splits) == 0 {
		return nil, fmt.Errorf("%s%s is not a DatasetDict's {\"splits\": [...]}: it names no split; save the DatasetDict again, or index one split's folder", st.URI(), dictFile)
	}
	for _, s := range dict.Splits {
		// Kept as a folder's name: one the datasets package would not
		// name a split (train-clean-100) is still listed, and refused
		// only when chosen.
		if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\\\x00") {
			return nil, fmt.Errorf("%s%s names a split %q, which is not a folder's name", st.URI(), dictFile, s)
		}
	}
	return dict.Splits, nil
}

func quoted(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		if n == "" {
			n = "(unnamed)"
		}
		out[i] = n
	}
	return strings.Join(out, ", ")
}

// firstTrain is the split to suggest: train if there is one.
func firstTrain(names []string) string {
	if slices.Contains(names, "train") {
		return "train"
	}
	for _, n := range names {
		if n != "" {
			return n
		}
	}
	return "NAME"
}

package huggingface_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formattest"
	"github.com/shardfeed/shardfeed/sidecar/format/huggingface"
)

// Which files of a folder are a split's, by the folder's own description
// (dataset_dict.json) or the cache's file names; the oracle test checks
// the rows against datasets.
func TestSelectKeepsOneSplit(t *testing.T) {
	dict := map[string]string{
		"dataset_dict.json":               `{"splits": ["train", "test"]}`,
		"train/data-00000-of-00002.arrow": "", "train/data-00001-of-00002.arrow": "", "train/state.json": "{}",
		"test/data-00000-of-00001.arrow": "", "stray.arrow": "",
	}
	cache := map[string]string{
		"dataset_info.json":               "{}",
		"json-train-00000-of-00002.arrow": "", "json-train-00001-of-00002.arrow": "",
		"json-validation.arrow": "", "my-data-test-00000-of-00001.arrow": "",
	}
	disk := map[string]string{"data-00000-of-00002.arrow": "", "data-00001-of-00002.arrow": "", "state.json": "{}"}
	// Each split saved on its own (dd[s].save_to_disk(f"out/{s}")): no
	// dataset_dict.json; its splits were served together.
	saved := map[string]string{
		"train/data-00000-of-00001.arrow": "", "train/state.json": "{}", "train/dataset_info.json": "{}",
		"test/data-00000-of-00001.arrow": "", "test/state.json": "{}", "test/dataset_info.json": "{}",
	}
	hyphen := map[string]string{
		"dataset_dict.json":               `{"splits": ["train", "train-clean-100"]}`,
		"train/data-00000-of-00001.arrow": "", "train-clean-100/data-00000-of-00001.arrow": "",
	}
	for _, c := range []struct {
		name  string
		files map[string]string
		dir   string // the stream's folder under the temporary one
		split string
		want  []string // the files kept, or
		err   string   // the refusal
		rec   string   // the split the index records
	}{
		{name: "dict, no split", files: dict, err: "holds the splits test, train (a DatasetDict: dataset_dict.json): choose one, --split train"},
		{name: "dict, train", files: dict, split: "train", want: []string{"train/data-00000-of-00002.arrow", "train/data-00001-of-00002.arrow"}, rec: "train"},
		{name: "dict, test", files: dict, split: "test", want: []string{"test/data-00000-of-00001.arrow"}, rec: "test"},
		{name: "dict, unknown", files: dict, split: "dev", err: "has no such split; its splits are test, train"},
		{name: "dict, not json", files: map[string]string{"dataset_dict.json": "{", "a/x.arrow": ""}, err: "is not a DatasetDict's"},
		{name: "dict, bad name", files: map[string]string{"dataset_dict.json": `{"splits": ["../x"]}`, "a/x.arrow": ""}, err: "which is not a folder's name"},
		{name: "cache, no split", files: cache, err: "holds the splits test, train, validation (files named"},
		{name: "cache, train", files: cache, split: "train", want: []string{"json-train-00000-of-00002.arrow", "json-train-00001-of-00002.arrow"}, rec: "train"},
		{name: "cache, hyphenated builder", files: cache, split: "test", want: []string{"my-data-test-00000-of-00001.arrow"}, rec: "test"},
		{name: "cache of one split", files: map[string]string{"generator-train.arrow": ""}, want: []string{"generator-train.arrow"}, rec: "train"},
		{name: "save_to_disk", files: disk, want: []string{"data-00000-of-00002.arrow", "data-00001-of-00002.arrow"}},
		{name: "save_to_disk, a split", files: disk, split: "train", err: "holds one dataset, not splits"},
		{name: "a split's own folder", files: disk, dir: "train", split: "train", want: []string{"data-00000-of-00002.arrow", "data-00001-of-00002.arrow"}, rec: "train"},
		{name: "a name that is none", files: cache, split: "a/b", err: "is not a split's name"},
		{name: "cache with a map's output", files: map[string]string{"json-train.arrow": "", "cache-adf97786a958c53b.arrow": ""},
			err: "holds the splits (unnamed), train (files named"},
		{name: "cache with a map's output, train", files: map[string]string{"json-train.arrow": "", "cache-adf97786a958c53b.arrow": ""},
			split: "train", want: []string{"json-train.arrow"}, rec: "train"},
		{name: "saved side by side, no split", files: saved, err: "holds the splits test, train (folders each saved by save_to_disk"},
		{name: "saved side by side, train", files: saved, split: "train", want: []string{"train/data-00000-of-00001.arrow"}, rec: "train"},
		{name: "dict of a name datasets would not split by", files: hyphen, split: "train", want: []string{"train/data-00000-of-00001.arrow"}, rec: "train"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), c.dir)
			for name, body := range c.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			st := formattest.OpenDir(t, root)
			listing, err := st.List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var files []store.Object
			for _, o := range listing {
				if strings.HasSuffix(o.Key, ".arrow") {
					files = append(files, o)
				}
			}
			out := &indexfile.File{}
			kept, err := huggingface.Format{}.Select(context.Background(), st, listing, files, out, format.IndexOptions{Own: map[string]string{"split": c.split}})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, want an error saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, o := range kept {
				keys = append(keys, o.Key)
			}
			slices.Sort(keys)
			if !slices.Equal(keys, c.want) {
				t.Fatalf("kept %v, want %v", keys, c.want)
			}
			got := ""
			if out.HuggingFace != nil {
				got = out.HuggingFace.Split
			}
			if got != c.rec {
				t.Fatalf("the index records split %q, want %q", got, c.rec)
			}
		})
	}
}

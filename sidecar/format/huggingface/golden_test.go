package huggingface_test

// Hugging Face datasets written by datasets itself, and what datasets reads
// of them, recorded in testdata/golden (test/oracle/hf_oracle.py record;
// make golden): save_to_disk directories, a DatasetDict's split and cache
// directories, indexed by shardfeed index and read shard by shard as a pod
// reads them (its batches' range and the schema message): every row equals
// what datasets reads, in order.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
	"github.com/shardfeed/shardfeed/sidecar/format/formattest"
	"github.com/shardfeed/shardfeed/sidecar/format/huggingface"
)

// written is what hf_oracle.py's write printed of a recorded case, its
// folders relative to the recording.
type written struct {
	Stream   string `json:"stream"`
	Dict     string `json:"dict"`
	File     string `json:"file"`
	TestFile string `json:"test_file"`
	Files    int    `json:"files"`
}

// recorded returns what write printed of a recorded case, its folders
// under golden.
func recorded(t *testing.T, golden, kase string) written {
	t.Helper()
	var w written
	if err := json.Unmarshal(testenv.GoldenFile(t, golden, kase+".written.json"), &w); err != nil {
		t.Fatal(err)
	}
	w.Stream = filepath.Join(golden, w.Stream)
	if w.Dict != "" {
		w.Dict = filepath.Join(golden, w.Dict)
	}
	return w
}

// answers reads what datasets read of a recorded stream or split.
func answers(t *testing.T, golden, name string) []string {
	t.Helper()
	return formattest.Lines(t, testenv.GoldenFile(t, golden, name+".jsonl"))
}

func TestHuggingFaceServesDatasetsRows(t *testing.T) {
	golden := testenv.Golden(t)
	for _, c := range []struct{ kase, answers string }{{"disk", "disk"}, {"dict", "dict-train"}, {"cache", "cache"}} {
		t.Run(c.kase, func(t *testing.T) {
			t.Parallel()
			kase := c.kase
			w := recorded(t, golden, kase)
			want := answers(t, golden, c.answers)
			ctx := context.Background()
			st := formattest.OpenDir(t, w.Stream)
			// Small shards: a shard a record batch or two.
			f := formattest.Index(t, st, datav1alpha1.FormatHuggingFace, format.IndexOptions{ShardBytes: 8 << 10})
			if len(f.Shards) < 2*w.Files {
				t.Fatalf("%d shards of %d files: each should hold several", len(f.Shards), w.Files)
			}
			r := formattest.Open(t, f)
			schema, err := r.Schema(ctx, format.StoreRead(st))
			if err != nil {
				t.Fatal(err)
			}
			label := schema.Field(schema.FieldIndices("label")[0])
			if names, _ := label.Metadata.GetValue(huggingface.MetaClassNames); names != `["cat","dog","bird"]` {
				t.Fatalf("the ClassLabel's names in its metadata are %q", names)
			}
			formattest.Compare(t, kase, "datasets", formattest.Rows(t, st, f, nil), want)
		})
	}
}

// A file that is not an Arrow stream, or is cut short, is refused naming
// it; files of two schemas in one stream are refused.
func TestHuggingFaceRefusals(t *testing.T) {
	golden := testenv.Golden(t)
	w := recorded(t, golden, "disk")
	good, err := os.ReadFile(filepath.Join(w.Stream, "data-00000-of-00003.arrow"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"truncated", good[:len(good)/2], "past the end"},
		{"not arrow", []byte("PAR1 not a stream at all"), "not a Hugging Face dataset's Arrow stream file"},
		{"metadata", append([]byte{0xff, 0xff, 0xff, 0xff, 0x10, 0, 0, 0}, bytes.Repeat([]byte{0xee}, 16)...), "corrupt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := t.TempDir()
			if err := os.WriteFile(filepath.Join(d, "data.arrow"), c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := formats.Default().Index(context.Background(), formattest.OpenDir(t, d), datav1alpha1.FormatHuggingFace, format.IndexOptions{})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "data.arrow") {
				t.Fatalf("got %v, want an error naming data.arrow and saying %q", err, c.want)
			}
		})
	}
	t.Run("two schemas", func(t *testing.T) {
		other := recorded(t, golden, "cache")
		d := t.TempDir()
		cache, _ := filepath.Glob(filepath.Join(other.Stream, "*.arrow"))
		_ = os.WriteFile(filepath.Join(d, "a.arrow"), good, 0o600)
		b, _ := os.ReadFile(cache[0])
		// A column renamed in the second file's schema: the same bytes
		// but for the name.
		_ = os.WriteFile(filepath.Join(d, "b.arrow"), bytes.ReplaceAll(b, []byte("score"), []byte("scorf")), 0o600)
		_, err := formats.Default().Index(context.Background(), formattest.OpenDir(t, d), datav1alpha1.FormatHuggingFace, format.IndexOptions{})
		if err == nil || !strings.Contains(err.Error(), "one stream is one dataset split") {
			t.Fatalf("got %v, want files of two schemas refused", err)
		}
	})
}

// A DatasetDict's folder and a datasets cache folder of two splits were
// indexed as one stream: train and test served together (234 of 1,234
// rows served were test rows). A split is chosen, and the rows are that
// split's alone, as datasets reads it; without a choice the source is
// refused, naming its splits.
func TestHuggingFaceSplitsAreNeverMixed(t *testing.T) {
	golden := testenv.Golden(t)
	dict, built := recorded(t, golden, "dict"), recorded(t, golden, "builder")
	indexOf := func(dir, split string) (*indexfile.File, error) {
		return formats.Default().Index(context.Background(), formattest.OpenDir(t, dir), datav1alpha1.FormatHuggingFace,
			format.IndexOptions{ShardBytes: 8 << 10, Own: map[string]string{"split": split}})
	}
	for _, c := range []struct {
		name, dir, split string
		want             string // the oracle's read of the split
		refused          string
	}{
		{"dict, no split", dict.Dict, "", "", "holds the splits test, train (a DatasetDict: dataset_dict.json): choose one, --split train"},
		{"dict, train", dict.Dict, "train", "dict-train", ""},
		{"dict, test", dict.Dict, "test", "dict-test", ""},
		{"dict, no such split", dict.Dict, "validation", "", "has no such split; its splits are test, train"},
		{"dict's train folder", dict.Stream, "train", "dict-train", ""},
		{"dict's train folder, another split", dict.Stream, "test", "", "holds one dataset, not splits"},
		{"cache, no split", built.Stream, "", "", "holds the splits test, train (files named <builder>-<split>.arrow"},
		{"cache, train", built.Stream, "train", "builder-train", ""},
		{"cache, test", built.Stream, "test", "builder-test", ""},
		{"not a split's name", built.Stream, "a/b", "", "is not a split's name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := indexOf(c.dir, c.split)
			if c.refused != "" {
				if err == nil || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("got %v, want a refusal saying %q", err, c.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.HuggingFace == nil || f.HuggingFace.Split != c.split {
				t.Fatalf("the index records split %+v, want %q", f.HuggingFace, c.split)
			}
			want := answers(t, golden, c.want)
			formattest.Compare(t, c.name, "datasets", formattest.Rows(t, formattest.OpenDir(t, c.dir), f, nil), want)
			// The source compared with the index is listed as the index
			// was, by the split it records: unchanged.
			if ch, err := formats.Default().Changes(context.Background(), formattest.OpenDir(t, c.dir), f, format.TableOptions{}); err != nil || !ch.None() {
				t.Fatalf("the source compared with its index of split %s: %v, %v", c.split, ch, err)
			}
		})
	}
}

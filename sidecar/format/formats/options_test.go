package formats

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// rowsFormat is a format written for this test: each *.rows object is one
// shard of as many samples as its "rows-per-object" option says, the
// option only it takes.
type rowsFormat struct{}

func (rowsFormat) Kind() datav1alpha1.ShardFormat { return "rows" }
func (rowsFormat) Suffixes() []string             { return []string{".rows"} }
func (rowsFormat) Open(*index.Layout) (format.Reader, error) {
	return nil, nil
}

func (rowsFormat) Options() []format.Option {
	return []format.Option{{Flag: "rows-per-object", Field: "spec.streams[].rows.perObject", Help: "the samples of an object", Count: "samples",
		Spec: func(*datav1alpha1.Stream) string { return "" }}}
}

func (rowsFormat) IndexObject(_ context.Context, _ store.Store, o store.Object, f *indexfile.File, opts format.IndexOptions) error {
	n, err := opts.OwnCount("rows-per-object")
	if err != nil {
		return err
	}
	f.Shards = append(f.Shards, indexfile.Entry{Name: o.Key, Object: o.Key, Length: o.Size, Samples: max(n, 1)})
	return nil
}

// A format's own option reaches that format alone: the registry lists it
// by the format, hands its value to the format, and refuses it, or one of
// another format's, for a stream of another format, naming the format it
// is for.
func TestAFormatsOwnOptionsReachItAlone(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.rows", "b.rows", "c.jsonl"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{\"x\": 1}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	st, err := stores.Open(ctx, store.Source{URI: "file://" + dir + "/"})
	if err != nil {
		t.Fatal(err)
	}
	reg := Default()
	reg.Register(rowsFormat{})
	if opts := reg.Options("rows"); len(opts) != 1 || opts[0].Flag != "rows-per-object" {
		t.Fatalf("the registry lists %+v of the format's own", opts)
	}
	f, err := reg.Index(ctx, st, "rows", format.IndexOptions{Own: map[string]string{"rows-per-object": "7"}})
	if err != nil || f.StreamIndex().Samples() != 14 {
		t.Fatalf("indexed %v, %v: want 2 objects of 7 samples", f, err)
	}
	for _, c := range []struct {
		name string
		kind datav1alpha1.ShardFormat
		own  map[string]string
		err  string
	}{
		{"another format's count", datav1alpha1.FormatJSONL, map[string]string{"rows-per-object": "7"},
			"--rows-per-object 7 is for --format rows, a number of samples of 1 or more"},
		{"a count of none", "rows", map[string]string{"rows-per-object": "-2"}, "--rows-per-object -2 is for --format rows, a number of samples of 1 or more"},
		{"not a count", "rows", map[string]string{"rows-per-object": "many"}, "--rows-per-object many is for --format rows"},
		{"megatron's unit", "rows", map[string]string{"unit": "sequence"}, "--unit is for --format megatron, not rows"},
		{"huggingface's split", datav1alpha1.FormatJSONL, map[string]string{"split": "train"},
			"--split is for --format huggingface (a DatasetDict's or a datasets cache's split), not jsonl"},
		{"no format's", datav1alpha1.FormatJSONL, map[string]string{"colour": "red"}, "--colour is an option of no format"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := reg.Index(ctx, st, c.kind, format.IndexOptions{Own: c.own})
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("got %v, want %q", err, c.err)
			}
		})
	}
	// Not given: "" and a count's 0.
	if _, err := reg.Index(ctx, st, datav1alpha1.FormatJSONL, format.IndexOptions{Own: map[string]string{"rows-per-object": "0", "unit": ""}}); err != nil {
		t.Fatal(err)
	}
}

// Every format's own options are complete (a flag, the manifest's field,
// help, a manifest reader), and no two formats take the same flag: the
// CLI makes one flag of each.
func TestEveryFormatsOwnOptionsAreCompleteAndDistinct(t *testing.T) {
	reg := Default()
	seen := map[string]string{}
	for _, kind := range reg.Kinds(func(format.Format) bool { return true }) {
		for _, o := range reg.Options(datav1alpha1.ShardFormat(kind)) {
			if o.Flag == "" || !strings.HasPrefix(o.Field, "spec.streams[].") || o.Help == "" || o.Spec == nil {
				t.Errorf("%s: option %+v lacks a flag, a field, help or a manifest reader", kind, o)
			}
			if other, ok := seen[o.Flag]; ok {
				t.Errorf("--%s is both %s's and %s's", o.Flag, other, kind)
			}
			seen[o.Flag] = kind
		}
	}
	for flag, kind := range map[string]string{"unit": "megatron", "block-size": "litdata", "split": "huggingface"} {
		if seen[flag] != kind {
			t.Errorf("--%s is %q's, want %s's", flag, seen[flag], kind)
		}
	}
	// Each reads its value off a manifest's stream.
	s := datav1alpha1.Stream{Megatron: &datav1alpha1.MegatronStream{Unit: "sequence"}, LitData: &datav1alpha1.LitDataStream{BlockSize: 64},
		HuggingFace: &datav1alpha1.HuggingFaceStream{Split: "train"}}
	for kind, want := range map[datav1alpha1.ShardFormat]string{datav1alpha1.FormatMegatron: "sequence", datav1alpha1.FormatLitData: strconv.Itoa(64),
		datav1alpha1.FormatHuggingFace: "train"} {
		if got := reg.Options(kind)[0].Spec(&s); got != want {
			t.Errorf("%s reads %q off the manifest, want %q", kind, got, want)
		}
		if got := reg.Options(kind)[0].Spec(&datav1alpha1.Stream{}); got != "" {
			t.Errorf("%s reads %q off a stream without its section", kind, got)
		}
	}
}

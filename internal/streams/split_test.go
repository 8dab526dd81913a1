package streams

import (
	"strings"
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
)

// A stream that chooses a split plans only over an index of that split,
// and the command it asks for indexes that split.
func TestASplitIsCheckedAgainstItsIndex(t *testing.T) {
	s := datav1alpha1.Stream{Name: "web", Format: datav1alpha1.FormatHuggingFace, Source: datav1alpha1.Source{URI: "s3://b/dict/"},
		HuggingFace: &datav1alpha1.HuggingFaceStream{Split: "train"}}
	for _, c := range []struct {
		got  *indexfile.HuggingFace
		want string
	}{
		{&indexfile.HuggingFace{Split: "train"}, ""},
		{&indexfile.HuggingFace{Split: "test"}, "its index is of split test: re-run shardfeed index (shardfeed index s3://b/dict/ --format huggingface --split train)"},
		{nil, "its index was written with no split chosen"},
	} {
		err := checkSplit(0, s, c.got)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("index of %+v: %v, want %q", c.got, err, c.want)
		}
	}
}

// A Lance stream asking for a column its index did not keep names the
// command that indexes it (the reader alone said "re-run shardfeed index
// --columns with it").
func TestALanceColumnNotIndexedNamesTheCommand(t *testing.T) {
	s := datav1alpha1.Stream{Name: "t", Format: datav1alpha1.FormatLance, Source: datav1alpha1.Source{URI: "s3://b/t.lance/"}, Columns: []string{"id", "text"}}
	l := &indexfile.Lance{Root: "s3://b/t.lance/", Columns: []string{"id"}}
	err := checkLance(0, s, l)
	if err == nil || !strings.Contains(err.Error(), `asks for "text", which its index did not keep (it keeps id): re-run shardfeed index (shardfeed index s3://b/t.lance/ --format lance --columns 'id,text')`) {
		t.Fatalf("got %v", err)
	}
	s.Columns = nil
	if err := checkLance(0, s, l); err == nil || !strings.Contains(err.Error(), "asks for every column") {
		t.Fatalf("every column: %v", err)
	}
	s.Columns = []string{"id"}
	if err := checkLance(0, s, l); err != nil {
		t.Fatalf("a column kept: %v", err)
	}
}

// A tokenized stream's packs are counted by index -f, which loads (and
// checks) the tokenizer: the command of flags alone it once suggested read
// the source's column of the packed name and failed ("no column
// input_ids"), hiding the tokenizer's wrong sha256.
func TestThePacksOfATokenizedStreamAreCountedFromTheManifest(t *testing.T) {
	s := datav1alpha1.Stream{Name: "web", Format: datav1alpha1.FormatParquet, Source: datav1alpha1.Source{URI: "s3://b/web/"},
		Tokenize: &datav1alpha1.Tokenize{Column: "text"}}
	p := &datav1alpha1.Packing{Column: "input_ids", SequenceLength: 2048}
	if got := PacksCommand(s, p); got != "shardfeed index -f <the TrainingDataset's manifest> --stream web --selection-only" {
		t.Errorf("tokenized: %q", got)
	}
	s.Tokenize = nil
	if got := PacksCommand(s, p); !strings.HasPrefix(got, "shardfeed index s3://b/web/ --format parquet --selection-only --lengths 'input_ids' --pack-length 2048") {
		t.Errorf("plain: %q", got)
	}
}

package lancetable

import (
	"errors"
	"strings"
	"testing"
)

// The refusals a table's manifest alone decides, for what pylance 14 does
// not write (data overlays, covering indices, flags of later Lance
// versions, branches): each names what was found and what to do.
func TestCheckFlagsRefusals(t *testing.T) {
	v21 := []DataFile{{Path: "a.lance", Major: 2, Minor: 1}}
	for _, c := range []struct {
		name string
		m    Manifest
		want string // "" reads
	}{
		{"deletions and stable row ids", Manifest{ReaderFlags: FlagDeletionFiles | FlagStableRowIDs, Fragments: []Fragment{{Files: v21}}}, ""},
		{"2.0 files", Manifest{Fragments: []Fragment{{Files: []DataFile{{Path: "a.lance", Major: 2, Minor: 0}}}}}, ""},
		{"data overlays flag", Manifest{ReaderFlags: FlagDataOverlays}, "data overlay files"},
		{"an overlay in a fragment", Manifest{Fragments: []Fragment{{ID: 3, Overlays: true, Files: v21}}}, "fragment 3: it has data overlay files"},
		{"covering indices", Manifest{ReaderFlags: FlagCoveringIndices}, "covering indices"},
		{"base paths", Manifest{ReaderFlags: FlagBasePaths}, "several base paths"},
		{"a file under another base", Manifest{Fragments: []Fragment{{ID: 1, Files: []DataFile{{Path: "a.lance", Major: 2, Minor: 2, BaseID: true}}}}}, "several base paths"},
		{"an unknown flag", Manifest{ReaderFlags: 1 << 9}, "flag 512: the flag is unknown"},
		{"a branch", Manifest{Branch: "dev", Fragments: []Fragment{{Files: v21}}}, `on branch "dev"`},
		{"a legacy file", Manifest{Fragments: []Fragment{{Files: []DataFile{{Path: "old.lance", Major: 0, Minor: 2}}}}}, "file version legacy 0.2"},
		{"a 2.3 file", Manifest{Fragments: []Fragment{{Files: []DataFile{{Path: "new.lance", Major: 2, Minor: 3}}}}}, "file version 2.3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.m.CheckFlags()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want == "":
			case err == nil:
				t.Fatalf("read; want a refusal saying %q", c.want)
			case !strings.Contains(err.Error(), c.want):
				t.Fatalf("refusal %q does not say %q", err, c.want)
			case !errors.Is(err, ErrUnsupported) && !strings.Contains(err.Error(), "unsupported"):
				t.Fatalf("refusal %q is not an unsupported-table error", err)
			}
		})
	}
}

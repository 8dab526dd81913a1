package source

import (
	"context"
	"fmt"

	"github.com/shardfeed/shardfeed/internal/streams"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// Changed is a stream whose source changed since its index was written.
type Changed struct {
	Stream string
	Change *format.Change
	// Err, instead of Change, says why the source could not be compared.
	Err error
}

// Changes compares each stream's source with its index, as `shardfeed
// index` would list it now (format.Registry.Changes): the streams whose
// source changed, and those that could not be compared. Streams of an
// index that is not shardfeed's own (MDS's), or read in parts, are not
// compared.
func Changes(ctx context.Context, reg format.Registry, opened []*streams.Stream) []Changed {
	var out []Changed
	for _, st := range opened {
		if st == nil || st.Layout == nil {
			continue
		}
		f := st.Layout.File
		if f == nil {
			continue
		}
		c, err := reg.Changes(ctx, st.Store, f, format.TableChangeOptions(st.Spec))
		switch {
		case err != nil:
			out = append(out, Changed{Stream: st.Spec.Name, Err: err})
		case !c.None():
			out = append(out, Changed{Stream: st.Spec.Name, Change: c})
		}
	}
	return out
}

// Message says what changed and what it means for a plan made of the
// index: the job keeps it; a new index, made by command, reads the source
// as it is now.
func (c Changed) Message(command string) string {
	if c.Err != nil {
		return fmt.Sprintf("stream %q: its source could not be compared with its index (%v); the plan is of the index as it is", c.Stream, c.Err)
	}
	return fmt.Sprintf("stream %q: its source changed since it was indexed: %s. The plan is of the index as it was written: "+
		"it reads no object added since, and a shard of an object removed or changed fails its read; "+
		"to read the source as it is now, index it again (%s) and start a new job", c.Stream, c.Change, command)
}

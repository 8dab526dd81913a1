package sidefile

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
)

// KeptDir holds the indexes `shardfeed index` replaced, each with the
// files beside it (its selections, lengths and packs), under the content
// hash of its shards: a job that committed on one resumes on it (shardfeed
// serve points the stream's index URI there), whatever indexed the stream
// again since.
const KeptDir = indexfile.Dir + "/kept/"

var contentHash = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Keep copies the files of the index at st (those directly in
// _shardfeed/) under KeptDir/<hash>/_shardfeed/, before an index of other
// content replaces them; hash is their index's content hash. It returns
// how many files it copied.
func Keep(ctx context.Context, st store.Store, hash string) (int, error) {
	if !contentHash.MatchString(hash) {
		return 0, fmt.Errorf("%q is not an index's content hash", hash)
	}
	l, err := st.ListDir(ctx, indexfile.Dir+"/")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, o := range l.Objects {
		if strings.HasPrefix(o.Key, indexfile.Dir+"/index.partial") {
			continue // a checkpoint of an index not written
		}
		n++
		if err := copyObject(ctx, st, o, KeptDir+hash+"/"+o.Key); err != nil {
			return 0, fmt.Errorf("keeping %s%s: %w", st.URI(), o.Key, err)
		}
	}
	return n, nil
}

func copyObject(ctx context.Context, st store.Store, o store.Object, to string) error {
	r, err := st.Get(ctx, o.Key, 0, -1)
	if err != nil {
		return err
	}
	defer func() { _ = r.Close() }()
	if err := st.Put(ctx, to, io.LimitReader(r, o.Size), o.Size); err != nil {
		return err
	}
	return nil
}

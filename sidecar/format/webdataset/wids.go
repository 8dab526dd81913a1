package webdataset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// wids' shard index, which `widsindex create` (webdataset's indexed
// dataset, wids) writes: a JSON list of the tars with each one's sample
// count and size. It holds no sample's offset, so a tar it lists is one
// shard, read whole.
const (
	widsIndexName = "shardindex.json"
	widsKind      = "wids-shard-index-v1"
	maxWidsIndex  = 64 << 20
)

type widsShard struct {
	URL      string `json:"url"`
	NSamples *int64 `json:"nsamples"`
	FileSize *int64 `json:"filesize"`
}

type widsFile struct {
	Kind      string          `json:"__kind__"`
	Version   *int            `json:"wids_version"`
	Shardlist []widsShard     `json:"shardlist"`
	Base      string          `json:"base"`
	Datasets  json.RawMessage `json:"datasets"`
}

// widsIndex indexes the tars from wids' shardindex.json at the stream's
// root: each tar one shard of the samples the index counts, reading only
// the first tar's headers (the stream's extensions, and a check of the
// index's count against the tar). ok false (and no error) when there is
// no such index, or when it does not describe every tar as it is (then
// every tar's headers are read, and opts.Note says why).
func widsIndex(ctx context.Context, st store.Store, objects []store.Object, opts format.IndexOptions) (out []tarIndex, exts map[string]bool, ok bool, err error) {
	wf, err := readWids(ctx, st)
	if wf == nil || err != nil || len(objects) == 0 {
		return nil, nil, false, err
	}
	fallBack := func(why string) ([]tarIndex, map[string]bool, bool, error) {
		note(opts, fmt.Sprintf("wids' shard index (%s) %s: reading the tars' headers instead", widsIndexName, why))
		return nil, nil, false, nil
	}
	if len(wf.Datasets) > 0 && string(wf.Datasets) != "null" {
		return fallBack("names sub-datasets, which shardfeed does not follow")
	}
	counts := map[string]widsShard{}
	for _, s := range wf.Shardlist {
		key, local := widsKey(st, wf.Base, s.URL)
		if !local {
			return fallBack(fmt.Sprintf("lists %q, which is not under %s", s.URL, st.URI()))
		}
		counts[key] = s
	}
	for _, o := range objects {
		s, listed := counts[o.Key]
		switch {
		case !listed:
			return fallBack("does not list " + o.Key)
		case s.FileSize != nil && *s.FileSize != o.Size:
			return fallBack(fmt.Sprintf("gives %s %d bytes, and it has %d (re-run widsindex create)", o.Key, *s.FileSize, o.Size))
		}
	}
	out = make([]tarIndex, len(objects))
	first := objects[0]
	if out[0], err = indexTar(ctx, st, first, opts); err != nil {
		return nil, nil, false, fmt.Errorf("%s%s: %w", st.URI(), first.Key, err)
	}
	var found int64
	for _, e := range out[0].shards {
		found += e.Samples
	}
	if want := *counts[first.Key].NSamples; found != want {
		return fallBack(fmt.Sprintf("counts %d samples in %s, and its headers %d (re-run widsindex create)", want, first.Key, found))
	}
	if opts.Progress != nil {
		opts.Progress(1, len(objects), first.Key)
	}
	for i, o := range objects[1:] {
		out[i+1] = tarIndex{}
		if n := *counts[o.Key].NSamples; n > 0 {
			out[i+1].shards = []indexfile.Entry{{Object: o.Key, Offset: 0, Length: o.Size, ObjectSize: o.Size, Samples: n}}
		}
		if opts.Progress != nil {
			opts.Progress(i+2, len(objects), o.Key)
		}
	}
	note(opts, fmt.Sprintf("reused wids' shard index (%s): a shard per tar, read whole; only %s's headers read "+
		"(move the index aside for shards of whole samples cut by each tar's headers, fetched by range)", widsIndexName, first.Key))
	return out, out[0].exts, true, nil
}

// readWids reads and checks shardindex.json; nil when there is none.
func readWids(ctx context.Context, st store.Store) (*widsFile, error) {
	r, err := st.Get(ctx, widsIndexName, 0, -1)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(r, maxWidsIndex+1))
	_ = r.Close()
	if err != nil {
		return nil, err
	}
	where := st.URI() + widsIndexName
	fix := "re-run widsindex create, or move it aside to index the tars by their headers"
	if len(data) > maxWidsIndex {
		return nil, fmt.Errorf("%s is larger than %d bytes: %s", where, maxWidsIndex, fix)
	}
	var wf widsFile
	if err := json.Unmarshal(data, &wf); err != nil {
		return nil, fmt.Errorf("%s is not wids' shard index: %w; %s", where, err, fix)
	}
	if wf.Version == nil || *wf.Version != 1 {
		return nil, fmt.Errorf("%s is not a wids shard index of version 1 (wids_version %v): %s", where, versionOf(wf.Version), fix)
	}
	if wf.Kind != "" && wf.Kind != widsKind {
		return nil, fmt.Errorf("%s is a %q, not a %q: %s", where, wf.Kind, widsKind, fix)
	}
	for i, s := range wf.Shardlist {
		switch {
		case s.URL == "":
			return nil, fmt.Errorf("%s: shard %d has no url: %s", where, i, fix)
		case s.NSamples == nil || *s.NSamples < 0:
			return nil, fmt.Errorf("%s: %s has no count of samples (nsamples) of 0 or more: %s", where, s.URL, fix)
		case s.FileSize != nil && *s.FileSize < 0:
			return nil, fmt.Errorf("%s: %s has a filesize of %d: %s", where, s.URL, *s.FileSize, fix)
		}
	}
	return &wf, nil
}

func versionOf(v *int) any {
	if v == nil {
		return "missing"
	}
	return *v
}

// widsKey is the object key of a shard's url as wids resolves it (against
// the index's base, else the index's directory: the stream's root), and
// whether it is in the stream's store at all.
func widsKey(st store.Store, base, url string) (string, bool) {
	if base != "" && !strings.Contains(url, "://") && !strings.HasPrefix(url, "/") {
		url = strings.TrimSuffix(base, "/") + "/" + url
	}
	root := st.URI()
	switch {
	case strings.Contains(url, "://"):
		if !strings.HasPrefix(url, root) {
			return "", false
		}
		url = strings.TrimPrefix(url, root)
	case strings.HasPrefix(url, "/"):
		// An absolute path: the stream's own if it is a file:// stream's.
		if !strings.HasPrefix("file://"+url, root) {
			return "", false
		}
		url = strings.TrimPrefix("file://"+url, root)
	}
	key := path.Clean(url)
	if key == "." || strings.HasPrefix(key, "../") || key == ".." || strings.HasPrefix(key, "/") {
		return "", false
	}
	return key, true
}

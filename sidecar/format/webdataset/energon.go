package webdataset

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// Megatron-Energon's index, which `energon prepare` writes beside the
// tars: .nv-meta/.info.json (each tar's sample count),
// .nv-meta/index.sqlite (each sample's parts) and a <tar>.idx beside each
// tar (each sample's byte offset, then the last one's end, as uint64s).
const (
	energonInfo   = ".nv-meta/.info.json"
	energonSQLite = ".nv-meta/index.sqlite"
	energonIdx    = ".idx"
)

// maxEnergonInfo bounds the .info.json read; sqliteBlock is what one
// ranged read of the sqlite database fetches.
const (
	maxEnergonInfo = 64 << 20
	sqliteBlock    = 1 << 20
)

// energonIndex indexes the tars from Megatron-Energon's index, reading no
// tar: ok false (and no error) when there is none, or when it does not
// cover every tar (then the tars' headers are read).
func energonIndex(ctx context.Context, st store.Store, objects []store.Object, opts format.IndexOptions) (out []tarIndex, exts map[string]bool, ok bool, err error) {
	counts, err := energonCounts(ctx, st)
	if counts == nil || err != nil {
		return nil, nil, false, err
	}
	for _, o := range objects {
		if _, listed := counts[o.Key]; !listed || compressed(o.Key) {
			note(opts, fmt.Sprintf("Megatron-Energon's index (%s) does not list %s: reading the tars' headers instead", energonInfo, o.Key))
			return nil, nil, false, nil
		}
	}
	if exts, err = energonParts(ctx, st); err != nil {
		return nil, nil, false, fmt.Errorf("%s%s: %w", st.URI(), energonSQLite, err)
	}
	out = make([]tarIndex, len(objects))
	for i, o := range objects {
		if out[i], err = energonTar(ctx, st, o, counts[o.Key], opts); err != nil {
			return nil, nil, false, fmt.Errorf("%s%s%s: %w", st.URI(), o.Key, energonIdx, err)
		}
		if opts.Progress != nil {
			opts.Progress(i+1, len(objects), o.Key)
		}
	}
	note(opts, fmt.Sprintf("reused Megatron-Energon's index (%s, %s and each tar's %s): no tar read", energonInfo, energonSQLite, energonIdx))
	return out, exts, true, nil
}

func note(opts format.IndexOptions, msg string) {
	if opts.Note != nil {
		opts.Note(msg)
	}
}

// energonCounts reads .info.json's shard_counts; nil when there is none.
func energonCounts(ctx context.Context, st store.Store) (map[string]int64, error) {
	r, err := st.Get(ctx, energonInfo, 0, -1)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(r, maxEnergonInfo+1))
	_ = r.Close()
	if err != nil {
		return nil, err
	}
	if len(data) > maxEnergonInfo {
		return nil, fmt.Errorf("%s%s is larger than %d bytes", st.URI(), energonInfo, maxEnergonInfo)
	}
	var info struct {
		ShardCounts map[string]int64 `json:"shard_counts"`
	}
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("%s%s is not Megatron-Energon's info: %w; delete .nv-meta or re-run energon prepare", st.URI(), energonInfo, err)
	}
	if info.ShardCounts == nil {
		return nil, fmt.Errorf("%s%s has no shard_counts: delete .nv-meta or re-run energon prepare", st.URI(), energonInfo)
	}
	for k, n := range info.ShardCounts {
		if n < 0 {
			return nil, fmt.Errorf("%s%s: %s has %d samples", st.URI(), energonInfo, k, n)
		}
	}
	return info.ShardCounts, nil
}

// energonParts reads the names of every sample's parts from the
// sample_parts table of Energon's sqlite index: the stream's extensions.
func energonParts(ctx context.Context, st store.Store) (map[string]bool, error) {
	o, err := st.Stat(ctx, energonSQLite)
	if err != nil {
		return nil, err
	}
	var block []byte
	blockAt := int64(-1)
	read := func(off, n int64) ([]byte, error) {
		if off < 0 || n < 0 || off+n > o.Size {
			return nil, fmt.Errorf("%w: %d bytes at %d past its %d", errSQLite, n, off, o.Size)
		}
		if blockAt < 0 || off < blockAt || off+n > blockAt+int64(len(block)) {
			blockAt = off / sqliteBlock * sqliteBlock
			b, err := format.ReadRange(ctx, st, energonSQLite, blockAt, min(max(sqliteBlock, off+n-blockAt), o.Size-blockAt))
			if err != nil {
				return nil, err
			}
			block = b
		}
		return block[off-blockAt : off-blockAt+n], nil
	}
	db, err := openSQLite(o.Size, read)
	if err != nil {
		return nil, err
	}
	root, err := db.tableRoot("sample_parts")
	if err != nil {
		return nil, err
	}
	exts := map[string]bool{}
	err = db.scanTable(root, func(rec []any) error {
		var name string
		if len(rec) >= 3 {
			name, _ = rec[2].(string)
		}
		if name == "" {
			return fmt.Errorf("%w: a sample_parts row %v without its part name", errSQLite, rec)
		}
		exts[strings.ToLower(name)] = true
		return nil
	})
	return exts, err
}

// energonTar cuts one tar into shards by its .tar.idx: count samples'
// offsets and the last one's end, increasing, within the tar.
func energonTar(ctx context.Context, st store.Store, o store.Object, count int64, opts format.IndexOptions) (tarIndex, error) {
	out := tarIndex{}
	want := 8 * (count + 1)
	idx, err := format.ReadRange(ctx, st, o.Key+energonIdx, 0, want)
	if err != nil {
		return out, fmt.Errorf("the .tar.idx of %d samples (%d bytes): %w", count, want, err)
	}
	var cur *indexfile.Entry
	r := bytes.NewReader(idx)
	var prev int64 = -1
	for k := int64(0); k <= count; k++ {
		var off uint64
		if err := binary.Read(r, binary.LittleEndian, &off); err != nil {
			return out, err
		}
		at := int64(off) //nolint:gosec // checked below
		if at <= prev || at < 0 || at > o.Size {
			return out, fmt.Errorf("offset %d of sample %d is not after %d and within the tar's %d bytes: re-run energon prepare", at, k, prev, o.Size)
		}
		if k > 0 {
			if cur == nil {
				cur = &indexfile.Entry{Object: o.Key, Offset: prev, ObjectSize: o.Size}
			}
			cur.Samples++
			cur.Length = at - cur.Offset
			if cur.Length >= opts.ShardBytes {
				out.shards = append(out.shards, *cur)
				cur = nil
			}
		}
		prev = at
	}
	if cur != nil {
		out.shards = append(out.shards, *cur)
	}
	return out, nil
}

// Package mdsindex reads the index.json of MosaicML Streaming's MDS format,
// version 2: decoder-free, for the control plane as well as the sidecar
// (sidecar/format/mds decodes the shards it lists).
package mdsindex

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/shardfeed/shardfeed/planner"
)

// Version is the MDS index version this package reads.
const Version = 2

// ShardFormat is the format every shard of an MDS index names.
const ShardFormat = "mds"

// Index is an MDS index.json: the shards of one stream.
type Index struct {
	Version int          `json:"version"`
	Shards  []ShardEntry `json:"shards"`
}

// ShardEntry describes one shard of an MDS index.
type ShardEntry struct {
	ColumnEncodings []string `json:"column_encodings"`
	ColumnNames     []string `json:"column_names"`
	ColumnSizes     []*int64 `json:"column_sizes"`
	// Compression is "zstd", "zstd:7", …, or empty when the shard is raw.
	Compression *string `json:"compression"`
	Format      string  `json:"format"`
	// Hashes lists the algorithms of the hashes in RawData and ZipData.
	Hashes    []string  `json:"hashes"`
	RawData   *FileInfo `json:"raw_data"`
	ZipData   *FileInfo `json:"zip_data"`
	Samples   int64     `json:"samples"`
	SizeLimit *int64    `json:"size_limit"`
	Version   int       `json:"version"`
}

// FileInfo is one file of a shard: raw or compressed.
type FileInfo struct {
	Basename string            `json:"basename"`
	Bytes    int64             `json:"bytes"`
	Hashes   map[string]string `json:"hashes"`
}

// Stored returns the file object storage holds for the shard: the
// compressed one when there is one.
func (s *ShardEntry) Stored() *FileInfo {
	if s.ZipData != nil {
		return s.ZipData
	}
	return s.RawData
}

// Read parses and checks an MDS index.json.
func Read(r io.Reader) (*Index, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading MDS index: %w", err)
	}
	return Parse(data)
}

// Parse parses and checks the bytes of an MDS index.json, decoding from
// them without a copy.
func Parse(data []byte) (*Index, error) {
	var x Index
	if err := json.Unmarshal(data, &x); err != nil {
		return nil, fmt.Errorf("MDS index is not valid JSON: %w", err)
	}
	if err := x.check(); err != nil {
		return nil, err
	}
	return &x, nil
}

func (x *Index) check() error {
	if x.Version != Version {
		return fmt.Errorf("MDS index version %d is not supported: shardfeed reads version %d (write it with mosaicml-streaming >= 0.4 or shardfeed convert)", x.Version, Version)
	}
	if len(x.Shards) == 0 {
		return errors.New(`MDS index lists no shards ("shards" is empty)`)
	}
	seen := map[string]int{}
	for i, s := range x.Shards {
		where := fmt.Sprintf("MDS index: shards[%d]", i)
		if s.Format != ShardFormat {
			return fmt.Errorf("%s: format %q is not supported: only %q shards are", where, s.Format, ShardFormat)
		}
		if s.Samples < 0 {
			return fmt.Errorf("%s: negative sample count %d", where, s.Samples)
		}
		if s.RawData == nil {
			return fmt.Errorf("%s: raw_data is missing", where)
		}
		for _, f := range []*FileInfo{s.RawData, s.ZipData} {
			if f == nil {
				continue
			}
			if err := checkBasename(f.Basename); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			if f.Bytes < 0 {
				return fmt.Errorf("%s: %s has a negative size %d", where, f.Basename, f.Bytes)
			}
		}
		if (s.ZipData != nil) != (s.Compression != nil && *s.Compression != "") {
			return fmt.Errorf("%s: compression %v and zip_data disagree: a compressed shard has both, a raw one neither", where, deref(s.Compression))
		}
		name := s.Stored().Basename
		if j, dup := seen[name]; dup {
			return fmt.Errorf("%s: %s is also shards[%d]", where, name, j)
		}
		seen[name] = i
		if len(s.ColumnNames) != len(s.ColumnEncodings) {
			return fmt.Errorf("%s: %d column names but %d encodings", where, len(s.ColumnNames), len(s.ColumnEncodings))
		}
	}
	return nil
}

// checkBasename refuses names that would leave the stream's prefix.
func checkBasename(name string) error {
	if name == "" || name != path.Base(name) || name == "." || name == ".." || strings.ContainsAny(name, `\`) {
		return fmt.Errorf("shard file name %q is not a plain file name", name)
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}

// hashPreference orders the hash algorithms MDS writes, strongest first.
var hashPreference = []string{"sha3_512", "sha3_384", "sha3_256", "sha3_224", "sha512", "sha384", "sha256", "sha224", "blake2b", "blake2s", "sha1", "md5", "xxh3_128", "xxh128", "xxh3_64", "xxh64", "xxh32"}

// StreamIndex returns the planner's view of the index: per shard, the file
// to fetch, its size, its samples and its strongest recorded hash.
func (x *Index) StreamIndex() planner.StreamIndex {
	out := planner.StreamIndex{Shards: make([]planner.Shard, len(x.Shards))}
	for i, s := range x.Shards {
		f := s.Stored()
		out.Shards[i] = planner.Shard{Name: f.Basename, Samples: s.Samples, Bytes: f.Bytes, Hash: strongestHash(f.Hashes)}
	}
	return out
}

func strongestHash(h map[string]string) string {
	if len(h) == 0 {
		return ""
	}
	for _, algo := range hashPreference {
		if v, ok := h[algo]; ok {
			return algo + ":" + v
		}
	}
	algos := make([]string, 0, len(h))
	for a := range h {
		algos = append(algos, a)
	}
	slices.Sort(algos)
	return algos[0] + ":" + h[algos[0]]
}

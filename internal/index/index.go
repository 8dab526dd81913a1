// Package index finds and reads the index of a stream: the list of its
// shards with their sample counts, sizes and hashes that the planner needs.
//
// Three forms are read: MDS's index.json (version 2); shardfeed's own index
// (written by `shardfeed index`, see File); and a plain JSON list of shards,
// {"shards": [{"name": …, "samples": …, "bytes": …, "hash": …}]}, for
// indexes written by hand or by tools.
package index

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/format/mds"
)

// FileName is the name of a stream's index in its directory or prefix.
const FileName = "index.json"

// ReadDir reads dir/index.json.
func ReadDir(dir string) (planner.StreamIndex, error) {
	return ReadFile(filepath.Join(dir, FileName))
}

// ReadFile reads an index file in either form.
func ReadFile(path string) (planner.StreamIndex, error) {
	f, err := os.Open(path)
	if err != nil {
		return planner.StreamIndex{}, err
	}
	defer func() { _ = f.Close() }()
	x, err := Read(f)
	if err != nil {
		return planner.StreamIndex{}, fmt.Errorf("%s: %w", path, err)
	}
	return x, nil
}

// Read parses an index in either form: MDS's (it has a "version") or a
// plain list of shards.
func Read(r io.Reader) (planner.StreamIndex, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return planner.StreamIndex{}, err
	}
	var probe struct {
		Version   *int `json:"version"`
		Shardfeed *int `json:"shardfeed"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return planner.StreamIndex{}, fmt.Errorf("index is not valid JSON: %w", err)
	}
	if probe.Shardfeed != nil {
		var f File
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			return planner.StreamIndex{}, fmt.Errorf("shardfeed index: %w", err)
		}
		if err := f.check(); err != nil {
			return planner.StreamIndex{}, err
		}
		return f.StreamIndex(), nil
	}
	if probe.Version != nil {
		x, err := mds.ReadIndex(bytes.NewReader(data))
		if err != nil {
			return planner.StreamIndex{}, err
		}
		return x.StreamIndex(), nil
	}
	var x planner.StreamIndex
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&x); err != nil {
		return planner.StreamIndex{}, fmt.Errorf("index is neither MDS (no \"version\") nor a list of shards: %w", err)
	}
	if len(x.Shards) == 0 {
		return planner.StreamIndex{}, errors.New(`index lists no shards ("shards" is empty)`)
	}
	for i, s := range x.Shards {
		if s.Name == "" || s.Samples < 0 || s.Bytes < 0 {
			return planner.StreamIndex{}, fmt.Errorf("index: shards[%d] needs a name and non-negative samples and bytes, got %+v", i, s)
		}
	}
	return x, nil
}

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/compact"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store/local"
	"github.com/shardfeed/shardfeed/internal/streams"
	"github.com/shardfeed/shardfeed/planner"
)

var documentSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// readDataset reads the one TrainingDataset of a manifest file ("-" for
// stdin), strictly: a misspelt field is an error, not a silent default.
func readDataset(path string, stdin io.Reader) (*datav1alpha1.TrainingDataset, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	var found []*datav1alpha1.TrainingDataset
	for i, doc := range documentSeparator.Split(string(data), -1) {
		if len(bytes.TrimSpace([]byte(doc))) == 0 {
			continue
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			return nil, fmt.Errorf("%s: document %d is not YAML: %w", path, i+1, err)
		}
		if meta.Kind != "TrainingDataset" {
			continue
		}
		if meta.APIVersion != datav1alpha1.GroupVersion.String() {
			return nil, fmt.Errorf("%s: document %d has apiVersion %q: shardfeed reads %s", path, i+1, meta.APIVersion, datav1alpha1.GroupVersion)
		}
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i+1, err)
		}
		// Case-sensitive and strict, as the API server decodes: a misspelt
		// field is an error, not a silently defaulted one.
		var ds datav1alpha1.TrainingDataset
		strict, err := kjson.UnmarshalStrict(js, &ds)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i+1, err)
		}
		if len(strict) > 0 {
			return nil, fmt.Errorf("%s: document %d: %w", path, i+1, errors.Join(strict...))
		}
		if err := localPaths(&ds, path); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i+1, err)
		}
		found = append(found, &ds)
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("%s holds no TrainingDataset (kind: TrainingDataset, apiVersion: %s)", path, datav1alpha1.GroupVersion)
	case 1:
		return found[0], nil
	}
	return nil, fmt.Errorf("%s holds %d TrainingDatasets: give a file with one", path, len(found))
}

// readIndexes finds the index of every stream: in an --index-dir (as
// <dir>/<stream>/index.json or <dir>/<stream>.json), else in the stream's
// own directory (file://) or prefix (s3://, with the manifest's endpoint and
// the credentials of credentialsDir or the default chain).
func readIndexes(ctx context.Context, ds *datav1alpha1.TrainingDataset, indexDirs []string, credentialsDir string) ([]planner.StreamIndex, error) {
	if ds.Spec.Packing != nil {
		return nil, errors.New("spec.packing: the packs are counted beside each stream's index, which --index-dir does not hold: drop --index-dir")
	}
	if ds.Spec.Bucketing != nil {
		return nil, errors.New("spec.bucketing: each bucket's rows are selected beside each stream's index, which --index-dir does not hold: drop --index-dir")
	}
	out := make([]planner.StreamIndex, len(ds.Spec.Streams))
	for i, s := range ds.Spec.Streams {
		x, err := readStreamIndex(ctx, i, s, indexDirs, credentialsDir)
		if err != nil {
			return nil, fmt.Errorf("stream %q: %w", s.Name, err)
		}
		out[i] = x
	}
	return out, nil
}

// indexFiles are where --index-dir DIR may hold a stream's index, in the
// order looked at.
func indexFiles(dir, stream string) []string {
	return []string{filepath.Join(dir, stream, indexfile.FileName), filepath.Join(dir, stream, compact.FileName), filepath.Join(dir, stream+".json"), filepath.Join(dir, stream+".sfi")}
}

func readStreamIndex(ctx context.Context, i int, s datav1alpha1.Stream, indexDirs []string, credentialsDir string) (planner.StreamIndex, error) {
	for _, dir := range indexDirs {
		for _, p := range indexFiles(dir, s.Name) {
			if _, err := os.Stat(p); err == nil {
				return index.ReadFile(p)
			}
		}
	}
	dir, err := local.Dir(s.Source.URI)
	if err == nil {
		return index.ReadDir(dir)
	}
	if !errors.Is(err, local.ErrNotLocal) {
		return planner.StreamIndex{}, err
	}
	src := streams.SharedCredentials(s, credentialsDir)
	st, err := streams.Open(ctx, i, s, nil, src, 0)
	if err != nil {
		return planner.StreamIndex{}, fmt.Errorf("%w\nor give the index with --index-dir DIR (as DIR/%s/index.json, DIR/%s/index.sfi or DIR/%s.json)", err, s.Name, s.Name, s.Name)
	}
	return st.Index, nil
}

// localPaths turns the streams' plain paths (data/chat/, /data/chat/)
// into file:// URIs, a relative one against the manifest's directory, so
// a manifest next to its data works from any directory. The operator
// refuses local streams anyway: this is for the CLI only.
func localPaths(ds *datav1alpha1.TrainingDataset, manifest string) error {
	base := "."
	if manifest != "-" {
		base = filepath.Dir(manifest)
	}
	for i := range ds.Spec.Streams {
		uri, err := localURI(ds.Spec.Streams[i].Source.URI, base)
		if err != nil {
			return fmt.Errorf("stream %q: %w", ds.Spec.Streams[i].Name, err)
		}
		ds.Spec.Streams[i].Source.URI = uri
	}
	// A tokenizer.json by a plain path: the file's URI, as the streams'.
	tokenizations := []*datav1alpha1.Tokenize{ds.Spec.Tokenize}
	for i := range ds.Spec.Streams {
		tokenizations = append(tokenizations, ds.Spec.Streams[i].Tokenize)
	}
	for _, t := range tokenizations {
		if t == nil || t.Tokenizer.URI == "" || strings.Contains(t.Tokenizer.URI, "://") {
			continue
		}
		dir, err := localURI(filepath.Dir(t.Tokenizer.URI), base)
		if err != nil {
			return fmt.Errorf("tokenize.tokenizer.uri: %w", err)
		}
		t.Tokenizer.URI = dir + filepath.Base(t.Tokenizer.URI)
	}
	return nil
}

// localURI is arg as a URI: itself if it has a scheme, else the file://
// URI of the directory it names (relative to base), with a trailing slash.
func localURI(arg, base string) (string, error) {
	if arg == "" || strings.Contains(arg, "://") {
		return arg, nil
	}
	p := arg
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("the path %q: %w", arg, err)
	}
	return "file://" + strings.TrimSuffix(abs, "/") + "/", nil
}

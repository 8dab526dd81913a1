// Command provenance writes a release's build provenance: an in-toto
// Statement (v1) whose predicate is SLSA Provenance v1, naming every
// artifact by its SHA-256 and saying what built them from what (the
// commit, the version, the Go toolchain, the builder). hack/dist.sh runs it
// over dist/<version>/; a signed checksum of it vouches for the release
// (docs/releasing.md, "Verifying a release").
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"time"
)

// The in-toto and SLSA names a verifier checks.
const (
	statementType = "https://in-toto.io/Statement/v1"
	slsaV1        = "https://slsa.dev/provenance/v1"
	buildType     = "https://github.com/shardfeed/shardfeed/blob/main/hack/dist.sh"
)

type digestSet map[string]string

type resource struct {
	Name   string    `json:"name,omitempty"`
	URI    string    `json:"uri,omitempty"`
	Digest digestSet `json:"digest"`
}

type statement struct {
	Type          string     `json:"_type"`
	Subject       []resource `json:"subject"`
	PredicateType string     `json:"predicateType"`
	Predicate     predicate  `json:"predicate"`
}

type predicate struct {
	BuildDefinition struct {
		BuildType            string            `json:"buildType"`
		ExternalParameters   map[string]string `json:"externalParameters"`
		InternalParameters   map[string]string `json:"internalParameters"`
		ResolvedDependencies []resource        `json:"resolvedDependencies"`
	} `json:"buildDefinition"`
	RunDetails struct {
		Builder struct {
			ID string `json:"id"`
		} `json:"builder"`
		Metadata struct {
			InvocationID string `json:"invocationId,omitempty"`
			StartedOn    string `json:"startedOn"`
			FinishedOn   string `json:"finishedOn"`
		} `json:"metadata"`
	} `json:"runDetails"`
}

func main() {
	version := flag.String("version", "", "the release's version (0.2.0)")
	commit := flag.String("commit", "", "the commit built (40 hex digits)")
	repository := flag.String("repository", "https://github.com/shardfeed/shardfeed", "the source repository")
	image := flag.String("image", "", "the image's repository (ghcr.io/shardfeed/shardfeed)")
	builder := flag.String("builder", "", "who built it (the forge's workflow run, else the host)")
	started := flag.String("started", "", "when the build started (RFC 3339)")
	out := flag.String("out", "", "the statement to write")
	flag.Parse()
	if err := run(*version, *commit, *repository, *image, *builder, *started, *out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "provenance:", err)
		os.Exit(1)
	}
}

func run(version, commit, repository, image, builder, started, out string, artifacts []string) error {
	if version == "" || len(commit) != 40 || out == "" || len(artifacts) == 0 {
		return fmt.Errorf("give -version, -commit (40 hex digits), -out and the artifacts")
	}
	if _, err := time.Parse(time.RFC3339, started); err != nil {
		return fmt.Errorf("-started %q: %w", started, err)
	}
	s := statement{Type: statementType, PredicateType: slsaV1}
	for _, a := range artifacts {
		sum, err := sha256File(a)
		if err != nil {
			return err
		}
		s.Subject = append(s.Subject, resource{Name: filepath.Base(a), Digest: digestSet{"sha256": sum}})
	}
	sort.Slice(s.Subject, func(i, j int) bool { return s.Subject[i].Name < s.Subject[j].Name })
	b := &s.Predicate.BuildDefinition
	b.BuildType = buildType
	b.ExternalParameters = map[string]string{"version": version, "source": repository + "@" + commit, "image": image}
	b.InternalParameters = map[string]string{"goVersion": runtime.Version()}
	b.ResolvedDependencies = []resource{{URI: "git+" + repository + "@" + commit, Digest: digestSet{"gitCommit": commit}}}
	r := &s.Predicate.RunDetails
	r.Builder.ID = builder
	r.Metadata.StartedOn = started
	r.Metadata.FinishedOn = time.Now().UTC().Format(time.RFC3339)
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(out, append(data, '\n'), 0o644)
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }() // read only
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

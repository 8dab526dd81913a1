package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// BinDir returns the directory with the test binaries: $SHARDFEED_BIN, or
// the bin/ folder of the repository the test runs in.
func BinDir() (string, error) {
	if dir := os.Getenv("SHARDFEED_BIN"); dir != "" {
		return dir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin"), nil
}

// RepoRoot returns the repository root: the nearest parent of the working
// directory that holds go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory: run the tests inside the shardfeed repository")
		}
		dir = parent
	}
}

// binary returns the path of bin/name, or an error that says how to get it.
func binary(name string) (string, error) {
	dir, err := BinDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s is missing (%w): run 'make tools' to install the test binaries", path, err)
	}
	return path, nil
}

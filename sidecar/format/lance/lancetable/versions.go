package lancetable

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// A version's manifest is _versions/{N}.manifest (the first naming) or
// _versions/{u64 max − N, 20 digits}.manifest (the second, which lists
// newest first); d-prefixed names are detached versions, skipped.

// ManifestKeys are the keys version n's manifest may have, in the order
// to try them.
func ManifestKeys(n uint64) []string {
	return []string{fmt.Sprintf("_versions/%020d.manifest", math.MaxUint64-n), fmt.Sprintf("_versions/%d.manifest", n)}
}

// VersionOf returns the version a key under _versions/ names, if it is a
// manifest of the main line.
func VersionOf(key string) (uint64, bool) {
	name, ok := strings.CutPrefix(key, "_versions/")
	if !ok {
		return 0, false
	}
	stem, ok := strings.CutSuffix(name, ".manifest")
	if !ok || stem == "" || strings.HasPrefix(stem, "d") {
		return 0, false
	}
	n, err := strconv.ParseUint(stem, 10, 64)
	if err != nil {
		return 0, false
	}
	if len(stem) == 20 {
		return math.MaxUint64 - n, true
	}
	return n, true
}

// Tag is a tag's file, _refs/tags/{name}.json.
type Tag struct {
	Branch       *string `json:"branch"`
	Version      uint64  `json:"version"`
	ManifestSize int64   `json:"manifestSize"`
}

// ParseTag reads a tag file.
func ParseTag(name string, b []byte) (Tag, error) {
	var t Tag
	if err := json.Unmarshal(b, &t); err != nil {
		return Tag{}, corrupt("tag %q: %v", name, err)
	}
	if t.Version == 0 {
		return Tag{}, corrupt("tag %q names no version", name)
	}
	if t.Branch != nil && *t.Branch != "" && *t.Branch != "main" {
		return Tag{}, fmt.Errorf("%w: tag %q is of branch %q: shardfeed reads a table's main branch", ErrUnsupported, name, *t.Branch)
	}
	return t, nil
}

// TagKey is the key of tag name's file.
func TagKey(name string) (string, error) {
	if name == "" || strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
		return "", fmt.Errorf("tag %q is not a tag name", name)
	}
	return "_refs/tags/" + name + ".json", nil
}

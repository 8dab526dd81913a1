package format

import (
	"fmt"
	"strconv"
	"strings"
)

// maxBraceNames bounds what a brace pattern may name.
const maxBraceNames = 10_000_000

// ExpandBraces returns the names a brace pattern names, in order, as
// WebDataset's braceexpand does: {a,b,c} lists alternatives and {000..099}
// a range of integers (zero-padded to the width of its ends when either
// has a leading zero), a pattern holding several, each expanded in turn.
// Nested braces are refused.
func ExpandBraces(pattern string) ([]string, error) {
	out := []string{""}
	rest := pattern
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			if strings.IndexByte(rest, '}') >= 0 {
				return nil, fmt.Errorf("brace pattern %q: a '}' without its '{'", pattern)
			}
			out = appendEach(out, []string{rest})
			break
		}
		if strings.IndexByte(rest[:open], '}') >= 0 {
			return nil, fmt.Errorf("brace pattern %q: a '}' without its '{'", pattern)
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, fmt.Errorf("brace pattern %q: a '{' without its '}'", pattern)
		}
		body := rest[open+1 : open+end]
		if strings.IndexByte(body, '{') >= 0 {
			return nil, fmt.Errorf("brace pattern %q: nested braces are not supported; write the names in one level", pattern)
		}
		alts, err := braceBody(body)
		if err != nil {
			return nil, fmt.Errorf("brace pattern %q: %w", pattern, err)
		}
		if len(out)*len(alts) > maxBraceNames {
			return nil, fmt.Errorf("brace pattern %q names more than %d objects: split the stream", pattern, maxBraceNames)
		}
		out = appendEach(out, []string{rest[:open]})
		out = appendEach(out, alts)
		rest = rest[open+end+1:]
	}
	return out, nil
}

func appendEach(prefixes, suffixes []string) []string {
	out := make([]string, 0, len(prefixes)*len(suffixes))
	for _, p := range prefixes {
		for _, s := range suffixes {
			out = append(out, p+s)
		}
	}
	return out
}

// braceBody expands one {…}: a range "a..b" of integers, or alternatives.
func braceBody(body string) ([]string, error) {
	if lo, hi, ok := strings.Cut(body, ".."); ok && !strings.Contains(body, ",") {
		a, errA := strconv.ParseInt(lo, 10, 64)
		b, errB := strconv.ParseInt(hi, 10, 64)
		if errA != nil || errB != nil || a < 0 || b < a {
			return nil, fmt.Errorf("{%s} is not a range of integers from low to high", body)
		}
		if b-a >= maxBraceNames {
			return nil, fmt.Errorf("{%s} names more than %d objects", body, maxBraceNames)
		}
		width := 0
		if (len(lo) > 1 && lo[0] == '0') || (len(hi) > 1 && hi[0] == '0') {
			width = max(len(lo), len(hi))
		}
		out := make([]string, 0, b-a+1)
		for n := a; n <= b; n++ {
			out = append(out, fmt.Sprintf("%0*d", width, n))
		}
		return out, nil
	}
	return strings.Split(body, ","), nil
}

// matchShards keeps the files a brace pattern names, in the pattern's
// order; a name the pattern gives that the stream lacks is an error.
func matchShards(files []partitionFile, pattern, uri string) ([]partitionFile, error) {
	names, err := ExpandBraces(pattern)
	if err != nil {
		return nil, err
	}
	by := make(map[string]partitionFile, len(files))
	for _, f := range files {
		by[f.Key] = f
	}
	out := make([]partitionFile, 0, len(names))
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		f, ok := by[n]
		if !ok {
			return nil, fmt.Errorf("%s%s, named by %q, is not in the stream (or not of its format)", uri, n, pattern)
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, f)
		}
	}
	return out, nil
}

package webdataset

import (
	"fmt"
	"regexp"
	"strings"
)

// KeyColumn is the column of a sample's key, as webdataset names it.
const KeyColumn = "__key__"

// baseExt splits a member's name as webdataset's base_plus_ext does: the
// key is the path up to the first dot of the base name, the extension the
// rest (several dots: "seg.png").
var baseExt = regexp.MustCompile(`^((?:.*/|)[^.]+)[.]([^/]*)$`)

// metaName are the names webdataset's tar reader skips: __…__ entries.
var metaName = regexp.MustCompile(`^__[^/]*__($|/)`)

// keyExt returns a regular member's key and extension (lower-cased, as
// webdataset's default lcase); ok false for the members webdataset skips.
func keyExt(name string) (key, ext string, ok bool) {
	if !strings.Contains(name, "/") && strings.HasPrefix(name, "__") && strings.HasSuffix(name, "__") || metaName.MatchString(name) {
		return "", "", false
	}
	m := baseExt.FindStringSubmatch(name)
	if m == nil {
		return "", "", false
	}
	return m[1], strings.ToLower(m[2]), true
}

// sample is one sample of a tar: the members that share a key, in order,
// with their extensions.
type sample struct {
	key     string
	members []member
	exts    []string
}

func (s *sample) start() int64 { return s.members[0].Start }
func (s *sample) end() int64   { return s.members[len(s.members)-1].End() }

// walk reads the members of src from its start to end and calls fn with each
// sample, grouped as webdataset groups them: consecutive members with one
// key. Members webdataset skips are read past; two members of one sample
// with one extension are an error, as there.
func walk(src blocks, end int64, fn func(*sample) error) error {
	var cur *sample
	var off int64
	for {
		m, done, err := nextMember(src, off, end)
		if err != nil {
			return err
		}
		if done {
			break
		}
		off = m.End()
		if !m.Regular {
			continue
		}
		key, ext, ok := keyExt(m.Name)
		if !ok {
			continue
		}
		if ext == "" || ext == strings.ToLower(KeyColumn) {
			return fmt.Errorf("%w: %q has no extension a column could be named by (KEY.EXT)", errCorrupt, m.Name)
		}
		if cur == nil || key != cur.key {
			if cur != nil {
				if err := fn(cur); err != nil {
					return err
				}
			}
			cur = &sample{key: key}
		}
		for _, e := range cur.exts {
			if e == ext {
				return fmt.Errorf("%w: %q is a second %q of the sample %q", errCorrupt, m.Name, ext, key)
			}
		}
		cur.members = append(cur.members, m)
		cur.exts = append(cur.exts, ext)
	}
	if cur != nil {
		return fn(cur)
	}
	return nil
}

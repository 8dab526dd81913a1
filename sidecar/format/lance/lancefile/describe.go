package lancefile

import (
	"slices"
)

// Encodings lists the layouts and encodings a file's pages use, by name
// ("miniblock", "fullzip", "InlineBitpacking", "2.0 binary"): what a
// table's files exercise of the reader, for tests and diagnostics.
func (t *Tail) Encodings() []string {
	seen := map[string]bool{}
	for _, c := range t.Columns {
		for _, p := range c.Pages {
			p.Enc20.names(seen)
			if l := p.Layout; l != nil {
				if l.Kind == BlobLayout && l.Inner != nil {
					seen["blob"] = true
					l = l.Inner
				}
				seen[map[LayoutKind]string{MiniBlock: "miniblock", FullZip: "fullzip", Constant: "constant"}[l.Kind]] = true
				if l.Dictionary != nil {
					seen["dictionary"] = true
				}
				for _, e := range []*Encoding{l.Rep, l.Def, l.Values, l.Dictionary} {
					e.names(seen)
				}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (e *Encoding) names(seen map[string]bool) {
	if e == nil {
		return
	}
	seen[e.Kind.String()] = true
	if e.Scheme != 0 {
		seen[map[int]string{LZ4: "lz4", Zstd: "zstd"}[e.Scheme]] = true
	}
	e.Child.names(seen)
	e.Child2.names(seen)
	for _, f := range e.Fields {
		f.Value.names(seen)
	}
}

func (e *Encoding20) names(seen map[string]bool) {
	if e == nil {
		return
	}
	seen["2.0 "+e.Kind.String()] = true
	if e.Compression != "" && e.Compression != "none" {
		seen["2.0 "+e.Compression] = true
	}
	if e.Kind == Nullable20 {
		seen["2.0 nullable "+map[int]string{noNulls: "none", someNulls: "some", allNulls: "all"}[e.Nulls]] = true
	}
	for _, c := range []*Encoding20{e.Validity, e.Values, e.Indices} {
		c.names(seen)
	}
}

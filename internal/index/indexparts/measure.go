package indexparts

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/shardfeed/shardfeed/internal/index/sidefile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/strictjson"
)

// A stream's selection and lengths measured in parts (shardfeed index
// --measure-parts N --part K, then --merge-parts): each part measures a
// contiguous range of the index's shards and writes what it measured
// under a run of its own; the merge joins them into the files one run
// writes, byte for byte. The run is named by what is measured, so a part
// of another index, filter, column or tokenizer is never joined.

// MaxMeasuredBytes bounds a part's runs or lengths object read: a part
// of a stream at its index's bounds.
const MaxMeasuredBytes = 1 << 30

// Measure is what a measuring run measures, over which index.
type Measure struct {
	// Index is the content hash of the stream's index.
	Index string
	// Filter is the stream's filter ("" for none).
	Filter string
	// Column and Tokenize are the lengths measured (Column "" for
	// none); their measure follows from the column's type in the index.
	Column   string
	Tokenize string
	Parts    int
}

// MeasureRun names the run of m, as RunID names an indexing run (its
// files are named apart from an indexing run's).
func MeasureRun(m Measure) string {
	h := sha256.New()
	for _, s := range []string{"measure", m.Index, m.Filter, m.Column, m.Tokenize, strconv.Itoa(m.Parts)} {
		h.Write([]byte(strconv.Itoa(len(s)) + ":" + s + ";"))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// MeasuredKey is part k's record of a measuring run; MeasuredRunsKey and
// MeasuredLengthsKey its selection's runs and its lengths.
func MeasuredKey(run string, k int) string { return fmt.Sprintf("%smeasure-%05d.json", RunDir(run), k) }

// MeasuredRunsKey is part k's runs object.
func MeasuredRunsKey(run string, k int) string {
	return fmt.Sprintf("%smeasure-%05d.runs", RunDir(run), k)
}

// MeasuredLengthsKey is part k's lengths object.
func MeasuredLengthsKey(run string, k int) string {
	return fmt.Sprintf("%smeasure-%05d.lengths", RunDir(run), k)
}

// Measured is part k's record: the shards it measured, and its share of
// the selection and the lengths with the SHA-256 of their objects.
type Measured struct {
	Run  string `json:"run"`
	Part int    `json:"part"`
	// From and To are the shards measured, To excluded.
	From          int                    `json:"from"`
	To            int                    `json:"to"`
	Filter        *sidefile.FilterIndex  `json:"filter,omitempty"`
	RunsSHA256    string                 `json:"runsSHA256,omitempty"`
	Lengths       *sidefile.LengthsIndex `json:"lengths,omitempty"`
	LengthsSHA256 string                 `json:"lengthsSHA256,omitempty"`
}

// MeasureSpans cuts a stream's shards, of sizes bytes, into n contiguous
// ranges balanced as Plan balances objects: the same shards and n always
// give the same ranges, so that every part computes its own.
func MeasureSpans(bytes []int64, n int) []Span {
	objs := make([]store.Object, len(bytes))
	for i, b := range bytes {
		objs[i].Size = b
	}
	return Plan(objs, n)
}

// ParseMeasured reads and checks part k's record of run for m, its range
// span: what it measured is of that range, the index and m's filter and
// lengths, and names objects of the digests given.
func ParseMeasured(data []byte, run string, k int, span Span, m Measure) (*Measured, error) {
	if len(data) > MaxManifestBytes {
		return nil, fmt.Errorf("%d bytes, more than a measured part's %d", len(data), MaxManifestBytes)
	}
	var r Measured
	if err := strictjson.Decode(data, &r); err != nil {
		return nil, err
	}
	n := span.Objects
	switch {
	case r.Run != run || r.Part != k:
		return nil, fmt.Errorf("it is part %d of run %s, not part %d of run %s", r.Part, r.Run, k, run)
	case r.From != span.First || r.To != span.First+n:
		return nil, fmt.Errorf("it measured shards %d to %d, and part %d is shards %d to %d", r.From, r.To, k, span.First, span.First+n)
	case (m.Filter != "") != (r.Filter != nil) || (m.Column != "") != (r.Lengths != nil):
		return nil, fmt.Errorf("it measured another filter or column than run %s's", run)
	}
	if f := r.Filter; f != nil {
		switch {
		case f.Filter != m.Filter || f.Index != m.Index:
			return nil, fmt.Errorf("its selection is of filter %q over index %s, not %q over %s", f.Filter, f.Index, m.Filter, m.Index)
		case len(f.Shards) != n:
			return nil, fmt.Errorf("its selection has %d shards, its range %d", len(f.Shards), n)
		case !isHex64(r.RunsSHA256):
			return nil, fmt.Errorf("runsSHA256 %q is not 64 hex digits", r.RunsSHA256)
		}
	}
	if x := r.Lengths; x != nil {
		switch {
		case x.Column != m.Column || x.Tokenize != m.Tokenize || x.Filter != m.Filter || x.Index != m.Index:
			return nil, fmt.Errorf("its lengths are of column %q (%s, tokenize %q, filter %q, index %s), not of run %s's", x.Column, x.Measure, x.Tokenize, x.Filter, x.Index, run)
		case len(x.Shards) != n:
			return nil, fmt.Errorf("its lengths have %d shards, its range %d", len(x.Shards), n)
		case !isHex64(r.LengthsSHA256):
			return nil, fmt.Errorf("lengthsSHA256 %q is not 64 hex digits", r.LengthsSHA256)
		}
	}
	return &r, nil
}

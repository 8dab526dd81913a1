// Package jobrecords reads and writes what a run indexed in parts by the
// operator's Jobs (spec.index) leaves in the store for the operator: the
// run under the name of its listing Job, each part's progress and why a
// step failed. Each is small, bounded and parsed strictly: the operator
// reads them from a store a dataset's author writes.
package jobrecords

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/shardfeed/shardfeed/internal/index/indexparts"
	"github.com/shardfeed/shardfeed/internal/strictjson"
)

// namePattern is a name the operator gives a run: a namespace and a Job
// name (DNS labels and subdomains), joined by ".".
var namePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,198}[a-z0-9])?$`)

// CheckName refuses a run's name that is not lowercase letters, digits,
// "-" and "." (1 to 200, starting and ending with a letter or digit).
func CheckName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("name %q is not 1 to 200 lowercase letters, digits, '-' and '.', starting and ending with a letter or digit", name)
	}
	return nil
}

// ListedKey is the key of the record of the run listed under name.
func ListedKey(name string) string { return indexparts.Dir + "named-" + name + ".json" }

// ProgressKey is the key of part k's progress.
func ProgressKey(run string, k int) string {
	return fmt.Sprintf("%spart-%05d.progress.json", indexparts.RunDir(run), k)
}

// Listed is a run as its listing step recorded it under a name: what it
// is and its totals.
type Listed struct {
	Run     string `json:"run"`
	Objects int64  `json:"objects"`
	Bytes   int64  `json:"bytes"`
	Parts   int    `json:"parts"`
	// Unchanged says the listing (--if-changed) found the objects the
	// stream's index lists: no run was cut, and Run is empty.
	Unchanged bool `json:"unchanged,omitempty"`
}

// ParseListed reads a named run's record.
func ParseListed(data []byte) (Listed, error) {
	var l Listed
	if len(data) > indexparts.MaxRecordBytes {
		return l, fmt.Errorf("%d bytes: more than %d", len(data), indexparts.MaxRecordBytes)
	}
	if err := strictjson.Decode(data, &l); err != nil {
		return l, err
	}
	switch {
	case l.Objects < 0 || l.Bytes < 0:
		return l, fmt.Errorf("%d objects of %d bytes", l.Objects, l.Bytes)
	case l.Unchanged:
		if l.Run != "" || l.Parts != 0 {
			return l, fmt.Errorf("unchanged, with run %q of %d parts", l.Run, l.Parts)
		}
	case indexparts.CheckRun(l.Run) != nil:
		return l, indexparts.CheckRun(l.Run)
	case l.Parts < 1 || l.Parts > indexparts.MaxParts:
		return l, fmt.Errorf("%d parts: 1 to %d", l.Parts, indexparts.MaxParts)
	}
	return l, nil
}

// Progress is how far a part's indexing is: of its objects (and their
// bytes), those indexed, written now and then while it runs and once it
// is done.
type Progress struct {
	Run         string `json:"run"`
	Part        int    `json:"part"`
	Objects     int64  `json:"objects"`
	Bytes       int64  `json:"bytes"`
	ObjectsDone int64  `json:"objectsDone"`
	BytesDone   int64  `json:"bytesDone"`
}

// ParseProgress reads part k's progress of run.
func ParseProgress(data []byte, run string, k int) (Progress, error) {
	var p Progress
	if len(data) > indexparts.MaxRecordBytes {
		return p, fmt.Errorf("%d bytes: more than %d", len(data), indexparts.MaxRecordBytes)
	}
	if err := strictjson.Decode(data, &p); err != nil {
		return p, err
	}
	switch {
	case p.Run != run || p.Part != k:
		return p, fmt.Errorf("it is part %d of run %s, not part %d of run %s", p.Part, p.Run, k, run)
	case p.Objects < 0 || p.Bytes < 0 || p.ObjectsDone < 0 || p.BytesDone < 0 || p.ObjectsDone > p.Objects || p.BytesDone > p.Bytes:
		return p, fmt.Errorf("%d of %d objects, %d of %d bytes", p.ObjectsDone, p.Objects, p.BytesDone, p.Bytes)
	}
	return p, nil
}

// MaxFailureText bounds the error a failure record carries.
const MaxFailureText = 4 << 10

// FailureKey is the key of the record of why a step of the run listed
// under name failed last.
func FailureKey(name string) string { return indexparts.Dir + "named-" + name + ".failed.json" }

// Steps are the steps a failure is recorded of: a stream indexed in one
// run; its listing, its parts indexed and merged, its selection and lengths measured in parts
// and joined.
var Steps = []string{"index", "list", "part", "merge", "measure", "join"}

// Failure says why a step of a named run failed, for the operator to put
// in the dataset's condition: the step (one of Steps), the
// part, the run where known, when, and the error as the command said it.
type Failure struct {
	Step  string    `json:"step"`
	Part  int       `json:"part"`
	Run   string    `json:"run,omitempty"`
	Time  time.Time `json:"time"`
	Error string    `json:"error"`
}

// FailureText is err's text as a failure record keeps it: printable,
// one line, at most MaxFailureText bytes.
func FailureText(err string) string {
	clean := strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return ' '
		case !unicode.IsPrint(r):
			return -1
		}
		return r
	}, err)
	if len(clean) > MaxFailureText {
		cut := MaxFailureText - len("…")
		for cut > 0 && !utf8.RuneStart(clean[cut]) {
			cut--
		}
		clean = clean[:cut] + "…"
	}
	return clean
}

// ParseFailure reads a failure record, its error made printable and
// bounded whatever wrote it.
func ParseFailure(data []byte) (Failure, error) {
	var f Failure
	if len(data) > indexparts.MaxRecordBytes {
		return f, fmt.Errorf("%d bytes: more than %d", len(data), indexparts.MaxRecordBytes)
	}
	if err := strictjson.Decode(data, &f); err != nil {
		return f, err
	}
	switch {
	case !slices.Contains(Steps, f.Step):
		return f, fmt.Errorf("step %q is none of %s", f.Step, strings.Join(Steps, ", "))
	case f.Part < 0 || f.Part >= indexparts.MaxParts:
		return f, fmt.Errorf("part %d: 0 to %d", f.Part, indexparts.MaxParts-1)
	case f.Run != "" && indexparts.CheckRun(f.Run) != nil:
		return f, indexparts.CheckRun(f.Run)
	}
	f.Error = FailureText(f.Error)
	return f, nil
}

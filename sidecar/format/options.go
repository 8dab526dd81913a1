package format

import (
	"fmt"
	"slices"
	"strconv"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
)

// Option is an index option that one format alone takes (a megatron
// stream's unit, a TokensLoader litdata stream's block size, a Hugging
// Face stream's split). A format lists its own in a method
//
//	Options() []format.Option
//
// and the rest is read from that list (Registry.Options): the flag of
// shardfeed index and convert with its help, the refusal of the flag for
// another format, the manifest's field that index -f takes it from. Its
// value reaches the format in IndexOptions.Own under Flag, checked by
// Registry.Index (Registry.CheckOptions).
type Option struct {
	// Flag names the option: its flag (--unit) and its key in
	// IndexOptions.Own.
	Flag string
	// Field is the manifest's field that sets it
	// (spec.streams[].megatron.unit).
	Field string
	// Help says what it sets, for the flag's help.
	Help string
	// For says what it is for where the flag is refused for another
	// format ("a DatasetDict's or a datasets cache's split"); "" where
	// the format's name says enough.
	For string
	// Count, if set, is what the value counts ("tokens"): a whole number
	// of them, 1 or more, its flag one of integers (0: not given).
	// Without it, the value is text ("": not given), which the format
	// checks itself.
	Count string
	// Spec reads the option's value off a manifest's stream ("": not
	// set).
	Spec func(s *datav1alpha1.Stream) string
	// Indexed, if set, reads the value an index was made with ("": none),
	// where it decides which objects the index lists: Registry.Changes
	// lists them again with it.
	Indexed func(f *indexfile.File) string
}

// ownOptions is a Format with options of its own.
type ownOptions interface {
	Options() []Option
}

// indexHelp is a Format with a paragraph of shardfeed index's help.
type indexHelp interface {
	IndexHelp() string
}

// Options lists the options kind's format alone takes (nil: none, or no
// such format), in the format's order.
func (r Registry) Options(kind datav1alpha1.ShardFormat) []Option {
	if f, ok := r[kind].(ownOptions); ok {
		return f.Options()
	}
	return nil
}

// IndexHelp is what shardfeed index's help says of kind's streams after
// "With --format KIND, ": how they are indexed and with which options of
// their own; "" where the help of every format says all.
func (r Registry) IndexHelp(kind datav1alpha1.ShardFormat) string {
	if f, ok := r[kind].(indexHelp); ok {
		return f.IndexHelp()
	}
	return ""
}

// owner returns the format whose option flag is, and the option.
func (r Registry) owner(flag string) (datav1alpha1.ShardFormat, Option, bool) {
	for _, k := range r.Kinds(func(Format) bool { return true }) {
		for _, o := range r.Options(datav1alpha1.ShardFormat(k)) {
			if o.Flag == flag {
				return datav1alpha1.ShardFormat(k), o, true
			}
		}
	}
	return "", Option{}, false
}

// CheckOptions checks own, the values of formats' own options by flag,
// for a stream of kind: each one given ("", or a count's "0": not) is an
// option of kind's format, and a count is a whole number of 1 or more.
// formatFlag is the flag that names the format, in the words of the error
// (--format; convert's --from).
func (r Registry) CheckOptions(kind datav1alpha1.ShardFormat, own map[string]string, formatFlag string) error {
	flags := make([]string, 0, len(own))
	for flag := range own {
		flags = append(flags, flag)
	}
	slices.Sort(flags)
	for _, flag := range flags {
		value := own[flag]
		if value == "" || value == "0" {
			continue
		}
		owner, o, ok := r.owner(flag)
		if !ok {
			return fmt.Errorf("--%s is an option of no format", flag)
		}
		what := ""
		if o.For != "" {
			what = " (" + o.For + ")"
		}
		if o.Count != "" {
			if n, err := strconv.ParseInt(value, 10, 64); err != nil || n < 1 || owner != kind {
				return fmt.Errorf("--%s %s is for %s %s%s, a number of %s of 1 or more", flag, value, formatFlag, owner, what, o.Count)
			}
			continue
		}
		if owner != kind {
			return fmt.Errorf("--%s is for %s %s%s, not %s", flag, formatFlag, owner, what, kind)
		}
	}
	return nil
}

// indexedOptions are the values of f's format's own options that decide
// which objects its index lists, as the index records them.
func (r Registry) indexedOptions(f *indexfile.File) map[string]string {
	var own map[string]string
	for _, o := range r.Options(f.Format) {
		if o.Indexed == nil {
			continue
		}
		if v := o.Indexed(f); v != "" {
			if own == nil {
				own = map[string]string{}
			}
			own[o.Flag] = v
		}
	}
	return own
}

// OwnCount returns the count given for the format's own option flag (0:
// none), which Registry.Index has checked.
func (o IndexOptions) OwnCount(flag string) (int64, error) {
	v := o.Own[flag]
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("--%s %q is not a whole number", flag, v)
	}
	return n, nil
}

// givenOwn is own less the options not given, for a checkpoint's key.
func givenOwn(own map[string]string) map[string]string {
	var out map[string]string
	for k, v := range own {
		if v != "" && v != "0" {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

package main

import (
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// ownFlags are the flags of the options a format alone takes
// (format.Option: megatron's --unit, litdata's --block-size, huggingface's
// --split), as the registry lists them: their help, their refusal for
// another format and the manifest's fields index -f reads come from there.
type ownFlags struct {
	reg   format.Registry
	text  map[string]*string
	count map[string]*int64
	// order is the flags in the registry's order.
	order []string
}

// add adds a flag for each format's own option.
func (o *ownFlags) add(cmd *cobra.Command, reg format.Registry) {
	o.reg, o.text, o.count = reg, map[string]*string{}, map[string]*int64{}
	for _, kind := range reg.Kinds(func(format.Format) bool { return true }) {
		for _, opt := range reg.Options(datav1alpha1.ShardFormat(kind)) {
			help := "for " + kind + ": " + opt.Help + "; a manifest's " + opt.Field
			if opt.Count != "" {
				o.count[opt.Flag] = cmd.Flags().Int64(opt.Flag, 0, help)
			} else {
				o.text[opt.Flag] = cmd.Flags().String(opt.Flag, "", help)
			}
			o.order = append(o.order, opt.Flag)
		}
	}
}

// flags names the flags, in the registry's order.
func (o *ownFlags) flags() []string { return o.order }

// fromSpec takes the options a manifest's stream sets, every format's (a
// section of another format's is refused as its flag is).
func (o *ownFlags) fromSpec(s *datav1alpha1.Stream) {
	for _, kind := range o.reg.Kinds(func(format.Format) bool { return true }) {
		for _, opt := range o.reg.Options(datav1alpha1.ShardFormat(kind)) {
			v := ""
			if opt.Spec != nil {
				v = opt.Spec(s)
			}
			if v == "" {
				continue
			}
			if p, ok := o.count[opt.Flag]; ok {
				*p, _ = strconv.ParseInt(v, 10, 64) // Spec writes the number
			} else if p, ok := o.text[opt.Flag]; ok {
				*p = v
			}
		}
	}
}

// values are the options given, by flag.
func (o *ownFlags) values() map[string]string {
	out := map[string]string{}
	for flag, p := range o.text {
		if *p != "" {
			out[flag] = *p
		}
	}
	for flag, p := range o.count {
		if *p != 0 {
			out[flag] = strconv.FormatInt(*p, 10)
		}
	}
	return out
}

// check refuses an option given for a stream of kind that is not its
// format's, or a count that is not one; formatFlag is the flag naming the
// format (index's --format, convert's --from).
func (o *ownFlags) check(kind datav1alpha1.ShardFormat, formatFlag string) error {
	return o.reg.CheckOptions(kind, o.values(), formatFlag)
}

// formatsHelp is the help of each format of reg that has help or options
// of its own (format.Registry.IndexHelp, Options), as "With --format KIND,
// …" paragraphs wrapped at width, each naming the format's own options.
func formatsHelp(reg format.Registry, width int) string {
	var paras []string
	for _, kind := range reg.Kinds(func(format.Format) bool { return true }) {
		h := reg.IndexHelp(datav1alpha1.ShardFormat(kind))
		var own []string
		for _, opt := range reg.Options(datav1alpha1.ShardFormat(kind)) {
			own = append(own, "--"+opt.Flag+" ("+opt.Field+")")
		}
		switch {
		case len(own) == 1 && h != "":
			h += " Its own option: " + own[0] + "."
		case len(own) > 1 && h != "":
			h += " Its own options: " + strings.Join(own, ", ") + "."
		case len(own) > 0:
			h = "its own options are " + strings.Join(own, ", ") + "."
		}
		if h != "" {
			paras = append(paras, wrap("With --format "+kind+", "+h, width))
		}
	}
	return strings.Join(paras, "\n\n")
}

// wrap fills text's words into lines of at most width characters (a
// longer word alone on its line).
func wrap(text string, width int) string {
	var b strings.Builder
	n := 0
	for _, w := range strings.Fields(text) {
		switch {
		case n == 0:
		case n+1+len([]rune(w)) > width:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += len([]rune(w))
	}
	return b.String()
}

// Command crdref writes the reference of a CRD's fields as Markdown, from
// the schema controller-gen generated from the API types (so the page
// cannot drift from them): every field's path, type, default and
// description, and the CEL rules with their messages.
//
//	crdref config/crd/bases/data.shardfeed.io_trainingdatasets.yaml > docs/reference/trainingdataset.md
package main

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdref CRD.yaml > reference.md")
		os.Exit(2)
	}
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "crdref:", err)
		os.Exit(1)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		fmt.Fprintln(os.Stderr, "crdref:", err)
		os.Exit(1)
	}
	var b strings.Builder
	for _, v := range crd.Spec.Versions {
		fmt.Fprintf(&b, "# %s (`%s/%s`)\n\n", crd.Spec.Names.Kind, crd.Spec.Group, v.Name)
		fmt.Fprintf(&b, "Generated from the API types by `make manifests` (hack/crdref): do not edit. Short name: `%s`; `kubectl explain %s.spec` shows the same.\n\n",
			strings.Join(crd.Spec.Names.ShortNames, "`, `"), strings.ToLower(crd.Spec.Names.Kind))
		root := v.Schema.OpenAPIV3Schema
		for _, top := range []string{"spec", "status"} {
			s, ok := root.Properties[top]
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "## `.%s`\n\n%s\n\n", top, oneLine(s.Description))
			fmt.Fprintln(&b, "| field | type | default | description |")
			fmt.Fprintln(&b, "| --- | --- | --- | --- |")
			var rules []string
			walk(&b, &rules, "."+top, s)
			if len(rules) > 0 {
				fmt.Fprintf(&b, "\nRules the API server enforces (CEL):\n\n")
				for _, r := range rules {
					fmt.Fprintf(&b, "- %s\n", r)
				}
			}
			b.WriteString("\n")
		}
	}
	fmt.Print(b.String())
}

func walk(b *strings.Builder, rules *[]string, path string, s apiextensionsv1.JSONSchemaProps) {
	for _, r := range s.XValidations {
		*rules = append(*rules, fmt.Sprintf("`%s`: %s", path, oneLine(r.Message)))
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	req := map[string]bool{}
	for _, r := range s.Required {
		req[r] = true
	}
	for _, n := range names {
		p := s.Properties[n]
		field := path + "." + n
		typ := p.Type
		if p.Type == "array" && p.Items != nil && p.Items.Schema != nil {
			typ = "[]" + p.Items.Schema.Type
		}
		if p.XIntOrString {
			typ = "int or string"
		}
		if req[n] {
			typ += ", required"
		}
		def := ""
		if p.Default != nil {
			def = "`" + string(p.Default.Raw) + "`"
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", field, typ, def, oneLine(p.Description)+constraints(p))
		switch {
		case p.Type == "object" && len(p.Properties) > 0:
			walk(b, rules, field, p)
		case p.Type == "array" && p.Items != nil && p.Items.Schema != nil:
			it := *p.Items.Schema
			for _, r := range it.XValidations {
				*rules = append(*rules, fmt.Sprintf("`%s[]`: %s", field, oneLine(r.Message)))
			}
			it.XValidations = nil
			if it.Type == "object" {
				walk(b, rules, field+"[]", it)
			}
		default:
			for _, r := range p.XValidations {
				*rules = append(*rules, fmt.Sprintf("`%s`: %s", field, oneLine(r.Message)))
			}
		}
	}
}

func constraints(p apiextensionsv1.JSONSchemaProps) string {
	var c []string
	if p.Minimum != nil {
		c = append(c, "minimum "+strconv.FormatFloat(*p.Minimum, 'f', -1, 64))
	}
	if p.Maximum != nil {
		c = append(c, "maximum "+strconv.FormatFloat(*p.Maximum, 'f', -1, 64))
	}
	if p.MaxLength != nil {
		c = append(c, fmt.Sprintf("at most %d characters", *p.MaxLength))
	}
	if p.Pattern != "" {
		c = append(c, "pattern `"+strings.ReplaceAll(p.Pattern, "|", `\|`)+"`")
	}
	if len(p.Enum) > 0 {
		var e []string
		for _, v := range p.Enum {
			e = append(e, "`"+string(v.Raw)+"`")
		}
		c = append(c, "one of "+strings.Join(e, ", "))
	}
	if len(c) == 0 {
		return ""
	}
	return " (" + strings.Join(c, "; ") + ")"
}

func oneLine(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(strings.TrimSpace(s), "\n", " "), "|", `\|`)
}

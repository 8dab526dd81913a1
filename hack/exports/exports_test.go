// Package exports holds a check of the repository's packages: each
// exports at most a set number of top-level names, unless exports.txt
// names it with its own limit and the reason. A package that keeps growing
// its surface is doing more than one job (docs/development.md, "Where to
// change what"): split it, or say here why not.
package exports

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// limit is the most top-level names a package exports without a reason.
const limit = 40

// exported counts the exported top-level names (functions, types,
// variables and constants; not methods or fields) of the package in dir,
// its tests left out.
func exported(dir string) (int, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return 0, err
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					n++
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							n++
						}
					case *ast.ValueSpec:
						for _, id := range s.Names {
							if id.IsExported() {
								n++
							}
						}
					}
				}
			}
		}
	}
	return n, nil
}

// allowance is a line of exports.txt: a package's own limit and why.
type allowance struct {
	limit  int
	reason string
}

func readAllowances(t *testing.T) map[string]allowance {
	t.Helper()
	f, err := os.Open("exports.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	out := map[string]allowance{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.SplitN(text, " ", 3)
		if len(fields) < 3 {
			t.Fatalf("exports.txt:%d: %q: want PACKAGE LIMIT REASON", line, text)
		}
		n, err := strconv.Atoi(fields[1])
		if err != nil || n <= limit {
			t.Fatalf("exports.txt:%d: limit %q: want a number above %d (below it, no line is needed)", line, fields[1], limit)
		}
		out[fields[0]] = allowance{n, strings.TrimSpace(fields[2])}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNoPackageExportsMoreThanItsLimit walks the repository's Go packages
// (bin/, .cache/ and testdata/ left out) and fails for each whose exported
// names pass its limit, for each whose count fell under its own limit
// (which is then lowered: a ratchet), and for each line of exports.txt
// whose package is gone or back under the common limit.
func TestNoPackageExportsMoreThanItsLimit(t *testing.T) {
	allowed := readAllowances(t)
	root := filepath.Join("..", "..")
	counts := map[string]int{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		switch d.Name() {
		case "bin", ".cache", "testdata", "node_modules", ".git":
			return filepath.SkipDir
		}
		n, err := exported(path)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		counts[filepath.ToSlash(rel)] = n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for p := range counts {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		n := counts[p]
		a, ok := allowed[p]
		switch {
		case !ok && n > limit:
			t.Errorf("%s exports %d top-level names, over %d: split it along its jobs, or add it to hack/exports/exports.txt with a limit and the reason", p, n, limit)
		case ok && n > a.limit:
			t.Errorf("%s exports %d top-level names, over its limit of %d (%s): split it, or raise the limit in hack/exports/exports.txt saying why", p, n, a.limit, a.reason)
		case ok && n < a.limit && n > limit:
			// A ratchet: the room a package gave up is not there to take again.
			t.Errorf("%s exports %d top-level names, under its limit of %d: lower the limit in hack/exports/exports.txt to %d", p, n, a.limit, n)
		}
	}
	for p, a := range allowed {
		if n, ok := counts[p]; !ok || n <= limit {
			t.Errorf("hack/exports/exports.txt gives %s a limit of %d, and it exports %d names: remove the line", p, a.limit, n)
		}
	}
}

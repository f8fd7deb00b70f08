package main

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryVariableReadIsKnown: every CRACKBOX_* name in the string literals of the module's code is one
// the unknown-variable warning knows, so crackbox never warns that it ignores a
// variable some package reads (the proxy daemon's CRACKBOX_STATE_KEY once was).
func TestEveryVariableReadIsKnown(t *testing.T) {
	name := regexp.MustCompile(`CRACKBOX_[A-Z0-9_]+`)
	spelt := map[string]string{}
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && d.Name() != ".." || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		// Tests spell misspelt names on purpose; only what crackbox runs counts.
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		// String literals: what the code reads and the help it prints, not its comments.
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				for _, v := range name.FindAllString(lit.Value, -1) {
					if !strings.HasSuffix(v, "_") { // a prefix being built, CRACKBOX_<SECTION>_<KEY>
						spelt[v] = path
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(spelt) < 10 {
		t.Fatalf("found %d CRACKBOX_* names in the module: the walk is wrong", len(spelt))
	}
	var env []string
	for n := range spelt {
		env = append(env, n+"=x")
	}
	var out bytes.Buffer
	warnUnknownEnv(&out, env)
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		for _, n := range name.FindAllString(line, 1) {
			t.Errorf("%s reads %s, but crackbox warns it is unknown: add it to internal/envvar", spelt[n], n)
		}
	}
}

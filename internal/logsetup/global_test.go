package logsetup

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// globalLogging names slog's package-level functions that log through, read or
// replace the process-wide logger.
var globalLogging = map[string]bool{
	"Debug": true, "DebugContext": true,
	"Info": true, "InfoContext": true,
	"Warn": true, "WarnContext": true,
	"Error": true, "ErrorContext": true,
	"Log": true, "LogAttrs": true,
	"With": true, "Default": true, "SetDefault": true,
}

// TestNoLibraryLogsThroughTheGlobal: a library under pkg/ or internal/ logs only
// through the *slog.Logger it was given, so one binary's setup reaches every
// line and a test or benchmark silences a library without touching a global.
// The files are the ones go list builds, test files left out.
func TestNoLibraryLogsThroughTheGlobal(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.Dir}}{{range .GoFiles}} {{.}}{{end}}`, "../../pkg/...", "../../internal/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, _ := filepath.Abs("../..")
	files := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		for _, name := range f[1:] {
			path := filepath.Join(f[0], name)
			files++
			rel, _ := filepath.Rel(root, path)
			for _, bad := range globalCalls(t, path) {
				t.Errorf("%s: %s: take a Log *slog.Logger option and log through it", rel, bad)
			}
		}
	}
	if files < 100 {
		t.Fatalf("go list named %d library files, want the tree's", files)
	}
}

// globalCalls lists the uses in file of slog's process-wide logger; a package
// main is a binary, which owns that logger, and is left alone.
func globalCalls(t *testing.T, file string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	if f.Name.Name == "main" {
		return nil
	}
	local := ""
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); p != "log/slog" {
			continue
		}
		local = "slog"
		if im.Name != nil {
			local = im.Name.Name
		}
	}
	if local == "" {
		return nil
	}
	var bad []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == local && globalLogging[sel.Sel.Name] {
			bad = append(bad, fmt.Sprintf("line %d: slog.%s", fset.Position(sel.Pos()).Line, sel.Sel.Name))
		}
		return true
	})
	return bad
}

// TestGlobalCallsSeesTheForms: the scan catches a call, a call under another
// import name and a function value, and passes a logger's own methods.
func TestGlobalCallsSeesTheForms(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, src string
		want      int
	}{
		{"call", "package p\nimport \"log/slog\"\nfunc f() { slog.Info(\"x\") }\n", 1},
		{"renamed", "package p\nimport l \"log/slog\"\nfunc f() { l.WarnContext(nil, \"x\") }\n", 1},
		{"value", "package p\nimport \"log/slog\"\nvar g = slog.Default\n", 1},
		{"set", "package p\nimport \"log/slog\"\nfunc f(l *slog.Logger) { slog.SetDefault(l) }\n", 1},
		{"given", "package p\nimport \"log/slog\"\nfunc f(l *slog.Logger) { l.Info(\"x\"); _ = slog.New(slog.DiscardHandler) }\n", 0},
		{"main", "package main\nimport \"log/slog\"\nfunc main() { slog.Info(\"x\") }\n", 0},
	}
	for _, c := range cases {
		file := filepath.Join(dir, c.name+".go")
		if err := os.WriteFile(file, []byte(c.src), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := globalCalls(t, file); len(got) != c.want {
			t.Errorf("%s: found %v, want %d", c.name, got, c.want)
		}
	}
}

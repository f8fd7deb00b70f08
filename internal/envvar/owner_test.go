package envvar

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// owners may read the environment by any name: this package for the names above,
// pkg/config for the configuration keys, and the test-only harnesses for the
// variables that steer the test suite (they are in no binary).
var owners = map[string]bool{
	"internal/envvar":   true,
	"pkg/config":        true,
	"internal/jailtest": true,
	"internal/testreq":  true,
}

// TestNoLibraryReadsOurVariables: outside the owners, a library reads the
// environment only by a literal name that is not CRACKBOX_* or ARIZUKO_*; a name
// it cannot see (a constant, a variable) counts as ours, since that is how the
// state key and the run dir base were once read behind the warning's back.
func TestNoLibraryReadsOurVariables(t *testing.T) {
	for _, root := range []string{"pkg", "internal"} {
		err := filepath.WalkDir(filepath.Join("../..", root), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel("../..", path)
			if d.IsDir() {
				if owners[filepath.ToSlash(rel)] || d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			for _, bad := range envReads(t, path) {
				t.Errorf("%s: %s: read it in the binary and pass the value in, or through envvar.Get", rel, bad)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// envReads lists the calls in file that read the environment by a name that is
// ours or that the test cannot see.
func envReads(t *testing.T, file string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	local := map[string]string{} // the file's name for os and syscall
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		if p != "os" && p != "syscall" {
			continue
		}
		name := p
		if im.Name != nil {
			name = im.Name.Name
		}
		local[name] = p
	}
	var bad []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		pkg, ok := sel.X.(*ast.Ident)
		if !ok || local[pkg.Name] == "" {
			return true
		}
		fn := local[pkg.Name] + "." + sel.Sel.Name
		at := fset.Position(call.Pos()).Line
		switch fn {
		case "os.Environ", "syscall.Environ":
			bad = append(bad, fmt.Sprintf("line %d: %s reads every variable", at, fn))
		case "os.Getenv", "os.LookupEnv", "syscall.Getenv":
			if len(call.Args) != 1 {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				bad = append(bad, fmt.Sprintf("line %d: %s by a name that is not a literal", at, fn))
				return true
			}
			if v, _ := strconv.Unquote(lit.Value); strings.HasPrefix(v, "CRACKBOX_") || strings.HasPrefix(v, "ARIZUKO_") {
				bad = append(bad, fmt.Sprintf("line %d: %s(%q)", at, fn, v))
			}
		}
		return true
	})
	return bad
}

// TestGetKnowsOnlyNames: Get reads the listed names and nothing else.
func TestGetKnowsOnlyNames(t *testing.T) {
	t.Setenv(RunDir, "/listed")
	t.Setenv("CRACKBOX_NOT_LISTED", "/unlisted")
	if got := Get(RunDir); got != "/listed" {
		t.Errorf("Get(%s) = %q, want /listed", RunDir, got)
	}
	if got := Get("CRACKBOX_NOT_LISTED"); got != "" {
		t.Errorf("Get of a name not in Names = %q, want \"\"", got)
	}
}

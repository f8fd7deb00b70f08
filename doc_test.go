package crackbox

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLayoutMap: every package directory of the module is named in this package's doc
// (go doc's map) and in README.md's layout table, and neither names one that is gone.
func TestLayoutMap(t *testing.T) {
	pkgs := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin" || d.Name() == "dist") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && filepath.Dir(path) != "." {
			pkgs[filepath.Dir(path)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no ## Layout section")
	}
	for p := range pkgs {
		if strings.HasPrefix(p, "cmd/") {
			continue // the binaries themselves
		}
		if !regexp.MustCompile(`(?m)^//\t` + regexp.QuoteMeta(p) + `\s`).Match(doc) {
			t.Errorf("doc.go does not place %s", p)
		}
		if !strings.Contains(table, "`"+p+"`") {
			t.Errorf("README.md's layout table does not list %s", p)
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^//\t(\S+)`).FindAllSubmatch(doc, -1) {
		if p := string(m[1]); !pkgs[p] {
			t.Errorf("doc.go names %s, which holds no Go package", p)
		}
	}
	for _, m := range regexp.MustCompile("`((?:pkg|internal|bench|guestfs)/[^`]+)`").FindAllStringSubmatch(table, -1) {
		if _, err := os.Stat(m[1]); err != nil {
			t.Errorf("README.md's layout table lists %s, which is not in the tree", m[1])
		}
	}
}

// TestReadmePathsExist: every repository path README.md names in backticks
// is there, so the reader finds what it points to.
func TestReadmePathsExist(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("`((?:cmd|pkg|internal|examples|scripts|contrib|bench|guestfs|docs)/[A-Za-z0-9_./-]+|[a-z]+\\.toml\\.example)`")
	n := 0
	for _, m := range re.FindAllStringSubmatch(string(readme), -1) {
		n++
		if _, err := os.Stat(strings.TrimSuffix(m[1], "/")); err != nil {
			t.Errorf("README.md names %s: %v", m[1], err)
		}
	}
	if n < 10 {
		t.Fatalf("found %d paths in README.md: the pattern is wrong", n)
	}
}

package crackbox

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// goList runs go list in the module with args and returns its output's lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	return strings.Fields(string(out))
}

// sections says which binary each package of the module is built into, from the
// binaries' imports: crackbox, arizuko, both, guest (guest-init alone) or test (none).
func sections(t *testing.T) map[string]string {
	t.Helper()
	mod := goList(t, "-m")[0] + "/"
	reached := func(main string) map[string]bool {
		m := map[string]bool{}
		for _, p := range goList(t, "-deps", main) {
			if rel, ok := strings.CutPrefix(p, mod); ok {
				m[rel] = true
			}
		}
		return m
	}
	c, a, g := reached("./cmd/crackbox"), reached("./cmd/arizuko"), reached("./guestfs/init")
	out := map[string]string{}
	for _, p := range goList(t, "./...") {
		rel, ok := strings.CutPrefix(p, mod)
		if !ok {
			continue // the module's root package, this map
		}
		switch {
		case c[rel] && a[rel]:
			out[rel] = "both"
		case c[rel]:
			out[rel] = "crackbox"
		case a[rel]:
			out[rel] = "arizuko"
		case g[rel]:
			out[rel] = "guest"
		default:
			out[rel] = "test"
		}
	}
	return out
}

// layoutSection is README.md's Layout section: its drawing and its table's rows
// (each path with the binary the row says it is built into).
func layoutSection(t *testing.T) (drawing []string, rows map[string]string) {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no ## Layout section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, draw, ok := strings.Cut(section, "```\n")
	if !ok {
		t.Fatal("README.md's Layout section has no drawing")
	}
	draw, _, _ = strings.Cut(draw, "```")
	drawing = strings.Split(strings.TrimSuffix(draw, "\n"), "\n")
	rows = map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| `") || len(cells) != 5 {
			continue
		}
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cells[1], -1) {
			rows[m[1]] = strings.TrimSpace(cells[2])
		}
	}
	if len(rows) < 10 {
		t.Fatalf("found %d rows in README.md's layout table: the pattern is wrong", len(rows))
	}
	return drawing, rows
}

// drawn is what a layout drawing shows: a line starting at the margin names a
// directory, and the indented lines below it its subdirectories ("name/").
func drawn(t *testing.T, drawing []string) map[string]bool {
	t.Helper()
	dirs := map[string]bool{}
	parent := ""
	for _, line := range drawing {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		names := []string{fields[0]}
		if line[0] == ' ' {
			names = fields
		} else {
			parent = strings.TrimSuffix(fields[0], "/")
		}
		for _, f := range names {
			if !strings.HasSuffix(f, "/") {
				continue // prose
			}
			d := strings.TrimSuffix(f, "/")
			if line[0] == ' ' {
				d = parent + "/" + d
			}
			if st, err := os.Stat(d); err != nil || !st.IsDir() {
				t.Errorf("the layout drawing shows %s, which is not a directory", d)
			}
			dirs[d] = true
		}
	}
	return dirs
}

// TestLayoutMap: README.md's layout table gives every package of the module a row
// saying which binary it is built into, and that is what the binaries' imports say;
// the drawing (README.md's and doc.go's, the same) shows every package directory
// down to pkg/X/Y and internal/X; pkg/ holds at most 15 directories and nothing
// only tests import.
func TestLayoutMap(t *testing.T) {
	want := sections(t)
	drawing, rows := layoutSection(t)
	for p, sec := range want {
		got, ok := rows[p]
		switch {
		case !ok:
			t.Errorf("README.md's layout table has no row for %s (built into: %s)", p, sec)
		case got != sec:
			t.Errorf("README.md's layout table says %s is built into %q; go list -deps says %q", p, got, sec)
		}
		if strings.HasPrefix(p, "pkg/") && sec == "test" {
			t.Errorf("%s is imported by tests alone: move it under internal/", p)
		}
	}
	for p, sec := range rows {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("README.md's layout table lists %s, which is not in the tree", p)
		}
		if _, pkg := want[p]; !pkg && sec != "" {
			t.Errorf("README.md's layout table says %s is built into %q, but it holds no Go package", p, sec)
		}
	}

	dirs := drawn(t, drawing)
	for p := range want {
		depth := map[string]int{"pkg": 3, "internal": 2}[strings.SplitN(p, "/", 2)[0]]
		if depth == 0 {
			continue
		}
		parts := strings.Split(p, "/")
		if len(parts) > depth {
			parts = parts[:depth]
		}
		if d := strings.Join(parts, "/"); !dirs[d] {
			t.Errorf("the layout drawing does not show %s (for %s)", d, p)
		}
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range drawing {
		if !strings.Contains(string(doc), "\n//\t"+line+"\n") {
			t.Errorf("doc.go's drawing lacks README.md's line %q", line)
		}
	}

	top, err := os.ReadDir("pkg")
	if err != nil {
		t.Fatal(err)
	}
	if len(top) > 15 {
		t.Errorf("pkg/ holds %d directories; nest them by product and concern to at most 15", len(top))
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

// Package readmetest lets a package's tests hold README.md to the numbers the code
// enforces: the threat model promises bounds (streams, bytes, seconds), and a test
// beside each constant reads the promise back, so neither can change alone.
package readmetest

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// ThreatModel is README.md's Threat model section with each run of white space (line
// breaks included) as one space, so a phrase matches wherever the text wraps.
func ThreatModel(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory, so no README.md to read")
		}
		dir = parent
	}
	b, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Threat model\n")
	if !ok {
		t.Fatal("README.md has no ## Threat model section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	return strings.Join(strings.Fields(section), " ")
}

// Number is the number the one match of pattern's first group reads in text; a
// pattern that matches nowhere or twice fails the test, as it no longer says which
// sentence holds the promise.
func Number(t testing.TB, text, pattern string) int64 {
	t.Helper()
	m := regexp.MustCompile(pattern).FindAllStringSubmatch(text, -1)
	if len(m) != 1 {
		t.Fatalf("README.md's threat model has %d matches for %q, want 1", len(m), pattern)
	}
	n, err := strconv.ParseInt(m[0][1], 10, 64)
	if err != nil {
		t.Fatalf("README.md's threat model: %q reads %q, not a number", pattern, m[0][1])
	}
	return n
}

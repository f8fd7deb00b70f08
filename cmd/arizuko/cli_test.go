package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestEveryCommandHasExamples(t *testing.T) {
	root := newRootCmd()
	seen := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		seen[c.CommandPath()] = true
		if c.Name() != "help" && !strings.Contains(c.CommandPath(), "completion") && c.Example == "" && !c.Hidden {
			t.Errorf("%q has no Examples section in --help", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for path := range examples {
		if !seen[path] {
			t.Errorf("examples for %q, which is not a command", path)
		}
	}
	if out := mustAz(t, env(t, t.TempDir()), "folder", "add", "--help"); !strings.Contains(out, "Examples:\n  arizuko folder add demo") {
		t.Errorf("folder add --help lacks its examples:\n%s", out)
	}
}

func TestCompleteFoldersAndChats(t *testing.T) {
	data := t.TempDir()
	e := env(t, data)
	mustAz(t, e, "init")
	mustAz(t, e, "folder", "add", "corp", "--name", "Corp")
	mustAz(t, e, "folder", "add", "corp/eng")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"chat", ""}, []string{"corp\tCorp", "corp/eng"}},
		{[]string{"network", "allow", ""}, []string{"corp\t", "corp/eng"}},
		{[]string{"folder", "budget", ""}, []string{"corp\t", "corp/eng"}},
		{[]string{"messages", ""}, []string{"web:corp\t", "web:corp/eng"}},
		{[]string{"send", ""}, []string{"web:corp\t", "web:corp/eng"}},
	} {
		out := mustAz(t, e, append([]string{"__complete"}, tc.args...)...)
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("complete %v lacks %q:\n%s", tc.args, w, out)
			}
		}
	}
}

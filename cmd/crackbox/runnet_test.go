package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAllowList(t *testing.T) {
	file := filepath.Join(t.TempDir(), "allow.txt")
	os.WriteFile(file, []byte("# registries\npypi.org files.pythonhosted.org\n\n*.github.com # code\n"), 0o600)
	for _, c := range []struct {
		name    string
		nf      netFlags
		mode    string
		want    []string
		wantErr string
	}{
		{"comma and repeat", netFlags{allow: []string{"a.test,b.test", "c.test:8443"}}, "auto", []string{"a.test", "b.test", "c.test:8443"}, ""},
		{"file", netFlags{allowFiles: []string{file}}, "tap", []string{"pypi.org", "files.pythonhosted.org", "*.github.com"}, ""},
		{"block everything", netFlags{allow: []string{"none.invalid"}}, "proxy-only", []string{"none.invalid"}, ""},
		{"missing", netFlags{}, "auto", nil, "--allow is required"},
		{"none needs nothing", netFlags{}, "none", nil, ""},
		{"learn needs nothing", netFlags{learn: true}, "tap", nil, ""},
		{"learn with allow", netFlags{learn: true, allow: []string{"a.test"}}, "tap", nil, "drop --allow or --learn"},
		{"bad entry", netFlags{allow: []string{"exa mple..com"}}, "tap", nil, "--allow"},
		{"missing file", netFlags{allowFiles: []string{"/nonexistent/allow"}}, "tap", nil, "--allow-file"},
	} {
		list, err := allowList(c.nf, c.mode, []int{80, 443})
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		got := list.Entries()
		for _, w := range c.want {
			if !strings.Contains(strings.Join(got, " "), w) {
				t.Errorf("%s: entries %v lack %q", c.name, got, w)
			}
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: entries %v, want %v", c.name, got, c.want)
		}
	}
}

// TestCLIRequiresAllow: a networked run without an allowlist fails before booting,
// naming the fixes.
func TestCLIRequiresAllow(t *testing.T) {
	cmd := cliCmd(t, context.Background(), t.TempDir(), "--", "true")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if code := exitCode(cmd.Run()); code != 125 || !strings.Contains(errb.String(), "none.invalid") || !strings.Contains(errb.String(), "--net none") {
		t.Fatalf("exit %d stderr %q", code, errb.String())
	}
}

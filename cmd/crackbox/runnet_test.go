package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/crackbox/crackbox/pkg/jail/runrec"
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

// TestCLIRefusesSystemShare: -v /etc read-write, or /etc as the workdir, is
// refused before a guest boots, with the way out named.
func TestCLIRefusesSystemShare(t *testing.T) {
	for _, args := range [][]string{
		{"--net", "none", "-v", "/etc:/mnt/e", "--", "true"},
		{"--net", "none", "--workdir", "/etc", "--", "true"},
	} {
		cmd := cliCmd(t, context.Background(), t.TempDir(), args...)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if code := exitCode(cmd.Run()); code != 125 || !strings.Contains(errb.String(), "--allow-system-share") {
			t.Errorf("%q: exit %d stderr %q", args, code, errb.String())
		}
	}
}

// TestLogIsCapped: a guest whose every refused request adds a line cannot
// grow --log FILE past the run record's cap: it rotates to FILE.1.
func TestLogIsCapped(t *testing.T) {
	rec, err := (&runrec.Store{Dir: t.TempDir()}).Create(runrec.Manifest{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	w, done, err := decisionSink(rec, path)
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(strings.Repeat("x", 1023) + "\n")
	for written := 0; written < 3*runrec.DecisionsMax; written += len(line) {
		if _, err := w.Write(line); err != nil {
			t.Fatal(err)
		}
	}
	done()
	for _, p := range []string{path, path + ".1"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if st.Size() > runrec.DecisionsMax {
			t.Errorf("%s is %d bytes, past the cap of %d", p, st.Size(), runrec.DecisionsMax)
		}
	}
}

// TestLogRefusesPlantedFiles: a guest that shares the directory of --log can plant a
// symlink (to a host file) or a fifo there before the next run; neither is written.
func TestLogRefusesPlantedFiles(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "victim")
	if err := os.WriteFile(target, []byte("keep\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "link.log")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "real"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.log"), 0o600); err != nil {
		t.Fatal(err)
	}
	rec, err := (&runrec.Store{Dir: t.TempDir()}).Create(runrec.Manifest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"link.log", "sub/x.log", "fifo.log"} {
		w, done, err := decisionSink(rec, filepath.Join(dir, name))
		if err == nil {
			fmt.Fprintln(w, "written")
			done()
			t.Errorf("--log %s: opened", name)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "keep\n" {
		t.Errorf("symlink target was written: %q", b)
	}
	w, done, err := decisionSink(rec, filepath.Join(dir, "ok.log"))
	if err != nil {
		t.Fatalf("plain file: %v", err)
	}
	fmt.Fprintln(w, "line")
	done()
	if b, _ := os.ReadFile(filepath.Join(dir, "ok.log")); string(b) != "line\n" {
		t.Errorf("ok.log = %q", b)
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/jail/runrec"
)

func TestEveryCommandHasExamples(t *testing.T) {
	root := newRootCmd()
	seen := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		seen[c.CommandPath()] = true
		if c.Name() != "help" && c.Name() != "completion" && !strings.Contains(c.CommandPath(), "completion ") && c.Example == "" && !c.Hidden {
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
	out, err := exec.Command(crackboxBin(t), "runs", "ls", "--help").Output()
	if err != nil || !strings.Contains(string(out), "Examples:\n  crackbox runs ls") {
		t.Errorf("runs ls --help lacks its examples (%v):\n%s", err, out)
	}
}

// cli runs the crackbox binary with stdin and extra environment, without booting a
// guest (a missing kernel stops every run after its warnings), and returns stdout and stderr.
func cli(t *testing.T, stdin *os.File, env []string, args ...string) (string, string) {
	t.Helper()
	cmd := exec.Command(crackboxBin(t), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "CRACKBOX_RUNS_DIR=" + t.TempDir()}, env...)
	cmd.Dir = t.TempDir()
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Run()
	return out.String(), errb.String()
}

func TestRunWarnings(t *testing.T) {
	pipe := func() *os.File {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		w.WriteString("data\n")
		w.Close()
		t.Cleanup(func() { r.Close() })
		return r
	}
	file := func() *os.File {
		p := filepath.Join(t.TempDir(), "in")
		os.WriteFile(p, []byte("data\n"), 0o600)
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	run := []string{"run", "--net", "none", "--kernel", "/nonexistent/vmlinux"}
	for _, tc := range []struct {
		name     string
		stdin    *os.File
		env      []string
		args     []string
		want     []string
		dontWant []string
	}{
		{"pipe without -i", pipe(), nil, append(run, "--", "cat"), []string{"stdin is a pipe but -i is not set"}, nil},
		{"file without -i", file(), nil, append(run, "--", "cat"), []string{"stdin is a file but -i is not set"}, nil},
		{"pipe with -i", pipe(), nil, append(run, "-i", "--", "cat"), nil, []string{"-i is not set"}},
		{"no stdin", nil, nil, append(run, "--", "cat"), nil, []string{"-i is not set"}},
		{"allow everything", nil, nil, []string{"run", "--allow", "*", "--kernel", "/nonexistent/vmlinux", "--", "true"},
			[]string{"--allow '*' lets the command reach every public host"}, nil},
		{"allow named hosts", nil, nil, []string{"run", "--allow", "*.example.com", "--kernel", "/nonexistent/vmlinux", "--", "true"},
			nil, []string{"--allow '*'"}},
		{"quiet leaves only the error that fails the run", pipe(), []string{"CRACKBOX_KERNAL=/x"},
			[]string{"run", "-q", "--net", "none", "--kernel", "/nonexistent/vmlinux", "--", "cat"},
			[]string{"/nonexistent/vmlinux"}, []string{"-i is not set", "CRACKBOX_KERNAL", "warning"}},
		{"misspelt variable", nil, []string{"CRACKBOX_KERNAL=/x", "CRACKBOX_PROXY_LISTEN=:0", "CRACKBOX_RUN_DIR=/tmp/x"}, []string{"runs", "ls"},
			[]string{"unknown environment variable CRACKBOX_KERNAL"}, []string{"CRACKBOX_PROXY_LISTEN", "CRACKBOX_RUN_DIR"}},
		{"the proxy daemon's state key is known", nil, []string{"CRACKBOX_STATE_KEY=x"}, []string{"proxy", "serve", "--config", "/nonexistent/crackbox.toml"},
			[]string{"/nonexistent/crackbox.toml"}, []string{"CRACKBOX_STATE_KEY", "warning"}},
	} {
		_, stderr := cli(t, tc.stdin, tc.env, tc.args...)
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", tc.name, w, stderr)
			}
		}
		for _, w := range tc.dontWant {
			if strings.Contains(stderr, w) {
				t.Errorf("%s: stderr has %q:\n%s", tc.name, w, stderr)
			}
		}
	}
}

func TestCompletionAndJSON(t *testing.T) {
	runs := t.TempDir()
	st := &runrec.Store{Dir: runs}
	rec, err := st.Create(runrec.Manifest{Argv: []string{"sh", "-c", "echo a\necho b"}, Net: "none"})
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Finish(func(*runrec.Manifest) {}); err != nil {
		t.Fatal(err)
	}
	env := []string{"CRACKBOX_RUNS_DIR=" + runs}

	out, _ := cli(t, nil, env, "__complete", "run", "--net", "")
	for _, want := range []string{"auto\t", "tap\t", "proxy-only\t", "none\t"} {
		if !strings.Contains(out, want) {
			t.Errorf("--net completion lacks %q:\n%s", want, out)
		}
	}
	out, _ = cli(t, nil, env, "__complete", "runs", "show", "")
	if !strings.Contains(out, rec.ID()+"\tsh -c echo a echo b") {
		t.Errorf("run id completion lacks %s:\n%s", rec.ID(), out)
	}

	out, stderr := cli(t, nil, env, "runs", "ls", "--json")
	var ms []runrec.Manifest
	if err := json.Unmarshal([]byte(out), &ms); err != nil || len(ms) != 1 || ms[0].ID != rec.ID() || ms[0].Build.Module == "" {
		t.Errorf("runs ls --json: %v %+v\n%s%s", err, ms, out, stderr)
	}

	out, stderr = cli(t, nil, []string{"CRACKBOX_KERNEL=/nonexistent/vmlinux"}, "doctor", "--json")
	var checks []check
	if err := json.Unmarshal([]byte(out), &checks); err != nil {
		t.Fatalf("doctor --json: %v\n%s%s", err, out, stderr)
	}
	byWhat := map[string]check{}
	for _, c := range checks {
		byWhat[c.What] = c
	}
	if k := byWhat["kernel"]; k.Status != "fail" || k.Fix == "" || !strings.Contains(k.Detail, "/nonexistent/vmlinux") {
		t.Errorf("doctor --json kernel check %+v, want a failure with a fix", k)
	}
	if _, ok := byWhat["network"]; !ok {
		t.Errorf("doctor --json lacks the network check: %+v", checks)
	}

	// A run dir base others may write to is refused, with the fix.
	bad := filepath.Join(t.TempDir(), "base")
	os.Mkdir(bad, 0o700)
	os.Chmod(bad, 0o777)
	out, _ = cli(t, nil, []string{"CRACKBOX_RUN_DIR=" + bad}, "doctor", "--json")
	checks = nil
	json.Unmarshal([]byte(out), &checks)
	var rd check
	for _, c := range checks {
		if c.What == "run dir" {
			rd = c
		}
	}
	if rd.Status != "fail" || !strings.Contains(rd.Detail, "writable by others") || !strings.Contains(rd.Fix, "rm -rf "+bad) {
		t.Errorf("doctor run dir check for a world-writable base: %+v", rd)
	}
}

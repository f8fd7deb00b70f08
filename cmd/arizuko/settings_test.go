package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/secrets"
)

// azIn runs the binary with stdin from in.
func azIn(t *testing.T, e []string, in string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = e
	cmd.Stdin = strings.NewReader(in)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// Settings that could never work are refused with a message naming the fix,
// exactly as an operator would type them.
func TestSettingsThatCannotWorkAreRefused(t *testing.T) {
	_, e := initData(t)
	mustAz(t, e, "folder", "add", "corp")
	mustAz(t, e, "route", "add", "--seq", "10", "--match", "platform=slack", "--target", "corp")
	cases := []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"route to a missing folder", "", []string{"route", "add", "--match", "platform=x", "--target", "nosuch"}, `no folder "nosuch"`},
		{"duplicate route", "", []string{"route", "add", "--seq", "20", "--match", "platform=slack", "--target", "corp"}, "already sends"},
		{"grant to a missing folder", "", []string{"grant", "add", "folder:nosuch", "mcp:send", "{self}"}, `no folder "nosuch"`},
		{"unknown action", "", []string{"grant", "add", "folder:corp", "bogus:action", "corp"}, "not one arizuko checks"},
		{"unknown namespace", "", []string{"grant", "add", "folder:corp", "bogus:*", "corp"}, "not one arizuko checks"},
		{"inject without host", "", []string{"grant", "add", "folder:corp", "inject:K", "corp"}, "inject:<KEY>@<host>"},
		{"inject to a wildcard", "", []string{"grant", "add", "folder:corp", "inject:K@*.example.com", "corp"}, "illegal character"},
		{"empty secret", "", []string{"secret", "set", "corp", "K"}, "empty"},
		{"secret on argv", "", []string{"secret", "set", "corp", "K", "hunter2"}, "command line"},
		{"secret injection would refuse", "1234567\n", []string{"secret", "set", "corp", "K"}, "at least 8"},
	}
	for _, c := range cases {
		_, stderr, err := azIn(t, e, c.stdin, c.args...)
		if err == nil || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: err=%v stderr=%q, want %q", c.name, err, stderr, c.want)
		}
	}
	if out := mustAz(t, e, "route", "ls"); strings.Count(out, "corp") != 1 {
		t.Fatalf("route table after refusals:\n%s", out)
	}
	if out := mustAz(t, e, "secret", "ls"); strings.Contains(out, "K") {
		t.Fatalf("refused secret stored:\n%s", out)
	}
	// What works still works: a piped secret, known actions and families.
	if _, stderr, err := azIn(t, e, "s3cret-value\n", "secret", "set", "corp", "K"); err != nil {
		t.Fatalf("piped secret: %v %s", err, stderr)
	}
	for _, a := range []string{"mcp:send", "mcp:*", "shell:env:K", "inject:K@api.example.com", "*"} {
		mustAz(t, e, "grant", "add", "folder:corp", a, "corp")
	}
	help := mustAz(t, e, "grant", "add", "--help")
	for _, want := range []string{"mcp:delegate_group", "route:add", "shell:env:<KEY>", "inject:<KEY>@<host>"} {
		if !strings.Contains(help, want) {
			t.Errorf("grant add --help lacks %s:\n%s", want, help)
		}
	}
}

// A well-formed key that is not the store's key stops `arizuko serve` before
// it listens, naming the problem.
func TestServeRefusesWrongKey(t *testing.T) {
	data, e := initData(t)
	mustAz(t, e, "folder", "add", "corp")
	if _, stderr, err := azIn(t, e, "value-v1", "secret", "set", "corp", "TOKEN"); err != nil {
		t.Fatal(stderr)
	}
	wrong := append(append([]string{}, e...), "ARIZUKO_SECRETS_KEY="+secrets.GenerateKey())
	_, stderr, err := az(t, wrong, "serve", "--listen", "127.0.0.1:0")
	if err == nil || !strings.Contains(stderr, "refusing to start") || !strings.Contains(stderr, "does not open") {
		t.Fatalf("serve under a wrong key: %v\n%s", err, stderr)
	}
	if _, err := os.Stat(filepath.Join(data, daemonFile)); !os.IsNotExist(err) {
		t.Fatalf("a refused daemon left %s: %v", daemonFile, err)
	}
	if _, stderr, err := azIn(t, wrong, "value-v2", "secret", "set", "corp", "OTHER"); err == nil || !strings.Contains(stderr, "does not open") {
		t.Fatalf("secret set under a wrong key: %v %s", err, stderr)
	}
}

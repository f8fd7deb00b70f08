package runrec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/buildinfo"
)

func TestRecordLifecycle(t *testing.T) {
	s := &Store{Dir: filepath.Join(t.TempDir(), "runs")}
	start := time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC)
	r, err := s.Create(Manifest{Argv: []string{"pip", "install", "x"}, Allow: []string{"pypi.org"}, Net: "tap", Started: start})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.ID(), "20261130-010203-") {
		t.Errorf("id %q does not sort by start time", r.ID())
	}
	m, err := s.Get(r.ID())
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != StatusRunning || m.PID != os.Getpid() || m.PIDStart == 0 {
		t.Errorf("while running: status %s pid %d start %d", m.Status, m.PID, m.PIDStart)
	}
	if m.Build != buildinfo.Get() || m.Build.Module != "github.com/crackbox/crackbox" {
		t.Errorf("record build %+v, want this binary's %+v", m.Build, buildinfo.Get())
	}
	fmt.Fprintln(r.DecisionLog(), `{"host":"pypi.org","decision":"allow"}`)
	fmt.Fprintln(r.DecisionLog(), `{"host":"evil.test","decision":"deny","reason":"blocked-by-allowlist"}`)
	fmt.Fprintln(r.DecisionLog(), `{"host":"evil.test","decision":"deny","reason":"blocked-by-allowlist"}`)
	err = r.Finish(func(m *Manifest) {
		m.Exit = 1
		m.BootMS, m.RunMS = 900, 2500
		m.Blocked = "crackbox: blocked 2 requests: evil.test (2)"
		m.Ended = start.Add(4 * time.Second)
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err = s.Get(r.ID()[:18]) // a unique prefix is enough
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != StatusExited || m.Exit != 1 || m.Duration() != 4*time.Second {
		t.Errorf("after finish: %+v", m)
	}
	var out bytes.Buffer
	if err := WriteShow(&out, m); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"command:", "pip install x", "status:", "exit 1", "allow:", "pypi.org",
		"blocked:", "blocked 2 requests: evil.test (2)", "decisions:", "1 allowed, 2 blocked", "boot:", "900ms",
		"crackbox:", buildinfo.Get().String()} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("show output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := WriteList(&out, []Manifest{m}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], r.ID()) || !strings.Contains(lines[1], "exit 1") || !strings.Contains(lines[1], "4s") {
		t.Errorf("list output:\n%s", out.String())
	}
}

// TestListKeepsOneLinePerRun: a command with newlines, tabs or other control
// characters (sh -c scripts) stays on its own row, escaped.
func TestListKeepsOneLinePerRun(t *testing.T) {
	ms := []Manifest{
		{ID: "a", Argv: []string{"sh", "-c", "echo one\necho two\r\n\tdone\x1b[2J"}, Status: StatusExited},
		{ID: "b", Argv: []string{"true"}, Status: StatusExited},
	}
	var out bytes.Buffer
	if err := WriteList(&out, ms); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines for 2 runs:\n%s", len(lines), out.String())
	}
	if want := `sh -c echo one\necho two\r\n\tdone?[2J`; !strings.Contains(lines[1], want) {
		t.Errorf("row %q lacks %q", lines[1], want)
	}
}

func TestRecordOfKilledProcessIsLost(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	r, err := s.Create(Manifest{Argv: []string{"sleep", "1"}, PID: cmd.Process.Pid, PIDStart: 1})
	if err != nil {
		t.Fatal(err)
	}
	r.log.Close() // the process died without Finish
	m, err := s.Get(r.ID())
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != StatusLost {
		t.Fatalf("status %q, want %q", m.Status, StatusLost)
	}
}

func TestPruneKeepsNewestAndRunning(t *testing.T) {
	s := &Store{Dir: t.TempDir(), Keep: 2}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	running, err := s.Create(Manifest{Argv: []string{"long"}, Started: base}) // oldest, still running
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := 1; i <= 4; i++ {
		r, err := s.Create(Manifest{Argv: []string{"cmd", fmt.Sprint(i)}, Started: base.Add(time.Duration(i) * time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Finish(nil); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID())
	}
	all, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range all {
		got = append(got, m.ID)
	}
	want := []string{ids[3], ids[2], running.ID()}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("kept %v, want %v (newest two finished plus the running one)", got, want)
	}
}

func TestGetErrors(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	for i := 0; i < 2; i++ {
		if _, err := s.Create(Manifest{ID: fmt.Sprintf("abc-%d", i), Argv: []string{"x"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Get("abc"); !errors.Is(err, ErrAmbiguous) {
		t.Errorf("ambiguous prefix: %v", err)
	}
	if _, err := s.Get("zzz"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
	if _, err := s.Create(Manifest{ID: "../escape"}); err == nil {
		t.Error("id with a path separator accepted")
	}
	if _, err := s.Create(Manifest{ID: "abc-0"}); err == nil {
		t.Error("duplicate id accepted")
	}
	empty := &Store{Dir: filepath.Join(t.TempDir(), "missing")}
	if ms, err := empty.List(); err != nil || len(ms) != 0 {
		t.Errorf("missing dir: %v, %v", ms, err)
	}
}

// TestDecisionLogCapped writes decisions past the cap, as a guest making
// requests without end would: the record's log rotates instead of growing.
func TestDecisionLogCapped(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	r, err := s.Create(Manifest{Argv: []string{"flood"}})
	if err != nil {
		t.Fatal(err)
	}
	line := `{"host":"h.exfil.test","decision":"deny","reason":"blocked-by-allowlist","pad":"` + strings.Repeat("x", 900) + `"}` + "\n"
	for written := 0; written < 3*DecisionsMax; written += len(line) {
		if _, err := io.WriteString(r.DecisionLog(), line); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Finish(nil); err != nil {
		t.Fatal(err)
	}
	m, err := s.Get(r.ID())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{DecisionsFile, DecisionsFile + ".1"} {
		st, err := os.Stat(filepath.Join(m.Dir(), name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > DecisionsMax {
			t.Errorf("%s is %d bytes, cap %d", name, st.Size(), DecisionsMax)
		}
	}
}

// Command testsum runs `go test -json` with its arguments ($GO, else go), prints what a plain `go test`
// would (package lines, the output of failed and skipped tests) and ends with one line
// "N passed, N failed, N skipped" that CI reads. It exits non-zero when a test failed, go
// test failed, or, under CRACKBOX_TEST_REQUIRE=all, any test skipped.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"

	"github.com/crackbox/crackbox/internal/testreq"
)

func main() {
	goBin := os.Getenv("GO") // the Makefile's $(GO)
	if goBin == "" {
		goBin = "go"
	}
	cmd := exec.Command(goBin, append([]string{"test", "-json"}, os.Args[1:]...)...)
	os.Exit(run(cmd, os.Stdout, os.Stderr))
}

// run runs cmd, a `go test -json`, summarises its output and returns the exit status.
func run(cmd *exec.Cmd, stdout, stderr io.Writer) int {
	cmd.Stderr = stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintf(stderr, "testsum: %v\n", err)
		return 2
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "testsum: start go test: %v\n", err)
		return 2
	}
	s := newSummary(stdout)
	readErr := s.read(pipe)
	waitErr := cmd.Wait()
	return s.finish(testreq.Strict(), waitErr != nil || readErr != nil)
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Output     string
}

// summary counts test results and keeps each running test's output until its end.
type summary struct {
	w                      io.Writer
	passed, failed         int
	skipped                []string // "pkg Test: reason" for the list at the end
	buf                    map[string][]string
	failedPkgs, pkgsWithFx map[string]bool // failed packages; those with a failed test
}

func newSummary(w io.Writer) *summary {
	return &summary{w: w, buf: map[string][]string{}, failedPkgs: map[string]bool{}, pkgsWithFx: map[string]bool{}}
}

func (s *summary) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			fmt.Fprintln(s.w, sc.Text()) // not an event: pass it on
			continue
		}
		s.add(e)
	}
	return sc.Err()
}

func (s *summary) add(e event) {
	switch {
	case e.Action == "build-output":
		fmt.Fprint(s.w, e.Output)
	case e.Test == "":
		s.addPackage(e)
	default:
		s.addTest(e)
	}
}

func (s *summary) addPackage(e event) {
	switch e.Action {
	case "output":
		if e.Output != "PASS\n" {
			fmt.Fprint(s.w, e.Output)
		}
	case "fail":
		s.failedPkgs[e.Package] = true
	}
}

func (s *summary) addTest(e event) {
	key := e.Package + " " + e.Test
	switch e.Action {
	case "output":
		s.buf[key] = append(s.buf[key], e.Output)
	case "pass":
		s.passed++
	case "fail":
		s.failed++
		s.pkgsWithFx[e.Package] = true
		fmt.Fprint(s.w, strings.Join(s.buf[key], ""))
	case "skip":
		s.skipped = append(s.skipped, key+": "+skipReason(s.buf[key]))
		fmt.Fprint(s.w, strings.Join(s.buf[key], ""))
	default:
		return
	}
	if e.Action != "output" {
		delete(s.buf, key)
	}
}

// skipReason is the message t.Skip logged: the output lines between "=== RUN" and "--- SKIP".
func skipReason(out []string) string {
	var msg []string
	for _, l := range out {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		msg = append(msg, t)
	}
	return strings.Join(msg, " ")
}

// finish prints the skipped tests and the count line and returns the exit status.
func (s *summary) finish(strict, goFailed bool) int {
	// A package that failed with no failing test (build error, crash in TestMain, a
	// timeout) counts once, so the line never says 0 failed for a failed run.
	var broken []string
	for p := range s.failedPkgs {
		if !s.pkgsWithFx[p] {
			broken = append(broken, p)
		}
	}
	sort.Strings(broken)
	failed := s.failed + len(broken)
	if goFailed && failed == 0 {
		failed = 1
		broken = append(broken, "go test (see its errors above)")
	}
	for _, b := range broken {
		fmt.Fprintf(s.w, "testsum: failed outside any test: %s\n", b)
	}
	for _, k := range s.skipped {
		fmt.Fprintf(s.w, "testsum: skipped %s\n", k)
	}
	status := 0
	if failed > 0 {
		status = 1
	}
	if strict && len(s.skipped) > 0 {
		fmt.Fprintf(s.w, "testsum: %d tests skipped under %s=all; install what they name\n", len(s.skipped), testreq.Switch)
		status = 1
	}
	fmt.Fprintf(s.w, "%d passed, %d failed, %d skipped\n", s.passed, failed, len(s.skipped))
	return status
}

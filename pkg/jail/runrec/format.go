package runrec

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
)

// outcome is the STATUS column: the exit status once ended.
func (m Manifest) outcome() string {
	switch m.Status {
	case StatusExited:
		if m.Signal != 0 {
			return fmt.Sprintf("signal %d", m.Signal)
		}
		return fmt.Sprintf("exit %d", m.Exit)
	case StatusFailed:
		return "failed"
	}
	return m.Status
}

func round(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// oneLine escapes the characters that would break a table row (a command
// from sh -c often spans lines).
var oneLine = strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", `\t`, "\v", `\v`, "\f", `\f`)

// command renders argv for one line, cut to width characters.
func command(argv []string, width int) string {
	s := []rune(oneLine.Replace(strings.Join(argv, " ")))
	for i, r := range s {
		if unicode.IsControl(r) {
			s[i] = '?'
		}
	}
	if len(s) > width {
		s = append(s[:width-3], []rune("...")...)
	}
	return string(s)
}

// WriteList prints the records as a table, newest first.
func WriteList(w io.Writer, ms []Manifest) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTARTED\tTOOK\tSTATUS\tNET\tCOMMAND")
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.Started.Local().Format("2006-01-02 15:04:05"),
			round(m.Duration()), m.outcome(), m.Net, command(m.Argv, 60))
	}
	return tw.Flush()
}

// WriteShow prints one record in full, with a count of its proxy decisions.
func WriteShow(w io.Writer, m Manifest) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	row("id", m.ID)
	row("command", strings.Join(m.Argv, " "))
	row("workdir", m.Workdir)
	row("status", m.outcome())
	row("error", m.Error)
	row("network", m.Net)
	row("accel", m.Accel)
	if m.Build.Module != "" {
		row("crackbox", m.Build.String())
	}
	allow := strings.Join(m.Allow, ",")
	if m.Learn {
		allow = "(learn mode: nothing)"
	}
	row("allow", allow)
	row("started", m.Started.Local().Format(time.RFC3339))
	if !m.Ended.IsZero() {
		row("ended", m.Ended.Local().Format(time.RFC3339))
	}
	row("took", round(m.Duration()))
	if m.BootMS > 0 {
		row("boot", round(time.Duration(m.BootMS)*time.Millisecond))
	}
	if m.RunMS > 0 {
		row("command ran", round(time.Duration(m.RunMS)*time.Millisecond))
	}
	row("blocked", strings.TrimPrefix(m.Blocked, "crackbox: "))
	if len(m.Learned) > 0 {
		row("learned", "--allow "+strings.Join(m.Learned, ","))
	}
	if allowed, blocked, err := m.countDecisions(); err == nil {
		row("decisions", fmt.Sprintf("%d allowed, %d blocked (%s)", allowed, blocked, DecisionsFile))
	}
	row("record", m.recordDir)
	row("run dir", m.RunDir)
	return tw.Flush()
}

// countDecisions tallies the decision log's lines by their "decision" field.
func (m Manifest) countDecisions() (allowed, blocked int, err error) {
	f, err := m.Decisions()
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var d struct {
			Decision string `json:"decision"`
		}
		if json.Unmarshal(sc.Bytes(), &d) != nil {
			continue
		}
		if d.Decision == "allow" {
			allowed++
		} else {
			blocked++
		}
	}
	return allowed, blocked, sc.Err()
}

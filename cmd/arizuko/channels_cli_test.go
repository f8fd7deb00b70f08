package main

import (
	"strings"
	"testing"
)

// hook and schedule add, ls and rm on a data dir: the token and secret are
// printed once and never listed, bad input names the input and the fix.
func TestHookAndScheduleCommands(t *testing.T) {
	_, e := initData(t)
	mustAz(t, e, "folder", "add", "acme")
	out, errs, err := az(t, e, "hook", "add", "acme", "--secret", "--per-minute", "10")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 2 || !strings.HasPrefix(lines[0], "/hook/azh_") || !strings.HasPrefix(lines[1], "whsec_") || !strings.Contains(errs, "shown only now") {
		t.Fatalf("hook add: %v\nstdout %q\nstderr %q", err, out, errs)
	}
	ls := mustAz(t, e, "hook", "ls")
	if !strings.Contains(ls, "acme") || !strings.Contains(ls, "true") || strings.Contains(ls, lines[0][len("/hook/"):]) || strings.Contains(ls, lines[1]) {
		t.Fatalf("hook ls:\n%s", ls)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"hook", "add", "nosuch"}, `folder "nosuch"`},
		{[]string{"hook", "add", "acme", "--per-minute", "-1"}, "per_minute -1"},
		{[]string{"hook", "rm", "99"}, "hook 99"},
		{[]string{"schedule", "add", "acme", "* * *", "p"}, `cron "* * *"`},
		{[]string{"schedule", "add", "acme", "@daily", "p", "--tz", "Nowhere/City"}, `time zone "Nowhere/City"`},
		{[]string{"schedule", "add", "nosuch", "@daily", "p"}, `folder "nosuch"`},
		{[]string{"schedule", "rm", "99"}, "schedule 99"},
	} {
		if _, errs, err := az(t, e, c.args...); err == nil || !strings.Contains(errs, c.want) {
			t.Errorf("arizuko %s: %v %q, want an error naming %s", strings.Join(c.args, " "), err, errs, c.want)
		}
	}
	mustAz(t, e, "hook", "rm", "1")
	if ls := mustAz(t, e, "hook", "ls"); strings.Contains(ls, "acme") {
		t.Fatalf("hook ls after rm:\n%s", ls)
	}
	out = mustAz(t, e, "schedule", "add", "acme", "0 9 * * 1-5", "standup notes", "--tz", "Europe/Prague")
	if !strings.HasPrefix(out, "schedule 1: 0 9 * * 1-5 (Europe/Prague) into acme, next ") {
		t.Fatalf("schedule add: %q", out)
	}
	if ls := mustAz(t, e, "schedule", "ls"); !strings.Contains(ls, "Europe/Prague") || !strings.Contains(ls, "standup notes") {
		t.Fatalf("schedule ls:\n%s", ls)
	}
	mustAz(t, e, "schedule", "rm", "1")
	if ls := mustAz(t, e, "schedule", "ls"); strings.Contains(ls, "standup") {
		t.Fatalf("schedule ls after rm:\n%s", ls)
	}
}

package email

import (
	"strings"
	"testing"
)

func TestAutomatic(t *testing.T) {
	for _, c := range []struct {
		h    string
		want string // a part of the reason; "" may be answered
	}{
		{"From: al@a.test\n", ""},
		{"From: al@a.test\nAuto-Submitted: no\n", ""},
		{"From: al@a.test\nAuto-Submitted: auto-replied\n", "Auto-Submitted"},
		{"From: al@a.test\nAuto-Submitted: auto-generated\n", "Auto-Submitted"},
		{"From: al@a.test\nPrecedence: bulk\n", "Precedence"},
		{"From: al@a.test\nPrecedence: list\n", "Precedence"},
		{"From: al@a.test\nList-Id: <x.a.test>\n", "List-Id"},
		{"From: al@a.test\nX-Autoreply: yes\n", "X-Autoreply"},
		{"From: al@a.test\nReturn-Path: <>\n", "null envelope sender"},
		{"From: MAILER-DAEMON@a.test\n", "mail system"},
		{"From: al@a.test\nContent-Type: multipart/report; report-type=delivery-status; boundary=x\n", "report"},
		{"From: Agent <Agent@Own.test>\n", "own address"},
	} {
		got := Automatic(header(t, c.h), "agent@own.test")
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%q: Automatic = %q, want %q", c.h, got, c.want)
		}
	}
}

package email

import "testing"

func TestSafeName(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"report.pdf", "report.pdf"},
		{"../../etc/passwd", "passwd"},
		{`..\..\boot.ini`, "boot.ini"},
		{".bashrc", "bashrc"},
		{"", "attachment-1"},
		{"..", "attachment-1"},
		{"a b/ä.txt", "_.txt"},
	} {
		if got := safeName(c.in, 0); got != c.want {
			t.Errorf("safeName(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

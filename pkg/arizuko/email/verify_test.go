package email

import (
	"bufio"
	"errors"
	"strings"
	"testing"

	"github.com/emersion/go-message"
	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-message/textproto"
)

func header(t *testing.T, s string) mail.Header {
	t.Helper()
	h, err := textproto.ReadHeader(bufio.NewReader(strings.NewReader(strings.ReplaceAll(s, "\n", "\r\n") + "\r\n")))
	if err != nil {
		t.Fatal(err)
	}
	return mail.Header{Header: message.Header{Header: h}}
}

const received = "Received: from x by mx.test; Fri, 4 Dec 2026 19:00:00 +0000\n"

func TestVerify(t *testing.T) {
	all := []string{"spf", "dkim", "dmarc"}
	pass := "Authentication-Results: mx.test; spf=pass smtp.mailfrom=a.test; dkim=pass header.d=a.test; dmarc=pass header.from=a.test\n"
	for _, c := range []struct {
		name, h string
		require []string
		want    string // address, or "" for refused
	}{
		{"all pass", pass + received + "From: Al <AL@a.test>\n", all, "al@a.test"},
		{"stamp below received is the sender's", received + pass + "From: al@a.test\n", all, ""},
		{"other authserv-id", strings.Replace(pass, "mx.test", "mx.evil", 1) + received + "From: al@a.test\n", all, ""},
		{"no received header at all", pass + "From: al@a.test\n", all, ""},
		{"pass for another domain", pass + received + "From: al@b.test\n", all, ""},
		{"subdomain aligned", pass + received + "From: al@mail.a.test\n", all, "al@mail.a.test"},
		{"dkim fails", "Authentication-Results: mx.test; spf=pass smtp.mailfrom=a.test; dkim=fail header.d=a.test; dmarc=pass header.from=a.test\n" + received + "From: al@a.test\n", all, ""},
		{"dkim fails, only spf required", "Authentication-Results: mx.test; spf=pass smtp.mailfrom=al@a.test; dkim=fail header.d=a.test\n" + received + "From: al@a.test\n", []string{"spf"}, "al@a.test"},
		{"stamps in two headers", "Authentication-Results: mx.test; dkim=pass header.d=a.test\nAuthentication-Results: MX.TEST; spf=pass smtp.mailfrom=a.test; dmarc=pass header.from=a.test\n" + received + "From: al@a.test\n", all, "al@a.test"},
		{"two from addresses", pass + received + "From: al@a.test, bo@a.test\n", all, ""},
		{"a pass for a top-level domain", "Authentication-Results: mx.test; spf=pass smtp.mailfrom=test; dkim=pass header.d=test; dmarc=pass header.from=test\n" + received + "From: al@a.test\n", all, ""},
		{"nothing required", received + "From: al@a.test\n", []string{}, "al@a.test"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Verify(header(t, c.h), "mx.test", c.require)
			if got != c.want || (c.want == "") != errors.Is(err, ErrUnverified) {
				t.Fatalf("Verify = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

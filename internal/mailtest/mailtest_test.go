package mailtest

import (
	"net/smtp"
	"net/textproto"
	"strings"
	"testing"
	"time"
)

// A mail sent to the SMTP port lands in the recipient's Maildir with the
// receiving server's stamp above its Received header; the submission port
// takes mail only after AUTH, and only from the user's own address; an
// IMAP restart keeps the port.
func TestMailInStamped(t *testing.T) {
	s := Start(t, Options{Users: []string{"bob@b.test", "al@a.test"}, Verdicts: map[string]string{"a.test": "spf=pass smtp.mailfrom=a.test"}})
	s.Send(t, "al@a.test", []string{"bob@b.test"}, []byte("From: al@a.test\r\nTo: bob@b.test\r\nSubject: x\r\n\r\nhi\r\n"))
	m := string(s.WaitMailbox(t, "bob@b.test", 1, 30*time.Second)[0])
	ar, rec := strings.Index(m, "Authentication-Results: mx.test; spf=pass smtp.mailfrom=a.test"), strings.Index(m, "Received:")
	if ar < 0 || rec < 0 || ar > rec {
		t.Fatalf("no stamp above Received:\n%s", m)
	}

	msg := []byte("From: bob@b.test\r\nTo: al@a.test\r\nSubject: y\r\n\r\nhi\r\n")
	if err := smtp.SendMail(s.Submission, nil, "bob@b.test", []string{"al@a.test"}, msg); err == nil {
		t.Fatal("submission took mail without AUTH")
	}
	auth := smtp.PlainAuth("", "bob@b.test", Password, "127.0.0.1")
	if err := smtp.SendMail(s.Submission, auth, "al@a.test", []string{"al@a.test"}, msg); err == nil {
		t.Fatal("submission took bob's mail as al's")
	}
	if err := smtp.SendMail(s.Submission, auth, "bob@b.test", []string{"al@a.test"}, msg); err != nil {
		t.Fatalf("submission with AUTH: %v\n%s", err, s.Log())
	}
	s.WaitMailbox(t, "al@a.test", 1, 30*time.Second)

	s.StopIMAP(t)
	s.StartIMAP(t)
}

// NoIdle's dovecot leaves IDLE out of what it offers after login.
func TestNoIdle(t *testing.T) {
	for _, noIdle := range []bool{false, true} {
		s := Start(t, Options{Users: []string{"bob@b.test"}, NoIdle: noIdle})
		c, err := textproto.Dial("tcp", s.IMAP)
		if err != nil {
			t.Fatal(err)
		}
		c.ReadLine()
		c.PrintfLine("a LOGIN bob@b.test %s", Password)
		c.PrintfLine("b CAPABILITY")
		var caps string
		for {
			l, err := c.ReadLine()
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(l, "* CAPABILITY") {
				caps = l
			}
			if strings.HasPrefix(l, "b ") {
				break
			}
		}
		c.Close()
		if strings.Contains(caps, " IDLE") == noIdle {
			t.Errorf("NoIdle %v: %s", noIdle, caps)
		}
	}
}

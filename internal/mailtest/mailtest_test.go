package mailtest

import (
	"strings"
	"testing"
	"time"
)

// A mail sent to the SMTP port lands in the recipient's Maildir with the
// receiving server's stamp above its Received header, and an IMAP restart
// keeps the port.
func TestMailInStamped(t *testing.T) {
	s := Start(t, Options{Users: []string{"bob@b.test"}, Verdicts: map[string]string{"a.test": "spf=pass smtp.mailfrom=a.test"}})
	s.Send(t, "al@a.test", []string{"bob@b.test"}, []byte("From: al@a.test\r\nTo: bob@b.test\r\nSubject: x\r\n\r\nhi\r\n"))
	m := string(s.WaitMailbox(t, "bob@b.test", 1, 30*time.Second)[0])
	ar, rec := strings.Index(m, "Authentication-Results: mx.test; spf=pass smtp.mailfrom=a.test"), strings.Index(m, "Received:")
	if ar < 0 || rec < 0 || ar > rec {
		t.Fatalf("no stamp above Received:\n%s", m)
	}
	s.StopIMAP(t)
	s.StartIMAP(t)
}

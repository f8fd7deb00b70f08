package email

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// maxReferences bounds the References of a reply: the thread's root and
// its newest ids, as RFC 5322 suggests for long threads.
const maxReferences = 20

// reply builds the answer to t: to its sender, "Re:" its subject, In-Reply-To
// its id and References its references plus its id. messageID is the
// reply's own, stable across retries of one outbound message.
func reply(own string, t thread, messageID, text string, now time.Time) ([]byte, error) {
	var h mail.Header
	h.SetDate(now)
	h.SetAddressList("From", []*mail.Address{{Address: own}})
	h.SetAddressList("To", []*mail.Address{{Address: t.From}})
	subject := t.Subject
	if !strings.HasPrefix(strings.ToLower(subject), "re:") {
		subject = "Re: " + subject
	}
	h.SetSubject(strings.TrimSpace(subject))
	h.SetMessageID(messageID)
	if t.MessageID != "" {
		h.SetMsgIDList("In-Reply-To", []string{t.MessageID})
		refs := append(append([]string(nil), t.References...), t.MessageID)
		if len(refs) > maxReferences {
			refs = append(refs[:1], refs[len(refs)-maxReferences+1:]...)
		}
		h.SetMsgIDList("References", refs)
	}
	// The agent answers by machine: another agent's loop guard must see it.
	h.Set("Auto-Submitted", "auto-replied")
	h.SetContentType("text/plain", map[string]string{"charset": "utf-8"})
	var b bytes.Buffer
	w, err := mail.CreateSingleInlineWriter(&b, h)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write([]byte(text)); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// submit hands one mail to the submission server.
func (c *Config) submit(to string, msg []byte) error {
	host, _, _ := net.SplitHostPort(c.SMTP)
	tlsConf := &tls.Config{ServerName: host}
	var cl *smtp.Client
	var err error
	switch c.SMTPTLS {
	case "tls":
		cl, err = smtp.DialTLS(c.SMTP, tlsConf)
	case "starttls":
		cl, err = smtp.DialStartTLS(c.SMTP, tlsConf)
	default:
		cl, err = smtp.Dial(c.SMTP)
	}
	if err != nil {
		return fmt.Errorf("smtp %s: %w", c.SMTP, err)
	}
	defer cl.Close()
	if c.SMTPUser != "" {
		if err := cl.Auth(sasl.NewPlainClient("", c.SMTPUser, c.smtpPassword)); err != nil {
			return fmt.Errorf("smtp %s: auth as %s: %w", c.SMTP, c.SMTPUser, err)
		}
	}
	if err := cl.SendMail(c.Address, []string{to}, bytes.NewReader(msg)); err != nil {
		return fmt.Errorf("smtp %s: send to %s: %w", c.SMTP, to, err)
	}
	return cl.Quit()
}

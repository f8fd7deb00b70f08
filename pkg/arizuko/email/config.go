// Package email is arizuko's email channel: it reads a mailbox over IMAP
// (IDLE, polling where the server has none), posts each mail whose sender the
// receiving server verified as a message of the chat of its thread or of its
// sender, and sends the replies the daemon delivers to it over SMTP
// submission, threaded under the mail they answer.
package email

import (
	"errors"
	"fmt"
	"net"
	"net/mail"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/crackbox/crackbox/pkg/config"
)

// Platform is the platform of every email message: routes match
// "platform=email" and chats are named "email:…".
const Platform = "email"

// Defaults.
const (
	DefaultMaxAttachment = 10 << 20
	DefaultMaxMessage    = 25 << 20
	DefaultPoll          = time.Minute
)

// ErrConfig is a setting the channel cannot run with.
var ErrConfig = errors.New("bad email setting")

// Config is arizuko.toml's [email] table.
type Config struct {
	// Enabled starts the channel with `arizuko serve`.
	Enabled bool `toml:"enabled"`
	// Address is the agent's own address: the From of its replies and an
	// address whose mail is never answered.
	Address string `toml:"address"`
	// IMAP is host:port of the mailbox server; IMAPTLS is "tls" (implicit,
	// port 993), "starttls" or "none" (loopback only).
	IMAP             string `toml:"imap"`
	IMAPTLS          string `toml:"imap_tls"`
	IMAPUser         string `toml:"imap_user"`
	IMAPPasswordFile string `toml:"imap_password_file"`
	// Mailbox is the folder read; default INBOX.
	Mailbox string `toml:"mailbox"`
	// SMTP is host:port of the submission server; SMTPTLS as IMAPTLS.
	SMTP             string `toml:"smtp"`
	SMTPTLS          string `toml:"smtp_tls"`
	SMTPUser         string `toml:"smtp_user"`
	SMTPPasswordFile string `toml:"smtp_password_file"`
	// AuthservID is the receiving server's name in its
	// Authentication-Results headers; only its stamps are trusted.
	AuthservID string `toml:"authserv_id"`
	// Require lists the methods that must pass, aligned with the From
	// domain: any of spf, dkim, dmarc; default all three.
	Require []string `toml:"require"`
	// ChatBy is "thread" (one chat per thread) or "sender" (one per address).
	ChatBy string `toml:"chat_by"`
	// MaxAttachment bounds one attachment saved into the folder's home, in bytes.
	MaxAttachment int64 `toml:"max_attachment"`
	// MaxMessage bounds a whole mail read from the mailbox, in bytes.
	MaxMessage int64 `toml:"max_message"`
	// Poll is how often a server without IDLE is asked for new mail.
	Poll config.Duration `toml:"poll"`
	// StateDir holds the mailbox cursor and the threads; default <data>/email.
	StateDir string `toml:"state_dir"`

	imapPassword, smtpPassword string
}

var methods = []string{"spf", "dkim", "dmarc"}

// Check fills the defaults, reads the password files and refuses settings
// the channel cannot run with, naming the key.
func (c *Config) Check(dataDir string) error {
	bad := func(key, format string, a ...any) error {
		return fmt.Errorf("email.%s: %s: %w", key, fmt.Sprintf(format, a...), ErrConfig)
	}
	a, err := mail.ParseAddress(c.Address)
	if err != nil || a.Name != "" {
		return bad("address", "%q: want a bare address like agent@example.org", c.Address)
	}
	c.Address = strings.ToLower(a.Address)
	c.Mailbox = orDefault(c.Mailbox, "INBOX")
	c.ChatBy = orDefault(c.ChatBy, "thread")
	if c.ChatBy != "thread" && c.ChatBy != "sender" {
		return bad("chat_by", "%q: want thread or sender", c.ChatBy)
	}
	if c.AuthservID == "" {
		return bad("authserv_id", "empty: name the receiving server as it signs its Authentication-Results headers (e.g. mx.example.org)")
	}
	if c.Require == nil {
		c.Require = methods
	}
	for _, m := range c.Require {
		if !slices.Contains(methods, m) {
			return bad("require", "%q: want spf, dkim or dmarc ([] trusts every sender)", m)
		}
	}
	if c.MaxAttachment <= 0 {
		c.MaxAttachment = DefaultMaxAttachment
	}
	if c.MaxMessage <= 0 {
		c.MaxMessage = DefaultMaxMessage
	}
	if c.Poll.Duration <= 0 {
		c.Poll.Duration = DefaultPoll
	}
	if c.StateDir == "" {
		c.StateDir = dataDir + "/email"
	}
	for _, s := range []struct {
		key, addr string
		tls       *string
	}{{"imap", c.IMAP, &c.IMAPTLS}, {"smtp", c.SMTP, &c.SMTPTLS}} {
		host, _, err := net.SplitHostPort(s.addr)
		if err != nil {
			return bad(s.key, "%q: want host:port", s.addr)
		}
		*s.tls = orDefault(*s.tls, "tls")
		switch *s.tls {
		case "tls", "starttls":
		case "none":
			if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
				return bad(s.key+"_tls", "none sends the password in clear text; only a loopback server may go without TLS, not %s", host)
			}
		default:
			return bad(s.key+"_tls", "%q: want tls, starttls or none", *s.tls)
		}
	}
	if c.imapPassword, err = readSecret("imap_password_file", c.IMAPPasswordFile); err != nil {
		return err
	}
	c.IMAPUser = orDefault(c.IMAPUser, c.Address)
	if c.smtpPassword, err = readSecret("smtp_password_file", c.SMTPPasswordFile); err != nil {
		return err
	}
	return nil
}

func readSecret(key, path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("email.%s: %w", key, err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

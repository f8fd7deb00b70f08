package email

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/router"
)

// Sink is where inbound mail goes: the daemon's service, acting as the
// operator who configured the channel.
type Sink interface {
	Resolve(ctx context.Context, in service.MessageIn) (router.Result, error)
	PostMessage(ctx context.Context, in service.MessageIn) (service.Ingest, error)
}

// Options wire a Channel to the daemon.
type Options struct {
	Config Config // checked with Config.Check
	Sink   Sink
	// Audit records a refused mail (a forged or unverified sender, an
	// auto-reply or bounce).
	Audit func(context.Context, acl.Decision) error
	// Home is a folder's home dir on this host, created if missing.
	Home func(folder string) (string, error)
	Log  *slog.Logger // nil discards
	// Now is the clock of reply dates; nil is time.Now.
	Now func() time.Time
}

// Channel is one mailbox's channel.
type Channel struct {
	o     Options
	cfg   *Config
	state *state
	log   *slog.Logger
}

// New opens the channel's state dir.
func New(o Options) (*Channel, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	st, err := openState(o.Config.StateDir)
	if err != nil {
		return nil, fmt.Errorf("email state dir: %w", err)
	}
	return &Channel{o: o, cfg: &o.Config, state: st, log: o.Log.With("channel", Platform)}, nil
}

// Handle posts one mail from the mailbox, or refuses and audits it. An
// error means the mail should be handled again later (the daemon was not
// reachable); a refused mail is no error.
func (c *Channel) Handle(ctx context.Context, raw []byte) error {
	m, err := Parse(raw, c.cfg.MaxAttachment)
	if err != nil {
		return c.refuse(ctx, "?", "unreadable mail: "+err.Error())
	}
	from := strings.ToLower(m.Header.Get("From"))
	if l, err := m.Header.AddressList("From"); err == nil && len(l) == 1 {
		from = strings.ToLower(l[0].Address)
	}
	if reason := Automatic(m.Header, c.cfg.Address); reason != "" {
		return c.refuse(ctx, from, "not answered: "+reason)
	}
	addr, err := Verify(m.Header, c.cfg.AuthservID, c.cfg.Require)
	if err != nil {
		return c.refuse(ctx, from, err.Error())
	}
	chat := Platform + ":" + addr
	if c.cfg.ChatBy == "thread" {
		chat = Platform + ":thread-" + ThreadKey(addr, m.Root())
	}
	in := service.MessageIn{ChatJID: chat, Sender: addr, Platform: Platform,
		PlatformID: clip(m.MessageID, 256), ReplyTo: clip(m.InReplyTo, 256)}
	body := m.Text
	if m.Subject != "" {
		body = "Subject: " + m.Subject + "\n\n" + body
	}
	in.Text = body
	if len(m.Files) > 0 {
		res, err := c.o.Sink.Resolve(ctx, in)
		if err != nil {
			return fmt.Errorf("resolve mail %s: %w", m.MessageID, err)
		}
		if res.Routed() {
			body += "\n\n" + c.saveFiles(res.Folder, chat, m)
		}
	}
	in.Text = clipText(body, service.MaxText)
	// The thread is recorded before the post: the turn's reply may be
	// delivered before PostMessage returns.
	t := thread{MessageID: m.MessageID, From: addr, Subject: m.Subject, References: m.References, Chat: chat}
	if len(t.References) == 0 && m.InReplyTo != "" {
		t.References = []string{m.InReplyTo}
	}
	if err := c.state.putThread(t); err != nil {
		return err
	}
	ing, err := c.o.Sink.PostMessage(ctx, in)
	switch code := service.Code(err); {
	case err == nil:
	case code == service.CodeInvalid || code == service.CodeDenied:
		return c.refuse(ctx, addr, "daemon refused the message: "+err.Error())
	default:
		return fmt.Errorf("post mail %s: %w", m.MessageID, err)
	}
	c.log.Info("mail in", "from", addr, "chat", chat, "message", ing.Message.ID, "duplicate", ing.Duplicate,
		"routed", ing.Route.Routed(), "reason", ing.Route.Reason)
	return nil
}

// ThreadKey names the chat of sender's mail in the thread whose first mail
// has rootID: email:thread-<key>. The sender is part of it because a
// Message-ID is whatever the sender writes: another verified sender who
// quotes a thread's ids gets a chat of its own, never a seat in that one.
func ThreadKey(sender, rootID string) string { return key(sender + "\n" + rootID) }

// refuse logs and audits a mail that is not posted.
func (c *Channel) refuse(ctx context.Context, from, reason string) error {
	c.log.Warn("mail refused", "from", from, "reason", reason)
	if c.o.Audit == nil {
		return nil
	}
	d := acl.Decision{Principal: Platform + ":" + clip(from, 200), Action: "message:post", Reason: "email: " + reason}
	if err := c.o.Audit(ctx, d); err != nil {
		return fmt.Errorf("audit refused mail: %w", err)
	}
	return nil
}

// ErrNoThread is an outbound message the channel will not address: no
// verified mail of its chat was seen.
var ErrNoThread = errors.New("no mail to answer in this chat")

// Send mails one outbound message as a reply in its thread; a repeat of
// an id already sent is dropped.
func (c *Channel) Send(ctx context.Context, id int64, chat, text, replyTo string) error {
	if _, ok, err := c.state.sent(id); err != nil || ok {
		return err
	}
	t, ok, err := c.state.thread(chat, replyTo)
	if err == nil && (!ok || t.Chat != chat) {
		t, ok, err = c.state.chatThread(chat)
	}
	if err != nil {
		return err
	}
	if !ok {
		// Only people who wrote first are mailed: a route that sends every
		// email chat to a folder would otherwise let its agent name any
		// address as a chat and mail it.
		return fmt.Errorf("chat %s: %w", chat, ErrNoThread)
	}
	_, domain, _ := strings.Cut(c.cfg.Address, "@")
	mid := fmt.Sprintf("arizuko-%d-%s@%s", id, key(fmt.Sprint(id, chat, text))[:12], domain)
	msg, err := reply(c.cfg.Address, t, mid, text, c.o.Now())
	if err != nil {
		return err
	}
	start := time.Now()
	if err := c.cfg.submit(t.From, msg); err != nil {
		return err
	}
	c.log.Info("mail out", "to", t.From, "chat", chat, "id", id, "in_reply_to", t.MessageID, "took", time.Since(start))
	return c.state.putSent(id, mid)
}

// clip cuts s to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const more = "\n[… cut: the mail is longer than a message may be]"
	return clip(s, n-len(more)) + more
}

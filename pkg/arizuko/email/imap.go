package email

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"slices"
	"time"

	"github.com/emersion/go-imap"
	"github.com/emersion/go-imap/client"
)

// errSessionEnded is a connection the server closed or lost.
var errSessionEnded = errors.New("imap connection ended")

// Run reads the mailbox until ctx ends: each session handles every mail
// past the cursor, then waits in IDLE (or polls) for more. A lost
// connection (a server restart) is dialled again with growing gaps; the
// cursor, saved after each mail, makes the next session start where the
// last one stopped, and the daemon stores a mail posted twice once.
func (c *Channel) Run(ctx context.Context) {
	gap := time.Second
	for ctx.Err() == nil {
		idled, err := c.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if idled {
			gap = time.Second
		}
		c.log.Warn("imap session ended", "server", c.cfg.IMAP, "err", err, "retry_in", gap)
		select {
		case <-ctx.Done():
			return
		case <-time.After(gap):
		}
		gap = min(2*gap, 30*time.Second)
	}
}

func (c *Channel) dial() (*client.Client, error) {
	host, _, _ := net.SplitHostPort(c.cfg.IMAP)
	tlsConf := &tls.Config{ServerName: host}
	d := &net.Dialer{Timeout: 30 * time.Second}
	switch c.cfg.IMAPTLS {
	case "tls":
		return client.DialWithDialerTLS(d, c.cfg.IMAP, tlsConf)
	case "starttls":
		cl, err := client.DialWithDialer(d, c.cfg.IMAP)
		if err != nil {
			return nil, err
		}
		if err := cl.StartTLS(tlsConf); err != nil {
			cl.Logout()
			return nil, err
		}
		return cl, nil
	default:
		return client.DialWithDialer(d, c.cfg.IMAP)
	}
}

// session is one connection; idled reports whether it got as far as
// waiting for mail, so the retry gap starts small again.
func (c *Channel) session(ctx context.Context) (idled bool, err error) {
	cl, err := c.dial()
	if err != nil {
		return false, fmt.Errorf("imap %s: %w", c.cfg.IMAP, err)
	}
	// The client blocks on an unread update, so one goroutine drains them
	// into a one-slot "the mailbox changed" signal.
	updates := make(chan client.Update, 16)
	changed := make(chan struct{}, 1)
	cl.Updates = updates
	// The channel logs what ends a session; the client's own log would
	// repeat it for every connection closed on purpose.
	cl.ErrorLog = log.New(io.Discard, "", 0)
	// It runs until the connection is gone: the client's reader may still
	// deliver an update while the session winds down.
	go func() {
		for {
			select {
			case <-updates:
				select {
				case changed <- struct{}{}:
				default:
				}
			case <-cl.LoggedOut():
				return
			}
		}
	}()
	defer cl.Logout()
	stopped := context.AfterFunc(ctx, func() { cl.Terminate() })
	defer stopped()
	if err := cl.Login(c.cfg.IMAPUser, c.cfg.imapPassword); err != nil {
		return false, fmt.Errorf("imap %s: login as %s: %w", c.cfg.IMAP, c.cfg.IMAPUser, err)
	}
	mbox, err := cl.Select(c.cfg.Mailbox, false)
	if err != nil {
		return false, fmt.Errorf("imap %s: select %s: %w", c.cfg.IMAP, c.cfg.Mailbox, err)
	}
	cur, err := c.state.cursor()
	if err != nil {
		return false, err
	}
	if cur.UIDValidity != mbox.UidValidity {
		// New UIDs for every mail: read them all again; the daemon keeps
		// the ones it has by Message-ID.
		if cur.UIDValidity != 0 {
			c.log.Warn("mailbox uidvalidity changed; reading it again", "mailbox", c.cfg.Mailbox)
		}
		cur = cursor{UIDValidity: mbox.UidValidity}
	}
	for {
		if err := c.fetchNew(ctx, cl, &cur); err != nil {
			return idled, err
		}
		idled = true
		stop := make(chan struct{})
		done := make(chan error, 1)
		go func() { done <- cl.Idle(stop, &client.IdleOptions{PollInterval: c.cfg.Poll.Duration}) }()
		// A mailbox change ends the wait, and so does the poll interval:
		// an update lost on the way never leaves a mail unread for long.
		timer := time.NewTimer(c.cfg.Poll.Duration)
		select {
		case <-changed:
		case <-timer.C:
		case err := <-done:
			timer.Stop()
			return idled, fmt.Errorf("imap %s: idle: %w", c.cfg.IMAP, firstErr(err, errSessionEnded))
		case <-cl.LoggedOut():
		case <-ctx.Done():
		}
		timer.Stop()
		close(stop)
		if err := <-done; err != nil {
			return idled, fmt.Errorf("imap %s: idle: %w", c.cfg.IMAP, err)
		}
		if ctx.Err() != nil {
			return idled, ctx.Err()
		}
		select {
		case <-cl.LoggedOut():
			return idled, errSessionEnded
		default:
		}
	}
}

// fetchNew handles every mail past the cursor, oldest first, saving the
// cursor after each.
func (c *Channel) fetchNew(ctx context.Context, cl *client.Client, cur *cursor) error {
	crit := imap.NewSearchCriteria()
	crit.Uid = new(imap.SeqSet)
	crit.Uid.AddRange(cur.LastUID+1, 0)
	uids, err := cl.UidSearch(crit)
	if err != nil {
		return fmt.Errorf("imap %s: search: %w", c.cfg.IMAP, err)
	}
	// "n:*" always matches the newest mail, even one at or below n.
	uids = slices.DeleteFunc(uids, func(u uint32) bool { return u <= cur.LastUID })
	slices.Sort(uids)
	for _, uid := range uids {
		raw, err := c.fetch(cl, uid)
		if err != nil {
			return err
		}
		if raw != nil {
			if err := c.Handle(ctx, raw); err != nil {
				return err
			}
		}
		cur.LastUID = uid
		if err := c.state.setCursor(*cur); err != nil {
			return err
		}
		seen := new(imap.SeqSet)
		seen.AddNum(uid)
		if err := cl.UidStore(seen, imap.FormatFlagsOp(imap.AddFlags, true), []any{imap.SeenFlag}, nil); err != nil {
			c.log.Debug("mark seen", "uid", uid, "err", err)
		}
	}
	return nil
}

// fetch reads one mail without setting \Seen; nil for a mail over the
// size limit, which is skipped with a warning.
func (c *Channel) fetch(cl *client.Client, uid uint32) ([]byte, error) {
	set := new(imap.SeqSet)
	set.AddNum(uid)
	section := &imap.BodySectionName{Peek: true}
	msgs := make(chan *imap.Message, 1)
	done := make(chan error, 1)
	go func() { done <- cl.UidFetch(set, []imap.FetchItem{imap.FetchRFC822Size, section.FetchItem()}, msgs) }()
	var raw []byte
	var size uint32
	for m := range msgs {
		size = m.Size
		if body := m.GetBody(section); body != nil && int64(m.Size) <= c.cfg.MaxMessage {
			b, err := io.ReadAll(io.LimitReader(body, c.cfg.MaxMessage+1))
			if err != nil {
				return nil, err
			}
			raw = b
		}
	}
	if err := <-done; err != nil {
		return nil, fmt.Errorf("imap %s: fetch uid %d: %w", c.cfg.IMAP, uid, err)
	}
	if raw == nil || int64(len(raw)) > c.cfg.MaxMessage {
		c.log.Warn("mail skipped", "uid", uid, "size", size, "limit", c.cfg.MaxMessage)
		return nil, nil
	}
	return raw, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

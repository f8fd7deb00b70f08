package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
)

// MaxText bounds one inbound message's text.
const MaxText = 64 << 10

func (in MessageIn) validate() error {
	if in.ChatJID == "" {
		return invalid("chat_jid is required")
	}
	if err := ValidChatJID(in.ChatJID); err != nil {
		return err
	}
	switch {
	case len(in.Text) > MaxText:
		return invalid("text is %d bytes, the limit is %d", len(in.Text), MaxText)
	case !utf8.ValidString(in.Text) || !utf8.ValidString(in.Sender):
		return invalid("text and sender must be UTF-8")
	}
	for _, f := range []struct{ name, v string }{{"sender", in.Sender}, {"platform", in.Platform}, {"room", in.Room},
		{"platform_id", in.PlatformID}, {"reply_to", in.ReplyTo}, {"verb", in.Verb}, {"adapter", in.Adapter}} {
		if len(f.v) > 256 {
			return invalid("%s is %d bytes, the limit is 256", f.name, len(f.v))
		}
		if !utf8.ValidString(f.v) {
			return invalid("%s is not UTF-8", f.name)
		}
		if err := noFormat(f.name, f.v); err != nil {
			return err
		}
	}
	if len(in.Attachments) > MaxAttachments {
		return invalid("%d attachments, the limit is %d", len(in.Attachments), MaxAttachments)
	}
	for i, a := range in.Attachments {
		u, err := url.Parse(a.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return invalid("attachments[%d].url %q: want an absolute http(s) URL", i, a.URL)
		}
		if a.Name == "" || len(a.Name) > 256 || len(a.ContentType) > 256 || len(a.URL) > 2048 || a.Size < 0 {
			return invalid("attachments[%d]: want a name of 1..256 bytes, a content_type under 256, a url under 2048 and a size >= 0", i)
		}
		if err := noFormat("attachments name", a.Name+a.ContentType+a.URL); err != nil {
			return err
		}
		for _, r := range a.Name + a.ContentType + a.URL {
			if unicode.IsControl(r) {
				return invalid("attachments[%d] has a control character", i)
			}
		}
	}
	return nil
}

// MaxAttachments bounds the files of one inbound message.
const MaxAttachments = 16

// withAttachments is the text the agent reads: the message's, then a line
// per attached file.
func (in MessageIn) withAttachments() string {
	t := in.Text
	for _, a := range in.Attachments {
		t += fmt.Sprintf("\n[attachment: %s (%s, %d bytes) %s]", a.Name, cmp.Or(a.ContentType, "unknown type"), a.Size, a.URL)
	}
	return t
}

// resolve routes a message against the current table and the chat's engagement.
func (l *Local) resolve(ctx context.Context, in MessageIn) (router.Result, error) {
	t, err := l.routeTable(ctx)
	if err != nil {
		return router.Result{}, err
	}
	var eng *router.Engagement
	c, err := l.st.GetChat(ctx, in.ChatJID)
	switch {
	case err == nil && c.EngagedFolder != "":
		eng = &router.Engagement{Folder: c.EngagedFolder, Topic: c.EngagedTopic, At: time.UnixMilli(c.EngagedAt)}
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return router.Result{}, err
	}
	msg := router.Msg{Platform: in.Platform, Room: in.Room, ChatJID: in.ChatJID, Sender: in.Sender, Verb: in.Verb}
	res := t.Resolve(msg, eng, time.Now(), l.opts.EngagementTTL)
	if !res.Routed() {
		return res, nil
	}
	// A target folder that does not exist makes the message unrouted, except
	// a per-sender folder, which PostMessage creates on first contact.
	_, err = l.st.GetFolder(ctx, res.Folder)
	switch {
	case err == nil:
		return res, nil
	case !errors.Is(err, store.ErrNotFound):
		return res, err
	case res.PerSender:
		if _, perr := l.st.GetFolder(ctx, folder.Parent(res.Folder)); perr == nil || folder.Parent(res.Folder) == "" {
			res.Reason += "; creates per-sender folder " + res.Folder
			return res, nil
		}
	}
	return router.Result{How: router.Unrouted, RouteID: res.RouteID,
		Reason: fmt.Sprintf("%s, but folder %q does not exist", res.Reason, res.Folder)}, nil
}

// PostMessage resolves, authorizes (message:post on the target folder, or on
// no folder for unrouted messages) and durably stores an inbound message.
func (l *Local) PostMessage(ctx context.Context, in MessageIn) (Ingest, error) {
	if err := in.validate(); err != nil {
		return Ingest{}, err
	}
	res, err := l.resolve(ctx, in)
	if err != nil {
		return Ingest{}, err
	}
	if err := l.check(ctx, "message:post", res.Folder); err != nil {
		return Ingest{}, err
	}
	if err := l.limitMessages(ctx, res.Folder); err != nil {
		return Ingest{}, err
	}
	if res.PerSender {
		if _, err := l.st.GetFolder(ctx, res.Folder); errors.Is(err, store.ErrNotFound) {
			if err := l.createFolder(ctx, store.Folder{Path: res.Folder}); err != nil && !errors.Is(err, store.ErrExists) {
				return Ingest{}, err
			}
		}
	}
	how := string(res.How)
	if res.Observe {
		how = "observe"
	}
	m, dup, err := l.st.PutMessage(ctx, store.Message{
		ChatJID: in.ChatJID, Platform: in.Platform, Room: in.Room, Sender: in.Sender, Text: in.withAttachments(),
		ReplyTo: in.ReplyTo, Verb: in.Verb, PlatformID: in.PlatformID, Folder: res.Folder, Topic: res.Topic, How: how,
	})
	if err != nil {
		return Ingest{}, err
	}
	return Ingest{Message: m, Route: res, Duplicate: dup}, nil
}

// ListMessages returns a chat's messages the caller may read: a chat spans
// folders, so each message shows only to a reader of its folder.
func (l *Local) ListMessages(ctx context.Context, chat string, after int64, limit int) ([]store.Message, error) {
	if chat == "" {
		return nil, invalid("chat is required")
	}
	show, err := l.visible(ctx, "message:read")
	if err != nil {
		return nil, err
	}
	ms, err := l.st.ListMessages(ctx, chat, after, limit)
	return filter(ms, show, func(m store.Message) string { return m.Folder }), err
}

// Resolve shows where a message would go, without storing it.
func (l *Local) Resolve(ctx context.Context, in MessageIn) (router.Result, error) {
	if err := in.validate(); err != nil {
		return router.Result{}, err
	}
	if err := l.check(ctx, "route:read", ""); err != nil {
		return router.Result{}, err
	}
	return l.resolve(ctx, in)
}

func nowMillis() int64 { return time.Now().UnixMilli() }

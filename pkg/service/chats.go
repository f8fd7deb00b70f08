package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/crackbox/crackbox/pkg/router"
	"github.com/crackbox/crackbox/pkg/store"
)

// ValidChatJID accepts a chat jid of 1..256 bytes of UTF-8 without spaces,
// control characters (NUL included) or '='. A route's match is split on
// spaces and its terms on '=', so such a jid would not be the chat a route
// for it matches.
func ValidChatJID(jid string) error {
	if jid == "" || len(jid) > 256 {
		return invalid("chat_jid %q: want 1..256 bytes", jid)
	}
	if !utf8.ValidString(jid) {
		return invalid("chat_jid %q is not UTF-8", jid)
	}
	for _, r := range jid {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == '=' {
			return invalid("chat_jid %q has %q: spaces, control characters and '=' are not allowed in a chat jid", jid, r)
		}
	}
	return nil
}

// ChatFacts is what the store knows of a chat for deciding who owns it: the
// platform and room of its newest inbound message, and for a chat that has
// not spoken the platform its "<platform>:<id>" jid names (as an adapter
// token pins it); sender and verb stay unknown.
func ChatFacts(ctx context.Context, st *store.Store, jid string) (router.Chat, error) {
	c := router.Chat{JID: jid}
	last, err := st.LastInbound(ctx, jid)
	switch {
	case err == nil:
		c.Platforms, c.Rooms = []string{last.Platform}, []string{last.Room}
		if p, _, ok := strings.Cut(jid, ":"); ok && p != last.Platform {
			c.Platforms = append(c.Platforms, p)
		}
	case errors.Is(err, store.ErrNotFound):
		if p, _, ok := strings.Cut(jid, ":"); ok {
			c.Platforms = []string{p}
		}
	default:
		return c, err
	}
	return c, nil
}

// ForeignClaim returns the first route that could send some message of chat
// to another tenant than tenant before a route surely takes every message
// of it; ok is false when no such route exists. A route whose terms test
// what is not known of the chat (its sender, or its room before it spoke)
// counts as one that could, and so does a route whose top-level folder is
// the {sender}.
func ForeignClaim(ctx context.Context, st *store.Store, chat, tenant string) (claim router.Claim, ok bool, err error) {
	rs, err := st.ListRoutes(ctx)
	if err != nil {
		return claim, false, err
	}
	tab, err := router.NewTable(rs)
	if err != nil {
		return claim, false, err
	}
	c, err := ChatFacts(ctx, st, chat)
	if err != nil {
		return claim, false, err
	}
	for _, cl := range tab.Claims(c) {
		if cl.Tenant() != tenant {
			return cl, true, nil
		}
	}
	return claim, false, nil
}

// ClaimReason says why a claim makes a chat another tenant's, for a refusal.
func ClaimReason(chat string, cl router.Claim, tenant string) string {
	if cl.RouteID == 0 {
		return fmt.Sprintf("chat %s is a direct address of %s, another tenant than %s", chat, cl.Folder, tenant)
	}
	return fmt.Sprintf("chat %s may route to %s by route %d (seq %d, match %q), another tenant than %s",
		chat, cl.Folder, cl.RouteID, cl.Seq, cl.Match, tenant)
}

package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mtibben/confusables"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
)

// TenantRouteSeq is the lowest seq of a route added by a caller who may add
// routes on part of the tree only (a tenant, register_group): the operator's
// routes, below it, keep precedence.
const TenantRouteSeq = 100

// ValidChatJID accepts a chat jid of 1..256 bytes of UTF-8 without spaces or
// control characters (NUL included). A route's match is split on spaces, so
// such a jid would not be the chat a route for it matches; a term is cut at
// its first '=', so one in a jid ("mail:bounce+a=b@x.example") is kept.
func ValidChatJID(jid string) error {
	if jid == "" || len(jid) > 256 {
		return invalid("chat_jid %q: want 1..256 bytes", jid)
	}
	if !utf8.ValidString(jid) {
		return invalid("chat_jid %q is not UTF-8", jid)
	}
	for _, r := range jid {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return invalid("chat_jid %q has %q: spaces and control characters are not allowed in a chat jid", jid, r)
		}
	}
	if err := noFormat("chat_jid", jid); err != nil {
		return err
	}
	p, _, _ := strings.Cut(jid, ":")
	if asciiPlatform(p) {
		for _, r := range jid {
			if r > unicode.MaxASCII {
				return invalid("chat_jid %q has %q: %s ids are ASCII, and a letter beyond ASCII here is a look-alike of another chat (U+%04X)", jid, r, p, r)
			}
		}
	}
	return nil
}

// asciiPlatforms are the platforms whose chat ids are ASCII: a chat jid of
// theirs with any other character can only pass for another chat, so it is
// refused rather than judged by what it looks like.
var asciiPlatforms = map[string]bool{"web": true, "webchat": true, "term": true, "slack": true, "tg": true,
	"telegram": true, "discord": true, "irc": true, "sms": true, "whatsapp": true}

func asciiPlatform(p string) bool {
	return asciiPlatforms[p] || strings.HasPrefix(p, "term-")
}

// noFormat refuses format characters (Unicode Cf: bidi overrides and
// isolates such as U+202E, zero-width spaces and joiners) in an identifier:
// they make one name display as another.
func noFormat(field, s string) error {
	for _, r := range s {
		if unicode.Is(unicode.Cf, r) {
			return invalid("%s %q has U+%04X, a format or bidi control; identifiers may not hold one", field, s, r)
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
// the {sender}. When no route surely takes the chat, its engagement with
// another tenant's folder is such a claim too.
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
	sure := false
	for _, cl := range tab.Claims(c) {
		if cl.Tenant() != tenant {
			return cl, true, nil
		}
		sure = sure || cl.Sure
	}
	if cl, ok := lookAlike(rs, chat, tenant); ok {
		return cl, true, nil
	}
	if sure {
		return claim, false, nil
	}
	// A message no route takes goes to the chat's engagement, live or expired.
	ch, err := st.GetChat(ctx, chat)
	if errors.Is(err, store.ErrNotFound) {
		return claim, false, nil
	}
	if err != nil {
		return claim, false, err
	}
	if ch.EngagedFolder != "" && router.Tenant(ch.EngagedFolder) != tenant {
		return router.Claim{Folder: ch.EngagedFolder, Engaged: true}, true, nil
	}
	return claim, false, nil
}

// lookAlike finds a route naming another tenant's chat that chat looks
// like: the same Unicode TR39 skeleton ("mail:bob@exаmple.com" with a
// Cyrillic a, "mail:bob@example.com"), so a user would take one for the other.
func lookAlike(rs []router.Route, chat, tenant string) (router.Claim, bool) {
	sk := confusables.Skeleton(chat)
	for _, r := range rs {
		m, err := router.ParseMatch(r.Match)
		if err != nil {
			continue
		}
		other, ok := m.Literal("chat_jid")
		if !ok || other == chat || confusables.Skeleton(other) != sk {
			continue
		}
		t, err := router.ParseTarget(r.Target)
		if err != nil {
			continue
		}
		cl := router.Claim{RouteID: r.ID, Seq: r.Seq, Match: r.Match, Folder: t.Folder, Like: other}
		if cl.Tenant() != tenant {
			return cl, true
		}
	}
	return router.Claim{}, false
}

// ClaimReason says why a claim makes a chat another tenant's, for a refusal.
func ClaimReason(chat string, cl router.Claim, tenant string) string {
	if cl.Like != "" {
		return fmt.Sprintf("chat %s looks like %s (the same Unicode TR39 skeleton), which route %d sends to %s, another tenant than %s",
			chat, cl.Like, cl.RouteID, cl.Folder, tenant)
	}
	if cl.Engaged {
		return fmt.Sprintf("chat %s is engaged with %s, where it goes when no route takes it, another tenant than %s", chat, cl.Folder, tenant)
	}
	if cl.RouteID == 0 {
		return fmt.Sprintf("chat %s is a direct address of %s, another tenant than %s", chat, cl.Folder, tenant)
	}
	return fmt.Sprintf("chat %s may route to %s by route %d (seq %d, match %q), another tenant than %s",
		chat, cl.Folder, cl.RouteID, cl.Seq, cl.Match, tenant)
}

// TenantRoute checks the shape of a route added by a caller who may add
// routes on part of the tree only, and returns the one chat it names. The
// route must carry a literal chat_jid=<jid> term, so it takes no chat but
// that one, and a seq of at least TenantRouteSeq, so it outranks no operator
// route. Whether the chat is the caller's is ForeignClaim's question.
func TenantRoute(r router.Route) (string, error) {
	m, err := router.ParseMatch(r.Match)
	if err != nil {
		return "", err
	}
	chat, ok := m.Literal("chat_jid")
	if !ok {
		return "", invalid("route match %q: a tenant's route must name its one chat with a literal chat_jid=<jid> term (no * or ?), e.g. %q; wider routes are an operator's (route:add on the whole tree)",
			r.Match, "chat_jid=slack:C123")
	}
	if err := ValidChatJID(chat); err != nil {
		return "", err
	}
	if r.Seq < TenantRouteSeq {
		return "", invalid("route seq %d: a tenant's route needs seq %d or more, so the operator's routes keep precedence; use seq %d", r.Seq, TenantRouteSeq, TenantRouteSeq)
	}
	return chat, nil
}

// holdsTree reports, without auditing, whether the caller may perform action
// on the whole tree (an operator).
func (l *Local) holdsTree(ctx context.Context, action string) (bool, error) {
	p, err := l.loadPolicy(ctx)
	if err != nil {
		return false, err
	}
	return p.Decide(l.principal(ctx), action, "").Allow, nil
}

// confineRoute keeps a route added by a caller who holds route:add on part
// of the tree only to one chat no other tenant than the target's owns.
func (l *Local) confineRoute(ctx context.Context, r router.Route) error {
	op, err := l.holdsTree(ctx, "route:add")
	if err != nil || op {
		return err
	}
	chat, err := TenantRoute(r)
	if err != nil {
		return err
	}
	tenant := router.Tenant(routeScope(r.Target))
	cl, foreign, err := ForeignClaim(ctx, l.st, chat, tenant)
	if err != nil || !foreign {
		return err
	}
	return l.gate.Refuse(ctx, acl.Decision{Principal: l.principal(ctx), Action: "route:add", Scope: chat, Reason: ClaimReason(chat, cl, tenant)})
}

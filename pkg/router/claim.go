package router

import "strings"

// Chat is what is known of a chat apart from any one message, for deciding
// who owns it. JID is always known. Platforms and Rooms list the values the
// chat's messages may carry; nil means unknown (any value). Sender and verb
// change from message to message and are never known.
type Chat struct {
	JID       string
	Platforms []string
	Rooms     []string
}

// Claim is a route, or a direct address, that may take a message of a chat.
type Claim struct {
	RouteID int64
	Seq     int
	Match   string
	// Folder is the target folder; a {sender} segment stays unexpanded.
	Folder string
	// Sure is set when every message of the chat reaches this claim, so no
	// later route sees one.
	Sure bool
	// Engaged marks the chat's engagement: where a message no route takes goes.
	Engaged bool
	// Like is the other chat this route names that the claimed chat looks
	// like (same Unicode TR39 skeleton); "" when the route may take it.
	Like string
}

// Tenant is the tenant the claim sends messages to; "" when it depends on
// the sender (a {sender} top-level segment), which no caller owns.
func (c Claim) Tenant() string {
	t := Tenant(c.Folder)
	if strings.Contains(t, SenderVar) {
		return ""
	}
	return t
}

// Claims lists, in resolution order, every route that could take a message
// of c for some values of what is not known: a term on an unknown field
// counts as possibly holding. The list ends at the first route that holds
// for every message. A direct address ("web:…") is its folder's alone.
func (t *Table) Claims(c Chat) []Claim {
	if rest, ok := strings.CutPrefix(c.JID, DirectPrefix); ok {
		res := direct(rest)
		if !res.Routed() {
			return nil
		}
		return []Claim{{Folder: res.Folder, Sure: true}}
	}
	var out []Claim
	for _, r := range t.routes {
		if !r.match.mayHold(c) {
			continue
		}
		sure := r.match.surelyHolds(c)
		out = append(out, Claim{RouteID: r.ID, Seq: r.Seq, Match: r.Match, Folder: r.target.Folder, Sure: sure})
		if sure {
			break
		}
	}
	return out
}

// Literal returns the value of the first term on key whose glob has no
// wildcard, so the term matches that one value only.
func (m Match) Literal(key string) (string, bool) {
	for _, t := range m {
		if t.key == key && !strings.ContainsAny(t.glob, "*?") {
			return t.glob, true
		}
	}
	return "", false
}

// values is what c knows of a field: ok is false when any value is possible.
func (c Chat) values(key string) (vs []string, ok bool) {
	switch key {
	case "chat_jid":
		return []string{c.JID}, true
	case "platform":
		return c.Platforms, c.Platforms != nil
	case "room":
		return c.Rooms, c.Rooms != nil
	}
	return nil, false
}

// mayHold reports whether some message of c could satisfy every term: every
// glob matches some value, so only a known field can rule a term out.
func (m Match) mayHold(c Chat) bool {
	for _, t := range m {
		vs, ok := c.values(t.key)
		if !ok {
			continue
		}
		hit := false
		for _, v := range vs {
			hit = hit || Glob(t.glob, v)
		}
		if !hit {
			return false
		}
	}
	return true
}

// surelyHolds reports whether every message of c satisfies every term.
func (m Match) surelyHolds(c Chat) bool {
	for _, t := range m {
		if strings.Trim(t.glob, "*") == "" {
			continue // matches every value
		}
		vs, ok := c.values(t.key)
		if !ok || len(vs) == 0 {
			return false
		}
		for _, v := range vs {
			if !Glob(t.glob, v) {
				return false
			}
		}
	}
	return true
}

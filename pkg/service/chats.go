package service

import (
	"unicode"
	"unicode/utf8"
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

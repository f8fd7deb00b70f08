package router

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is wrapped by every route parse failure.
var ErrInvalid = errors.New("invalid route")

// Keys are the message fields a match term may test.
var Keys = []string{"platform", "room", "chat_jid", "sender", "verb"}

type term struct {
	key, glob string
}

// Match is a parsed match expression: every term must hold.
type Match []term

// ParseMatch parses space-separated key=glob terms; "" matches everything.
func ParseMatch(s string) (Match, error) {
	var m Match
	for _, f := range strings.Fields(s) {
		k, g, ok := strings.Cut(f, "=")
		if !ok || g == "" {
			return nil, fmt.Errorf("match term %q: want key=glob: %w", f, ErrInvalid)
		}
		known := false
		for _, want := range Keys {
			known = known || k == want
		}
		if !known {
			return nil, fmt.Errorf("match term %q: unknown key %q (want one of %s): %w", f, k, strings.Join(Keys, ", "), ErrInvalid)
		}
		m = append(m, term{k, g})
	}
	return m, nil
}

// Holds reports whether every term matches the message.
func (m Match) Holds(msg Msg) bool {
	for _, t := range m {
		var v string
		switch t.key {
		case "platform":
			v = msg.Platform
		case "room":
			v = msg.Room
		case "chat_jid":
			v = msg.ChatJID
		case "sender":
			v = msg.Sender
		case "verb":
			v = msg.Verb
		}
		if !Glob(t.glob, v) {
			return false
		}
	}
	return true
}

// Glob matches s against pattern where '*' is any run of bytes (including '/'
// and ':') and '?' exactly one byte; everything else is literal.
func Glob(pattern, s string) bool {
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]):
			p++
			i++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

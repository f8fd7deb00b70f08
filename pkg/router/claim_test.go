package router

import (
	"reflect"
	"testing"
)

// Who owns a chat is decided before its next message exists, so a term on a
// field not known of the chat must count as possibly holding, and a route
// that surely takes every message hides the routes after it.
func TestClaimsCountUnknownFields(t *testing.T) {
	tab, err := NewTable([]Route{
		{ID: 1, Seq: 10, Match: "chat_jid=slack:A1", Target: "acme"},
		{ID: 2, Seq: 20, Match: "chat_jid=slack:G1 sender=boss", Target: "globex#vip"},
		{ID: 3, Seq: 30, Match: "room=R1", Target: "initech"},
		{ID: 4, Seq: 40, Match: "platform=slack", Target: "globex"},
		{ID: 5, Seq: 50, Match: "platform=tg", Target: "{sender}"},
		{ID: 6, Seq: 60, Match: "", Target: "fallback"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(c Chat) []int64 {
		var out []int64
		for _, cl := range tab.Claims(c) {
			out = append(out, cl.RouteID)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		c    Chat
		want []int64
	}{
		{"a chat its own route surely takes", Chat{JID: "slack:A1", Platforms: []string{"slack"}}, []int64{1}},
		{"some sender of G1, an unseen room", Chat{JID: "slack:G1", Platforms: []string{"slack"}}, []int64{2, 3, 4}},
		{"a known room rules out initech", Chat{JID: "slack:G1", Platforms: []string{"slack"}, Rooms: []string{"R2"}}, []int64{2, 4}},
		{"an unknown platform may be any", Chat{JID: "nocolon"}, []int64{3, 4, 5, 6}},
		{"a known platform rules routes out", Chat{JID: "tg:1", Platforms: []string{"tg"}, Rooms: []string{""}}, []int64{5}},
	} {
		if got := ids(tc.c); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: claims %v, want %v", tc.name, got, tc.want)
		}
	}
	cl := tab.Claims(Chat{JID: "tg:1", Platforms: []string{"tg"}, Rooms: []string{""}})
	if cl[0].Tenant() != "" || !cl[0].Sure {
		t.Errorf("a {sender} top-level target is no one tenant's: %+v tenant %q", cl[0], cl[0].Tenant())
	}
	if d := tab.Claims(Chat{JID: "web:corp/eng#x"}); len(d) != 1 || d[0].Folder != "corp/eng" || d[0].Tenant() != "corp" {
		t.Errorf("direct address claims %+v", d)
	}
}

func TestMatchLiteral(t *testing.T) {
	for _, tc := range []struct {
		match, want string
		ok          bool
	}{
		{"chat_jid=slack:C1", "slack:C1", true},
		{"platform=slack chat_jid=slack:* chat_jid=slack:C2", "slack:C2", true},
		{"chat_jid=slack:C?", "", false},
		{"chat_jid=mail:bounce+a=b@x.example", "mail:bounce+a=b@x.example", true},
		{"platform=slack", "", false},
		{"", "", false},
	} {
		m, err := ParseMatch(tc.match)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := m.Literal("chat_jid"); got != tc.want || ok != tc.ok {
			t.Errorf("Literal(%q) = %q %v, want %q %v", tc.match, got, ok, tc.want, tc.ok)
		}
	}
}

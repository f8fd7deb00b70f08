package router

import (
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/pkg/arizuko/folder"
)

func TestResolve(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	routes := []Route{
		{ID: 5, Seq: 10, Match: "platform=tg chat_jid=tg:group:*", Target: "corp/eng"},
		{ID: 4, Seq: 10, Match: "platform=tg chat_jid=tg:group:7*", Target: "corp/ops"}, // same seq, lower id wins
		{ID: 1, Seq: 20, Match: "platform=tg verb=join", Target: "corp/lobby#joins"},
		{ID: 2, Seq: 30, Match: "platform=tg", Target: "users/{sender}"},
		{ID: 3, Seq: 5, Match: "room=audit-*", Target: "corp/audit#observe"},
		{ID: 6, Seq: 40, Match: "platform=mail sender=*@example.com", Target: "corp/mail#inbox"},
		{ID: 7, Seq: 50, Match: "platform=irc", Target: "users/{sender}"},
	}
	tab, err := NewTable(routes)
	if err != nil {
		t.Fatal(err)
	}
	live := &Engagement{Folder: "corp/eng/sre", Topic: "incident", At: now.Add(-10 * time.Minute)}
	stale := &Engagement{Folder: "corp/eng/sre", At: now.Add(-31 * time.Minute)}
	cases := []struct {
		name    string
		msg     Msg
		eng     *Engagement
		ttl     time.Duration
		folder  string
		topic   string
		observe bool
		how     How
		route   int64
	}{
		{"direct address", Msg{ChatJID: "web:corp/eng"}, nil, 0, "corp/eng", "", false, Direct, 0},
		{"direct with topic", Msg{ChatJID: "web:corp/eng#design"}, live, 0, "corp/eng", "design", false, Direct, 0},
		{"direct observe", Msg{ChatJID: "web:corp/eng#observe"}, nil, 0, "corp/eng", "", true, Direct, 0},
		{"direct beats routes", Msg{Platform: "tg", ChatJID: "web:x"}, nil, 0, "x", "", false, Direct, 0},
		{"direct invalid folder", Msg{ChatJID: "web:../etc"}, nil, 0, "", "", false, Unrouted, 0},
		{"seq then id", Msg{Platform: "tg", ChatJID: "tg:group:77"}, nil, 0, "corp/ops", "", false, ByRoute, 4},
		{"glob", Msg{Platform: "tg", ChatJID: "tg:group:12"}, nil, 0, "corp/eng", "", false, ByRoute, 5},
		{"topic target", Msg{Platform: "tg", ChatJID: "tg:dm:1", Verb: "join"}, nil, 0, "corp/lobby", "joins", false, ByRoute, 1},
		{"observe lowest seq", Msg{Platform: "tg", Room: "audit-1", ChatJID: "tg:group:12"}, live, 0, "corp/audit", "", true, ByRoute, 3},
		// Per-sender names are pinned: a changed mapping would move every user to a new, empty folder.
		{"sender expansion", Msg{Platform: "tg", ChatJID: "tg:dm:1", Sender: "Alice.Smith"}, nil, 0, "users/alice-smith-ece7781206f31b6c", "", false, ByRoute, 2},
		{"sender sanitised traversal", Msg{Platform: "tg", ChatJID: "tg:dm:1", Sender: "../../etc/passwd"}, nil, 0, "users/etc-passwd-f741cd69d0b845cd", "", false, ByRoute, 2},
		{"sender with nothing readable", Msg{Platform: "irc", ChatJID: "irc:1", Sender: "///"}, nil, 0, "users/292eaa9948f16ef6", "", false, ByRoute, 7},
		{"glob on sender", Msg{Platform: "mail", ChatJID: "m:1", Sender: "bob@example.com"}, nil, 0, "corp/mail", "inbox", false, ByRoute, 6},
		{"glob miss", Msg{Platform: "mail", ChatJID: "m:1", Sender: "bob@evil.com"}, nil, 0, "", "", false, Unrouted, 0},
		{"live engagement overrides route", Msg{Platform: "tg", ChatJID: "tg:group:12"}, live, 0, "corp/eng/sre", "incident", false, Engaged, 5},
		{"stale engagement does not override", Msg{Platform: "tg", ChatJID: "tg:group:12"}, stale, 0, "corp/eng", "", false, ByRoute, 5},
		{"custom ttl keeps it live", Msg{Platform: "tg", ChatJID: "tg:group:12"}, stale, time.Hour, "corp/eng/sre", "", false, Engaged, 5},
		{"custom ttl expires it", Msg{Platform: "tg", ChatJID: "tg:group:12"}, live, 5 * time.Minute, "corp/eng", "", false, ByRoute, 5},
		{"engagement never crosses tenants", Msg{Platform: "tg", ChatJID: "tg:group:12"}, &Engagement{Folder: "evil", At: now}, 0, "corp/eng", "", false, ByRoute, 5},
		{"engagement fallback", Msg{Platform: "slack", ChatJID: "s:1"}, stale, 0, "corp/eng/sre", "", false, Fallback, 0},
		{"unrouted", Msg{Platform: "slack", ChatJID: "s:1"}, nil, 0, "", "", false, Unrouted, 0},
	}
	for _, c := range cases {
		r := tab.Resolve(c.msg, c.eng, now, c.ttl)
		if r.Folder != c.folder || r.Topic != c.topic || r.Observe != c.observe || r.How != c.how || r.RouteID != c.route {
			t.Errorf("%s: got %+v, want folder=%q topic=%q observe=%v how=%s route=%d", c.name, r, c.folder, c.topic, c.observe, c.how, c.route)
		}
		if r.PerSender != (c.route == 2 || c.route == 7) {
			t.Errorf("%s: PerSender = %v", c.name, r.PerSender)
		}
		if r.Reason == "" {
			t.Errorf("%s: empty reason", c.name)
		}
	}
}

// A per-sender folder is that user's tenant (its home, session and secrets),
// so two distinct senders must never resolve to the same folder.
func TestPerSenderFoldersAreOneToOne(t *testing.T) {
	tab, err := NewTable([]Route{
		{ID: 2, Seq: 30, Match: "platform=tg", Target: "users/{sender}"},
		{ID: 7, Seq: 50, Match: "platform=irc", Target: "users/{sender}"},
	})
	if err != nil {
		t.Fatal(err)
	}
	prefix := strings.Repeat("shared-prefix-", 5)
	cases := []struct {
		name string
		a, b Msg
	}{
		{"punctuation", Msg{Platform: "tg", Sender: "alice.smith@example.com"}, Msg{Platform: "tg", Sender: "alice-smith@example.com"}},
		{"case", Msg{Platform: "tg", Sender: "Bob"}, Msg{Platform: "tg", Sender: "bob"}},
		{"long shared prefix", Msg{Platform: "tg", Sender: prefix + "alice"}, Msg{Platform: "tg", Sender: prefix + "mallory"}},
		{"nothing readable", Msg{Platform: "tg", Sender: "日本"}, Msg{Platform: "tg", Sender: "한국"}},
		{"empty and unreadable", Msg{Platform: "tg", Sender: ""}, Msg{Platform: "tg", Sender: "///"}},
		{"same nick on another platform", Msg{Platform: "tg", Sender: "alice"}, Msg{Platform: "irc", Sender: "alice"}},
		{"very long senders", Msg{Platform: "tg", Sender: strings.Repeat("x", 1000)}, Msg{Platform: "tg", Sender: strings.Repeat("x", 999)}},
	}
	now := time.Now()
	resolve := func(m Msg) string {
		t.Helper()
		m.ChatJID = m.Platform + ":dm:1"
		r := tab.Resolve(m, nil, now, 0)
		if r.How != ByRoute || !r.PerSender {
			t.Fatalf("%s:%q: %+v", m.Platform, m.Sender, r)
		}
		if err := folder.Validate(r.Folder); err != nil {
			t.Fatalf("%s:%q: %v", m.Platform, m.Sender, err)
		}
		if seg := strings.TrimPrefix(r.Folder, "users/"); strings.ContainsAny(seg, "/.") || len(seg) > 48 {
			t.Fatalf("%s:%q: segment %q", m.Platform, m.Sender, seg)
		}
		return r.Folder
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := resolve(c.a), resolve(c.b)
			if a == b {
				t.Fatalf("%s:%q and %s:%q share folder %q", c.a.Platform, c.a.Sender, c.b.Platform, c.b.Sender, a)
			}
			if again := resolve(c.a); again != a {
				t.Fatalf("%s:%q resolved to %q, then %q", c.a.Platform, c.a.Sender, a, again)
			}
		})
	}
}

func TestEmptyMatchMatchesAll(t *testing.T) {
	tab, err := NewTable([]Route{{ID: 1, Seq: 1, Match: "", Target: "catchall"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := tab.Resolve(Msg{Platform: "x", ChatJID: "y"}, nil, time.Now(), 0); r.Folder != "catchall" {
		t.Fatalf("got %+v", r)
	}
}

func TestRouteValidate(t *testing.T) {
	bad := []Route{
		{Match: "nokey", Target: "a"},
		{Match: "color=red", Target: "a"},
		{Match: "platform=", Target: "a"},
		{Target: "../x"},
		{Target: "a/**"},
		{Target: "a#"},
		{Target: "a#to pic"},
		{Target: "/abs"},
		{Target: ""},
	}
	for _, r := range bad {
		if err := r.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want error", r)
		}
	}
	if err := (Route{Match: "platform=tg sender=*", Target: "users/{sender}#main"}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestGlob(t *testing.T) {
	cases := []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"a*", "abc", true}, {"*c", "abc", true}, {"a?c", "abc", true},
		{"a*b*c", "axxbyyc", true}, {"a*b*c", "axxbyy", false}, {"tg:*", "tg:group:1/2", true},
		{"abc", "abcd", false}, {"", "", true}, {"", "a", false},
	}
	for _, c := range cases {
		if got := Glob(c.p, c.s); got != c.want {
			t.Errorf("Glob(%q, %q) = %v", c.p, c.s, got)
		}
	}
}

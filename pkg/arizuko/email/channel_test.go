package email

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/router"
)

// sink records what the channel posts; every message reaches folder "f".
type sink struct{ posted []service.MessageIn }

func (s *sink) Resolve(context.Context, service.MessageIn) (router.Result, error) {
	return router.Result{Folder: "f", How: router.How("route")}, nil
}

func (s *sink) PostMessage(_ context.Context, in service.MessageIn) (service.Ingest, error) {
	s.posted = append(s.posted, in)
	return service.Ingest{}, nil
}

func newTestChannel(t *testing.T, chatBy string) (*Channel, *sink, *[]acl.Decision) {
	t.Helper()
	return newTestChannelIn(t, chatBy, t.TempDir())
}

func newTestChannelIn(t *testing.T, chatBy, home string) (*Channel, *sink, *[]acl.Decision) {
	t.Helper()
	s, audit := &sink{}, &[]acl.Decision{}
	cfg := Config{Address: "agent@own.test", IMAP: "127.0.0.1:1", IMAPTLS: "none", SMTP: "127.0.0.1:1", SMTPTLS: "none",
		AuthservID: "mx.test", ChatBy: chatBy, MaxAttachment: 8}
	if err := cfg.Check(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{Config: cfg, Sink: s, Home: func(string) (string, error) { return home, nil },
		Audit: func(_ context.Context, d acl.Decision) error { *audit = append(*audit, d); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	return c, s, audit
}

func rawMail(from, id, refs string) []byte {
	h := "Authentication-Results: mx.test; spf=pass smtp.mailfrom=a.test; dkim=pass header.d=a.test; dmarc=pass header.from=a.test\r\n" +
		"Received: from x by mx.test\r\nFrom: " + from + "\r\nSubject: s\r\nMessage-ID: <" + id + ">\r\n"
	if refs != "" {
		h += "In-Reply-To: " + refs[strings.LastIndex(refs, "<"):] + "\r\nReferences: " + refs + "\r\n"
	}
	return []byte(h + "\r\nbody\r\n")
}

// One chat per thread follows the root of References; one chat per sender
// follows the verified address.
func TestChatPerThreadOrSender(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		by   string
		want []string
	}{
		{"thread", []string{"email:thread-" + ThreadKey("al@a.test", "r@a.test"), "email:thread-" + ThreadKey("al@a.test", "r@a.test"), "email:thread-" + ThreadKey("al@a.test", "new@a.test")}},
		{"sender", []string{"email:al@a.test", "email:al@a.test", "email:al@a.test"}},
	} {
		ch, s, _ := newTestChannel(t, c.by)
		for _, m := range [][]byte{rawMail("al@a.test", "r@a.test", ""), rawMail("Al <AL@a.test>", "x@a.test", "<r@a.test> <y@own.test>"), rawMail("al@a.test", "new@a.test", "")} {
			if err := ch.Handle(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		for _, p := range s.posted {
			got = append(got, p.ChatJID)
			if p.Sender != "al@a.test" || p.Platform != Platform {
				t.Errorf("posted %+v", p)
			}
		}
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("chat_by %s: chats %v, want %v", c.by, got, c.want)
		}
	}
}

// Another verified sender who reuses a thread's Message-IDs lands in a chat
// of its own and leaves the thread's record (where replies go) alone.
func TestQuotedThreadIDsMakeNoSeat(t *testing.T) {
	ch, s, _ := newTestChannel(t, "thread")
	ctx := context.Background()
	mallory := strings.ReplaceAll(string(rawMail("mal@b.test", "r@a.test", "<r@a.test>")), "a.test;", "b.test;")
	mallory = strings.ReplaceAll(mallory, "=a.test", "=b.test")
	for _, m := range [][]byte{rawMail("al@a.test", "r@a.test", ""), []byte(mallory)} {
		if err := ch.Handle(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.posted) != 2 || s.posted[0].ChatJID == s.posted[1].ChatJID || s.posted[1].Sender != "mal@b.test" {
		t.Fatalf("posted %+v", s.posted)
	}
	th, ok, err := ch.state.thread(s.posted[0].ChatJID, "r@a.test")
	if err != nil || !ok || th.From != "al@a.test" {
		t.Fatalf("alice's thread record %+v %v %v", th, ok, err)
	}
}

// An outbound message of a chat the channel never saw verified mail in is
// refused (the daemon retries it, then marks it failed), so an agent that
// names any address as a chat mails no one.
func TestSendWithoutThreadRefused(t *testing.T) {
	for _, by := range []string{"thread", "sender"} {
		ch, _, _ := newTestChannel(t, by)
		for _, chat := range []string{"email:thread-abc", "email:victim@b.test"} {
			if err := ch.Send(context.Background(), 1, chat, "hi", ""); !errors.Is(err, ErrNoThread) {
				t.Errorf("chat_by %s: Send to %s = %v, want ErrNoThread", by, chat, err)
			}
		}
	}
}

func TestConfigCheckNamesTheKey(t *testing.T) {
	good := Config{Address: "a@b.test", IMAP: "imap.b.test:993", SMTP: "smtp.b.test:465", AuthservID: "mx.b.test"}
	for _, c := range []struct {
		key string
		mod func(*Config)
	}{
		{"email.address", func(c *Config) { c.Address = "Agent <a@b.test>" }},
		{"email.imap", func(c *Config) { c.IMAP = "imap.b.test" }},
		{"email.smtp_tls", func(c *Config) { c.SMTPTLS = "none" }},
		{"email.imap_tls", func(c *Config) { c.IMAPTLS = "ssl" }},
		{"email.authserv_id", func(c *Config) { c.AuthservID = "" }},
		{"email.require", func(c *Config) { c.Require = []string{"arc"} }},
		{"email.chat_by", func(c *Config) { c.ChatBy = "day" }},
		{"email.imap_password_file", func(c *Config) { c.IMAPPasswordFile = "/nonexistent/pw" }},
	} {
		cfg := good
		c.mod(&cfg)
		if err := cfg.Check(t.TempDir()); err == nil || !strings.HasPrefix(err.Error(), c.key+":") {
			t.Errorf("%s: Check = %v", c.key, err)
		}
	}
	cfg := good
	if err := cfg.Check("/data"); err != nil || cfg.ChatBy != "thread" || len(cfg.Require) != 3 || cfg.StateDir != "/data/email" {
		t.Fatalf("defaults: %+v %v", cfg, err)
	}
}

// A symlink the agent left in its home cannot send an attachment outside it.
func TestAttachmentStaysInHome(t *testing.T) {
	home, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(home, "mail")); err != nil {
		t.Fatal(err)
	}
	ch, s, _ := newTestChannelIn(t, "thread", home)
	m := strings.Replace(string(rawMail("al@a.test", "f@a.test", "")), "\r\nbody\r\n",
		"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=B\r\n\r\n--B\r\nContent-Type: text/plain\r\n\r\nhi\r\n"+
			"--B\r\nContent-Disposition: attachment; filename=x.txt\r\n\r\nsmall\r\n--B--\r\n", 1)
	if err := ch.Handle(context.Background(), []byte(m)); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("attachment written through the symlink: %v", ents)
	}
	if len(s.posted) != 1 || !strings.Contains(s.posted[0].Text, "Attachments: not saved") {
		t.Fatalf("posted %+v", s.posted)
	}
}

// The callback answers only under its secret path: a send without it, a
// typing hint, an edit and an unknown call each get their own answer.
func TestHandlerPaths(t *testing.T) {
	ch, _, _ := newTestChannel(t, "thread")
	srv := httptest.NewServer(ch.Handler("s3cret"))
	defer srv.Close()
	for _, c := range []struct {
		method, path, body string
		want               int
	}{
		{"POST", "/wrong/send", `{"id":1,"chat_jid":"email:x","text":"t"}`, http.StatusNotFound},
		{"POST", "/s3cret/send", `{"id":1,"chat_jid":"email:thread-x","text":"t"}`, http.StatusNotFound}, // no mail in that chat
		{"POST", "/s3cret/send", `{"id":1,"chat_jid":"slack:x","text":"t"}`, http.StatusNotFound},
		{"POST", "/s3cret/send", `{`, http.StatusBadRequest},
		{"GET", "/s3cret/send", ``, http.StatusNotFound},
		{"POST", "/s3cret/typing", `{"chat_jid":"email:x"}`, http.StatusNoContent},
		{"POST", "/s3cret/edit", `{"id":2}`, http.StatusGone},
		{"POST", "/s3cret/other", `{}`, http.StatusNotFound},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, resp.StatusCode, c.want)
		}
	}
}

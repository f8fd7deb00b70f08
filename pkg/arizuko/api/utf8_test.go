package api

import (
	"context"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// A body with bytes that are not UTF-8 is refused with 400 naming the
// field, never stored with U+FFFD in place of what the sender wrote.
func TestInvalidUTF8Refused(t *testing.T) {
	srv, l := newServer(t)
	auth := "Bearer " + adminToken
	call(t, srv, "POST", "/v1/folders", auth, `{"path":"acme"}`)
	cases := []struct{ path, body, field string }{
		{"/v1/messages", "{\"chat_jid\":\"web:acme\",\"text\":\"caf\xe9 \xff\"}", "field text "},
		{"/v1/messages", "{\"chat_jid\":\"web:acme\",\"sender\":\"\xc3\",\"text\":\"hi\"}", "field sender "},
		{"/v1/secrets", "{\"scope\":\"folder:acme\",\"name\":\"K\",\"value\":\"12345678\xfe\"}", "field value "},
		{"/v1/messages", "{\"chat_jid\":\"web:acme\",\"te\xffxt\":\"hi\"}", "a field name"},
	}
	for _, c := range cases {
		r := call(t, srv, "POST", c.path, auth, c.body)
		envelope(t, r, 400, service.CodeInvalid)
		if !strings.Contains(r.body, c.field) || !strings.Contains(r.body, "UTF-8") {
			t.Errorf("%s %q: %s, want the field %q named", c.path, c.body, r.body, c.field)
		}
	}
	if ms, _ := l.Store().ListMessages(context.Background(), "web:acme", 0, 10); len(ms) != 0 {
		t.Fatalf("stored %+v", ms)
	}
	if r := call(t, srv, "POST", "/v1/messages", auth, `{"chat_jid":"web:acme","text":"café ✓"}`); r.status != 201 && r.status != 200 {
		t.Fatalf("UTF-8 message: %+v", r)
	}
}

// The client refuses a string that is not UTF-8 itself, naming the field,
// rather than let encoding/json send U+FFFD for it.
func TestClientRefusesInvalidUTF8(t *testing.T) {
	srv, l := newServer(t)
	c := NewClient(srv.URL, adminToken)
	ctx := context.Background()
	if _, err := c.AddFolder(ctx, store.Folder{Path: "acme"}); err != nil {
		t.Fatal(err)
	}
	_, err := c.PostMessage(ctx, service.MessageIn{ChatJID: "web:acme", Text: "caf\xe9"})
	if service.Code(err) != service.CodeInvalid || !strings.Contains(err.Error(), "field text ") {
		t.Fatalf("client sent invalid UTF-8: %v", err)
	}
	err = c.SetSecret(ctx, service.SecretIn{Scope: "folder:acme", Name: "K", Value: "12345678\xff"})
	if service.Code(err) != service.CodeInvalid || !strings.Contains(err.Error(), "field value ") {
		t.Fatalf("client sent an invalid secret: %v", err)
	}
	if ms, _ := l.Store().ListMessages(ctx, "web:acme", 0, 10); len(ms) != 0 {
		t.Fatalf("stored %+v", ms)
	}
}

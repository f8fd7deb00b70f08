package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
)

// The inbound half of the adapter contract: a retried POST with the same
// Idempotency-Key stores one message and answers the first one's id;
// attachments reach the stored text; registering without a secret answers
// a fresh one.
func TestAdapterContractInbound(t *testing.T) {
	srv, l := newServer(t)
	post := func(key, body string) raw {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/messages", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return raw{status: resp.StatusCode}
	}
	msg := `{"chat_jid":"slack:C1/1.0","platform":"slack","sender":"u1","text":"hi",
		"attachments":[{"name":"a.png","content_type":"image/png","size":3,"url":"https://files.example/a.png"}]}`
	if r := post("ev-1", msg); r.status != http.StatusCreated {
		t.Fatalf("first post: %d", r.status)
	}
	if r := post("ev-1", msg); r.status != http.StatusOK {
		t.Fatalf("retried post: %d, want 200 (a duplicate)", r.status)
	}
	if r := post("ev-2", msg); r.status != http.StatusCreated {
		t.Fatalf("another key: %d", r.status)
	}
	ms, err := l.Store().ListMessages(context.Background(), "slack:C1/1.0", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 {
		t.Fatalf("%d messages stored for two keys and a retry, want 2", len(ms))
	}
	if want := "hi\n[attachment: a.png (image/png, 3 bytes) https://files.example/a.png]"; ms[0].Text != want || ms[0].PlatformID != "ev-1" {
		t.Fatalf("stored %q id %q, want %q id ev-1", ms[0].Text, ms[0].PlatformID, want)
	}

	for _, tc := range []struct{ name, key, body, want string }{
		{"key and platform_id differ", "k1", `{"chat_jid":"slack:C1","text":"x","platform_id":"other"}`, "differ"},
		{"attachment not http", "", `{"chat_jid":"slack:C1","text":"x","attachments":[{"name":"a","url":"file:///etc/passwd"}]}`, "http(s)"},
		{"attachment without name", "", `{"chat_jid":"slack:C1","text":"x","attachments":[{"url":"https://x.example/a"}]}`, "name"},
	} {
		r := call(t, srv, "POST", "/v1/messages", "Bearer "+adminToken, tc.body)
		if tc.key != "" {
			req, _ := http.NewRequest("POST", srv.URL+"/v1/messages", strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+adminToken)
			req.Header.Set("Idempotency-Key", tc.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var e service.Error
			json.NewDecoder(resp.Body).Decode(&e)
			resp.Body.Close()
			r = raw{resp.StatusCode, e.Message}
		}
		if r.status != http.StatusBadRequest || !strings.Contains(r.body, tc.want) {
			t.Errorf("%s: %d %s, want 400 naming %q", tc.name, r.status, r.body, tc.want)
		}
	}

	r := call(t, srv, "POST", "/v1/adapters", "Bearer "+adminToken, `{"platform":"slack","callback_url":"http://127.0.0.1:9"}`)
	var a struct{ Secret string }
	json.Unmarshal([]byte(r.body), &a)
	if r.status != http.StatusOK || len(a.Secret) < 32 {
		t.Fatalf("register without a secret: %d %s, want a fresh secret", r.status, r.body)
	}
	r = call(t, srv, "POST", "/v1/adapters", "Bearer "+adminToken, `{"platform":"slack","callback_url":"http://127.0.0.1:9","secret":"short"}`)
	envelope(t, r, http.StatusBadRequest, service.CodeInvalid)
}

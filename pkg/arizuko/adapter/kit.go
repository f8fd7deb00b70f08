package adapter

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"
)

// KitConfig is what the conformance kit needs to play the daemon's side
// against a running adapter.
type KitConfig struct {
	URL    string // the adapter's callback URL, as registered
	Secret string // the signing secret it was registered with
	Chat   string // a chat jid the adapter carries
	Client *http.Client
	// Inbox, when set, adds the inbound case: the adapter posts to it.
	Inbox *Inbox
}

// Result is one conformance case.
type Result struct {
	Case   string
	Pass   bool
	Detail string
}

// Check drives the adapter at c.URL through every case of the contract and
// returns one result per case; err is only for a config that cannot run.
func Check(ctx context.Context, c KitConfig) ([]Result, error) {
	if c.URL == "" || c.Secret == "" || c.Chat == "" {
		return nil, fmt.Errorf("conformance: the adapter URL, its secret and a chat jid it carries are all required")
	}
	if c.Client == nil {
		c.Client = &http.Client{Timeout: 30 * time.Second}
	}
	k := &kit{c: c, base: strings.TrimRight(c.URL, "/"), run: runID()}
	var out []Result
	cases := k.cases()
	if c.Inbox != nil {
		cases = append(cases, kcase{"inbound: a redelivered message has one key", k.inboundCase})
	}
	for _, tc := range cases {
		pass, detail := tc.fn(ctx)
		out = append(out, Result{Case: tc.name, Pass: pass, Detail: detail})
	}
	return out, nil
}

// Passed reports whether every result passed.
func Passed(rs []Result) bool {
	for _, r := range rs {
		if !r.Pass {
			return false
		}
	}
	return len(rs) > 0
}

// PrintTable writes rs as an aligned pass/fail table.
func PrintTable(w io.Writer, rs []Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tRESULT\tDETAIL")
	for _, r := range rs {
		res := "FAIL"
		if r.Pass {
			res = "pass"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Case, res, r.Detail)
	}
	tw.Flush()
}

type kit struct {
	c    KitConfig
	base string
	run  string
	// the first send's key and platform id, for the retry and edit cases
	firstKey, firstID string
	ids               map[string]int64 // message id of each case's key, as the daemon numbers them
}

type kcase struct {
	name string
	fn   func(context.Context) (bool, string)
}

func runID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// reply is one answer of the adapter.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// how a call is signed
type signing int

const (
	signed signing = iota
	unsigned
	wrongSecret
	stale
	otherBody
)

func (k *kit) call(ctx context.Context, path string, body []byte, s signing) (reply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, k.base+path, bytes.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	var d Delivery
	if json.Unmarshal(body, &d) == nil && d.Key != "" {
		req.Header.Set(HeaderIdempotency, d.Key)
	}
	now := time.Now()
	switch s {
	case signed:
		Sign(req.Header, k.c.Secret, now, body)
	case wrongSecret:
		Sign(req.Header, k.c.Secret+"-not", now, body)
	case stale:
		Sign(req.Header, k.c.Secret, now.Add(-2*Window), body)
	case otherBody:
		Sign(req.Header, k.c.Secret, now, append([]byte(`{"tampered":true}`), body...))
	}
	resp, err := k.c.Client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return reply{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

func (k *kit) key(name string) string { return "conformance-" + k.run + "-" + name }

func (k *kit) delivery(name string) Delivery {
	return Delivery{ID: k.id(name), Key: k.key(name), ChatJID: k.c.Chat, Text: "arizuko conformance check " + name + " (" + k.run + ")"}
}

// id numbers keys as the daemon does: one id per key, a retry keeps it.
func (k *kit) id(name string) int64 {
	if k.ids == nil {
		k.ids = map[string]int64{}
	}
	if _, ok := k.ids[name]; !ok {
		k.ids[name] = int64(len(k.ids) + 1)
	}
	return k.ids[name]
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

// sent posts d signed and wants a 2xx with a platform id.
func (k *kit) sent(ctx context.Context, d Delivery) (string, string) {
	r, err := k.call(ctx, PathSend, mustJSON(d), signed)
	if err != nil {
		return "", "request failed: " + err.Error()
	}
	if r.status/100 != 2 {
		return "", fmt.Sprintf("answered %d %s, want 2xx", r.status, snippet(r.body))
	}
	var a Answer
	if json.Unmarshal(r.body, &a) != nil || a.PlatformID == "" {
		return "", fmt.Sprintf("answered %d %s, want {\"platform_id\": …}", r.status, snippet(r.body))
	}
	return a.PlatformID, ""
}

// refused wants the call answered 401.
func (k *kit) refused(ctx context.Context, path string, body []byte, s signing) (bool, string) {
	r, err := k.call(ctx, path, body, s)
	if err != nil {
		return false, "request failed: " + err.Error()
	}
	if r.status != http.StatusUnauthorized {
		return false, fmt.Sprintf("answered %d, want 401", r.status)
	}
	return true, "401"
}

func (k *kit) cases() []kcase {
	return []kcase{
		{"send: signed delivery is sent", func(ctx context.Context) (bool, string) {
			d := k.delivery("first")
			pid, why := k.sent(ctx, d)
			if why != "" {
				return false, why
			}
			k.firstKey, k.firstID = d.Key, pid
			return true, "platform_id " + pid
		}},
		{"send: retry of a key is not sent twice", func(ctx context.Context) (bool, string) {
			if k.firstKey == "" {
				return false, "needs the first send"
			}
			d := k.delivery("first")
			pid, why := k.sent(ctx, d)
			if why != "" {
				return false, why
			}
			if pid != k.firstID {
				return false, fmt.Sprintf("the retry got platform_id %s, the first %s: sent twice", pid, k.firstID)
			}
			return true, "same platform_id"
		}},
		{"send: a new key is a new message", func(ctx context.Context) (bool, string) {
			pid, why := k.sent(ctx, k.delivery("second"))
			if why != "" {
				return false, why
			}
			if pid == k.firstID {
				return false, "a different key got the first message's platform_id " + pid
			}
			return true, "platform_id " + pid
		}},
		{"send: attachments by reference accepted", func(ctx context.Context) (bool, string) {
			d := k.delivery("attachment")
			d.Attachments = []Attachment{{Name: "report.txt", ContentType: "text/plain", Size: 5, URL: "https://example.invalid/report.txt"}}
			pid, why := k.sent(ctx, d)
			return why == "", firstOf(why, "platform_id "+pid)
		}},
		{"signature: unsigned call refused", func(ctx context.Context) (bool, string) {
			return k.refused(ctx, PathSend, mustJSON(k.delivery("unsigned")), unsigned)
		}},
		{"signature: wrong secret refused", func(ctx context.Context) (bool, string) {
			return k.refused(ctx, PathSend, mustJSON(k.delivery("wrong-secret")), wrongSecret)
		}},
		{"signature: tampered body refused", func(ctx context.Context) (bool, string) {
			return k.refused(ctx, PathSend, mustJSON(k.delivery("tampered")), otherBody)
		}},
		{"signature: stale timestamp refused", func(ctx context.Context) (bool, string) {
			return k.refused(ctx, PathSend, mustJSON(k.delivery("stale")), stale)
		}},
		{"signature: unsigned typing refused", func(ctx context.Context) (bool, string) {
			return k.refused(ctx, PathTyping, mustJSON(Typing{ChatJID: k.c.Chat, Typing: true}), unsigned)
		}},
		{"errors: malformed body is 400", func(ctx context.Context) (bool, string) {
			r, err := k.call(ctx, PathSend, []byte(`{"idempotency_key": `), signed)
			if err != nil {
				return false, "request failed: " + err.Error()
			}
			return r.status == http.StatusBadRequest, fmt.Sprintf("answered %d, want 400", r.status)
		}},
		{"edit: a sent message is edited", func(ctx context.Context) (bool, string) {
			if k.firstKey == "" {
				return false, "needs the first send"
			}
			e := Edit{ID: k.id("edit"), Key: k.key("edit"), EditOf: k.firstKey, ChatJID: k.c.Chat, Text: "edited by the conformance check"}
			r, err := k.call(ctx, PathEdit, mustJSON(e), signed)
			if err != nil {
				return false, "request failed: " + err.Error()
			}
			if r.status/100 != 2 {
				return false, fmt.Sprintf("answered %d %s, want 2xx", r.status, snippet(r.body))
			}
			var a Answer
			if json.Unmarshal(r.body, &a) != nil || a.PlatformID != k.firstID {
				return false, fmt.Sprintf("answered %s, want the edited message's platform_id %s", snippet(r.body), k.firstID)
			}
			return true, "platform_id " + a.PlatformID
		}},
		{"edit: unknown message is 410", func(ctx context.Context) (bool, string) {
			e := Edit{ID: k.id("edit-unknown"), Key: k.key("edit-unknown"), EditOf: k.key("never-sent"), ChatJID: k.c.Chat, Text: "x"}
			r, err := k.call(ctx, PathEdit, mustJSON(e), signed)
			if err != nil {
				return false, "request failed: " + err.Error()
			}
			return r.status == http.StatusGone, fmt.Sprintf("answered %d, want 410", r.status)
		}},
		{"typing: on and off accepted", func(ctx context.Context) (bool, string) {
			for _, on := range []bool{true, false} {
				r, err := k.call(ctx, PathTyping, mustJSON(Typing{ChatJID: k.c.Chat, Typing: on}), signed)
				if err != nil {
					return false, "request failed: " + err.Error()
				}
				if r.status/100 != 2 {
					return false, fmt.Sprintf("typing=%v answered %d, want 2xx", on, r.status)
				}
			}
			return true, "2xx"
		}},
	}
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

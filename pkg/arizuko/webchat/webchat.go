// Package webchat is the browser chat `arizuko serve` answers on "/": a page
// (embedded, no outside assets) that logs in with an API token, lists the
// folders the token may message, posts to the chosen one, and follows the
// chat live over server-sent events: messages both ways, typing while a turn
// is queued or running, and a notice when a turn fails or a send is refused.
//
// The page's own endpoints sit on the API server behind the same tokens and
// route classes; the agent's replies reach the chat through the ordinary
// outbound path, the "webchat" platform's adapter being this package's hook.
package webchat

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"time"

	"github.com/crackbox/crackbox/pkg/arizuko/adapter"
	"github.com/crackbox/crackbox/pkg/arizuko/api"
	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
)

// Platform is the adapter platform of web chat messages.
const Platform = "webchat"

//go:embed assets
var assets embed.FS

// Chat serves the web chat over a Local service.
type Chat struct {
	l       *service.Local
	st      *store.Store
	post    func(context.Context, service.MessageIn) (service.Ingest, error)
	secret  string
	handler *adapter.Handler
	poll    time.Duration
}

// New returns the web chat. post stores an inbound message (the daemon's
// PostMessage, which also wakes the turn queue); poll is how often an open
// event stream looks for news (0: 250 ms).
func New(l *service.Local, post func(context.Context, service.MessageIn) (service.Ingest, error), poll time.Duration) *Chat {
	var b [16]byte
	rand.Read(b[:])
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	c := &Chat{l: l, st: l.Store(), post: post, secret: hex.EncodeToString(b[:]), poll: poll}
	c.handler = c.adapter()
	return c
}

// Register adds the page, its endpoints and the delivery hook to s.
func (c *Chat) Register(s *api.Server) {
	sub, _ := fs.Sub(assets, "assets")
	static := hardened(http.FileServerFS(sub))
	s.Mount("GET", "/{$}", static)
	s.Mount("GET", "/webchat/{file}", http.StripPrefix("/webchat/", static))
	s.Mount("POST", "/webchat/hook/{secret}/{op}", http.HandlerFunc(c.hook))
	s.Handle("/v1/webchat/folders", map[string]api.HandlerFunc{"GET": c.folders})
	s.Handle("/v1/webchat/messages", map[string]api.HandlerFunc{"POST": c.send})
	s.Handle("/v1/webchat/events", map[string]api.HandlerFunc{"GET": c.events})
}

// hardened serves the page so that it runs only its own script, cannot be
// framed, and sends no referrer: the token it holds stays with it.
func hardened(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		h.ServeHTTP(w, r)
	})
}

// Attach makes this process the webchat platform's adapter, reached at base
// (the daemon's own URL). The hook's path carries a per-process secret, and
// every call is signed with it as the adapter contract says, so nothing
// else on the host can forge or swallow deliveries.
func (c *Chat) Attach(ctx context.Context, base string) error {
	return c.st.SetAdapter(ctx, store.Adapter{Platform: Platform, CallbackURL: base + "/webchat/hook/" + c.secret, Secret: c.secret})
}

// adapter is the web chat's side of the contract. A reply, an edit and a
// turn's state are all in the store already, and the event streams read
// them from there, so accepting is all there is to do; the platform id is
// the stored message's.
func (c *Chat) adapter() *adapter.Handler {
	return &adapter.Handler{Secret: c.secret, Log: c.l.Log(),
		Send: func(_ context.Context, d adapter.Delivery) (string, error) {
			return fmt.Sprintf("%s:%d", Platform, d.ID), nil
		},
		Edit:   func(context.Context, adapter.Edit, string) error { return nil },
		Typing: func(context.Context, adapter.Typing) error { return nil },
	}
}

// hook serves the contract's calls under the secret path.
func (c *Chat) hook(w http.ResponseWriter, r *http.Request) {
	if subtle.ConstantTimeCompare([]byte(r.PathValue("secret")), []byte(c.secret)) != 1 {
		http.NotFound(w, r)
		return
	}
	c.handler.ServeHTTP(w, r)
}

// Folder is a folder the caller may message.
type Folder struct {
	Path        string `json:"path"`
	DisplayName string `json:"display_name,omitempty"`
}

func (c *Chat) folders(w http.ResponseWriter, r *http.Request) error {
	fs, err := c.l.ListFolders(r.Context())
	if err != nil {
		return err
	}
	p, err := c.l.Gate().Policy(r.Context())
	if err != nil {
		return err
	}
	out := []Folder{}
	for _, f := range fs {
		if p.Decide(service.Principal(r.Context()), "message:post", f.Path).Allow {
			out = append(out, Folder{Path: f.Path, DisplayName: f.DisplayName})
		}
	}
	return api.WriteJSON(w, http.StatusOK, out)
}

// SendIn is what the page posts.
type SendIn struct {
	Folder string `json:"folder"`
	Text   string `json:"text"`
}

func chatOf(f string) string { return router.DirectPrefix + f }

func (c *Chat) send(w http.ResponseWriter, r *http.Request) error {
	var in SendIn
	if err := api.Decode(w, r, &in); err != nil {
		return err
	}
	if err := folder.Validate(in.Folder); err != nil {
		return fmt.Errorf("folder %q: %w: %w", in.Folder, err, service.ErrInvalid)
	}
	sender := "web"
	if cl, ok := service.CallerOf(r.Context()); ok {
		sender = "web:" + cl.Name
	}
	ing, err := c.post(r.Context(), service.MessageIn{ChatJID: chatOf(in.Folder), Text: in.Text, Sender: sender, Platform: Platform})
	if err != nil {
		return err
	}
	return api.WriteJSON(w, http.StatusCreated, ing)
}

// Event is one server-sent event's data.
type Event struct {
	Message *store.Message `json:"message,omitempty"`
	Typing  *bool          `json:"typing,omitempty"`
	Notice  string         `json:"notice,omitempty"`
}

// events streams a folder's chat: its history first, then what happens.
func (c *Chat) events(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	f := r.URL.Query().Get("folder")
	if err := folder.Validate(f); err != nil {
		return fmt.Errorf("folder %q: %w: %w", f, err, service.ErrInvalid)
	}
	// message:read on this folder, checked and audited once: a login of
	// one tenant never subscribes to another's chat.
	if err := c.l.Gate().Check(ctx, service.Principal(ctx), "message:read", f); err != nil {
		return err
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		return fmt.Errorf("event stream: response cannot flush")
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	st := streamState{lastTurn: -1}
	tick := time.NewTicker(c.poll)
	defer tick.Stop()
	beat := time.Now()
	for {
		evs, err := c.news(ctx, f, &st)
		if err != nil {
			return nil // the status line is sent; end the stream, the page reconnects
		}
		for _, e := range evs {
			b, _ := json.Marshal(e)
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		if len(evs) > 0 || time.Since(beat) > 15*time.Second {
			if len(evs) == 0 {
				io.WriteString(w, ": keep-alive\n\n")
			}
			beat = time.Now()
			fl.Flush()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

type streamState struct {
	after    int64 // last message id sent
	lastTurn int64 // newest turn id seen; -1 before the first look
	typing   bool
}

// news is what changed in folder f's chat since st.
func (c *Chat) news(ctx context.Context, f string, st *streamState) ([]Event, error) {
	var out []Event
	ms, err := c.st.ListMessages(ctx, chatOf(f), st.after, 200)
	if err != nil {
		return nil, err
	}
	p, err := c.l.Gate().Policy(ctx)
	if err != nil {
		return nil, err
	}
	who := service.Principal(ctx)
	for i := range ms {
		// Every message of the chat the login may read, a delegate's reply
		// into it included.
		st.after = ms[i].ID
		if p.Decide(who, "message:read", ms[i].Folder).Allow {
			out = append(out, Event{Message: &ms[i]})
		}
	}
	ts, err := c.st.ListTurns(ctx, f, 5)
	if err != nil {
		return nil, err
	}
	typing := false
	newest := st.lastTurn
	for i := len(ts) - 1; i >= 0; i-- {
		t := ts[i]
		if t.Status == store.TurnQueued || t.Status == store.TurnRunning {
			typing = true
		}
		if t.ID > st.lastTurn && st.lastTurn >= 0 && t.Status == store.TurnFailed {
			out = append(out, Event{Notice: fmt.Sprintf("%s could not answer (turn %d failed: %s)", f, t.ID, firstNonEmpty(t.Error, t.Outcome, "no reason given"))})
		}
		if t.Status == store.TurnDone || t.Status == store.TurnFailed {
			newest = max(newest, t.ID)
		}
	}
	if st.lastTurn < 0 {
		newest = max(newest, 0)
	}
	st.lastTurn = newest
	if typing != st.typing {
		st.typing = typing
		out = append(out, Event{Typing: &typing})
	}
	return out, nil
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

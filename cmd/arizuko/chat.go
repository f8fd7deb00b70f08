package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/crackbox/crackbox/pkg/arizuko/adapter"
	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/arizuko/turn"
	"github.com/crackbox/crackbox/pkg/router"
)

// chatPlatform is the platform of every message typed in a terminal (`arizuko
// chat` and `arizuko send`), so routes match it as "platform=term". It also
// prefixes the adapter each session registers: one per session, so two chats
// at once do not replace each other's callback.
const chatPlatform = "term"

// newChatPlatform names one chat session's adapter, e.g. "term-3f9a0c1d".
func newChatPlatform() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return chatPlatform + "-" + hex.EncodeToString(b[:]), nil
}

// chatSession is one terminal chat with a folder: it is the adapter the
// daemon delivers replies to, and it posts what the user types.
type chatSession struct {
	base, token string
	folder      string
	chat        string // web:<folder>[#topic]
	sender      string
	in          io.Reader
	out         io.Writer // replies
	status      io.Writer // typing indicator
	tty         bool
	poll        time.Duration
	platform    string            // this session's adapter; "" = a fresh one per run
	msg         service.MessageIn // fields every posted line carries (room, verb, …)

	since    int64 // the folder's newest turn when the session began
	undeliv  int   // messages that reached no folder
	lines    int   // lines posted, numbering their idempotency keys
	lastSent int64 // id of the newest message posted that a turn must answer
	answered bool  // a reply or notice arrived since the last line was posted
	// queue holds piped lines not yet posted: without a terminal each line
	// waits until the turn of the one before has ended, so every line runs
	// a turn of its own and gets its own answer (lines posted at once would
	// be one turn answering the last).
	queue []string

	mu        sync.Mutex
	typing    bool
	announced bool        // without a terminal, say "typing" once per line sent
	replies   chan string // texts the daemon delivered
}

// serveAdapter listens on loopback for the daemon's calls, as the adapter
// contract says: signed with secret, deduplicated on their keys.
func (c *chatSession) serveAdapter(secret string) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	h := &adapter.Handler{Secret: secret, Log: slog.Default(),
		Send: func(ctx context.Context, d adapter.Delivery) (string, error) {
			if d.ChatJID != c.chat {
				// Not ours: the daemon retries it later, maybe with its own adapter.
				return "", fmt.Errorf("chat %s: %w", d.ChatJID, adapter.ErrUnknownChat)
			}
			if err := c.deliver(ctx, d.Text); err != nil {
				return "", err
			}
			return fmt.Sprintf("%s:%d", c.platform, d.ID), nil
		},
		Edit: func(ctx context.Context, e adapter.Edit, _ string) error {
			return c.deliver(ctx, "(edited) "+e.Text)
		},
		Typing: func(_ context.Context, t adapter.Typing) error {
			if t.ChatJID == c.chat {
				c.setTyping(t.Typing)
			}
			return nil
		},
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

// deliver hands a text to the printing loop; a session that stopped
// reading fails the call, and the daemon keeps the message.
func (c *chatSession) deliver(ctx context.Context, text string) error {
	select {
	case c.replies <- text:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(10 * time.Second):
		return fmt.Errorf("the terminal is not reading its replies")
	}
}

// run chats until the input ends or ctx is cancelled.
func (c *chatSession) run(ctx context.Context) error {
	c.replies = make(chan string, 16)
	if c.platform == "" {
		p, err := newChatPlatform()
		if err != nil {
			return err
		}
		c.platform = p
	}
	var key [24]byte
	if _, err := rand.Read(key[:]); err != nil {
		return err
	}
	secret := hex.EncodeToString(key[:])
	cb, stop, err := c.serveAdapter(secret)
	if err != nil {
		return err
	}
	defer stop()
	if err := daemonCall(ctx, c.base, c.token, http.MethodPost, "/v1/adapters", store.Adapter{Platform: c.platform, CallbackURL: cb, Secret: secret}, nil); err != nil {
		return fmt.Errorf("register the terminal adapter: %w", err)
	}
	// Unregister even when ctx is cancelled (Ctrl-C), so no callback to a
	// closed port is left behind.
	defer daemonCall(context.Background(), c.base, c.token, http.MethodDelete, "/v1/adapters/"+c.platform, nil, nil)

	if t, ok := c.newestTurn(ctx); ok {
		c.since = t.ID
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(c.in)
		sc.Buffer(make([]byte, 64<<10), service.MaxText)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	tick := time.NewTicker(c.poll)
	defer tick.Stop()
	pendingSince := time.Time{}
	for {
		select {
		case <-ctx.Done():
			c.setTyping(false)
			return c.outcome(context.Background())
		case p := <-c.replies:
			c.setTyping(false)
			c.answered = true
			fmt.Fprintf(c.out, "%s> %s\n", c.folder, p)
		case l, ok := <-lines:
			if !ok {
				// Input ended: wait for the answer to what was sent last.
				lines = nil
				if pendingSince.IsZero() {
					return c.outcome(ctx)
				}
				continue
			}
			if strings.TrimSpace(l) == "" {
				continue
			}
			if !c.tty && (len(c.queue) > 0 || !pendingSince.IsZero() && c.busy(ctx)) {
				c.queue = append(c.queue, l)
				continue
			}
			if c.post(ctx, l) {
				pendingSince, c.answered = time.Now(), false
			}
		case <-tick.C:
			busy := c.busy(ctx)
			c.setTyping(busy)
			if !busy && len(c.queue) > 0 && time.Since(pendingSince) > 2*c.poll {
				l := c.queue[0]
				c.queue = c.queue[1:]
				if c.post(ctx, l) {
					pendingSince, c.answered = time.Now(), false
				}
				continue
			}
			if !busy && lines == nil && time.Since(pendingSince) > 2*c.poll {
				// Input is over and the folder is idle: drain what arrived. The turn's
				// reply or failure notice is delivered after the turn ends, so a loaded
				// daemon gets ten polls to send the first one.
				wait := c.poll
				if !c.answered {
					wait = 10 * c.poll
				}
				for {
					select {
					case p := <-c.replies:
						fmt.Fprintf(c.out, "%s> %s\n", c.folder, p)
						c.answered, wait = true, c.poll
						continue
					case <-time.After(wait):
					}
					return c.outcome(ctx)
				}
			}
		}
	}
}

// post sends one typed line and reports whether a turn will answer it; a
// line that was not sent or reached no folder is told on status and counted.
func (c *chatSession) post(ctx context.Context, line string) bool {
	var ing service.Ingest
	in := c.msg
	in.ChatJID, in.Text, in.Sender, in.Platform, in.Adapter = c.chat, line, c.sender, chatPlatform, c.platform
	// Each line's key is the session's adapter and its number: a POST
	// whose answer was lost is sent again and stored once.
	c.lines++
	in.PlatformID = fmt.Sprintf("%s.%d", c.platform, c.lines)
	err := daemonCall(ctx, c.base, c.token, http.MethodPost, "/v1/messages", in, &ing)
	for try := 1; try < 3 && err != nil && !isAPIError(err) && ctx.Err() == nil; try++ {
		time.Sleep(time.Duration(try) * c.poll)
		err = daemonCall(ctx, c.base, c.token, http.MethodPost, "/v1/messages", in, &ing)
	}
	if err != nil {
		fmt.Fprintf(c.status, "not sent: %v\n", err)
		c.undeliv++
		return false
	}
	if !ing.Route.Routed() {
		fmt.Fprintf(c.status, "not delivered: %s (`arizuko folder ls` shows the folders)\n", ing.Route.Reason)
		c.undeliv++
		return false
	}
	c.mu.Lock()
	c.announced = false
	c.mu.Unlock()
	if ing.Route.Observe {
		return false
	}
	c.lastSent = max(c.lastSent, ing.Message.ID)
	return true
}

// isAPIError is an answer of the daemon (a refusal, not a lost request),
// which sending again would not change.
func isAPIError(err error) bool {
	var se *service.Error
	return errors.As(err, &se)
}

// busy reports whether what was sent is still unanswered: no turn has
// claimed the last message yet, or the folder's newest turn is queued or
// running.
func (c *chatSession) busy(ctx context.Context) bool {
	t, ok := c.newestTurn(ctx)
	if !ok {
		return c.lastSent > 0
	}
	return t.LastMessage < c.lastSent || t.Status == store.TurnQueued || t.Status == store.TurnRunning
}

func (c *chatSession) newestTurn(ctx context.Context) (store.Turn, bool) {
	ts, err := c.turns(ctx, 1)
	if err != nil || len(ts) == 0 {
		return store.Turn{}, false
	}
	return ts[0], true
}

func (c *chatSession) turns(ctx context.Context, limit int) ([]store.Turn, error) {
	var ts []store.Turn
	q := url.Values{"folder": {c.folder}, "limit": {fmt.Sprint(limit)}}
	err := daemonCall(ctx, c.base, c.token, http.MethodGet, "/v1/turns?"+q.Encode(), nil, &ts)
	return ts, err
}

// errChatFailed is a chat session in which something the user sent was not
// answered; the CLI exits non-zero.
var errChatFailed = errors.New("chat: not every message was answered")

// outcome is the session's result: an error when a message reached no
// folder, or a turn of this session failed or ended without a reply (the
// chat already got the notice).
func (c *chatSession) outcome(ctx context.Context) error {
	failed, unanswered := 0, 0
	if ts, err := c.turns(ctx, 100); err == nil {
		for _, t := range ts {
			switch {
			case t.ID <= c.since:
			case t.Status == store.TurnFailed:
				failed++
			case strings.HasPrefix(t.Outcome, turn.OutcomeNoReply):
				unanswered++
			}
		}
	}
	if c.undeliv == 0 && failed == 0 && unanswered == 0 {
		return nil
	}
	return fmt.Errorf("%d message(s) reached no folder, %d turn(s) failed, %d ended without a reply (`arizuko turns ls --folder %s`): %w",
		c.undeliv, failed, unanswered, c.folder, errChatFailed)
}

func (c *chatSession) setTyping(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if on == c.typing {
		return
	}
	c.typing = on
	switch {
	case on && c.tty:
		fmt.Fprintf(c.status, "\r%s is typing…", c.folder)
	case on && !c.announced:
		c.announced = true
		fmt.Fprintf(c.status, "%s is typing…\n", c.folder)
	case c.tty:
		fmt.Fprint(c.status, "\r\033[K")
	}
}

// newChatCmd is `arizuko chat`.
func newChatCmd(a *app) *cobra.Command {
	var topic, sender string
	chat := &cobra.Command{
		Use:   "chat FOLDER",
		Short: "Chat with a folder's agent in this terminal (needs `arizuko serve` running)",
		Long: `Chat with a folder's agent: each line you type is a message to the folder
(chat web:FOLDER), each turn runs in its own guest, and replies are printed
as they arrive. End with Ctrl-D. Typed lines are sent at once (lines sent
while a turn runs are answered together by the next turn); piped lines are
sent one at a time, each once the turn of the one before has ended, so each
gets a turn and an answer of its own.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := args[0]
			if err := folder.Validate(f); err != nil {
				return err
			}
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			base, token, err := cfg.daemonEndpoint()
			if errors.Is(err, errNoDaemon) {
				return fmt.Errorf("%w: start it with `arizuko serve --data %s`, then chat", err, cfg.DataDir)
			}
			if err != nil {
				return err
			}
			jid := router.DirectPrefix + f
			if topic != "" {
				jid += "#" + topic
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			tty := term.IsTerminal(int(os.Stdin.Fd())) && term.IsTerminal(int(os.Stderr.Fd()))
			if tty {
				fmt.Fprintf(os.Stderr, "chatting with %s; Ctrl-D ends\n", f)
			}
			s := &chatSession{base: base, token: token, folder: f, chat: jid, sender: firstNonEmpty(sender, os.Getenv("USER"), "user"),
				in: os.Stdin, out: os.Stdout, status: os.Stderr, tty: tty, poll: 500 * time.Millisecond}
			return s.run(ctx)
		},
	}
	chat.Flags().StringVar(&topic, "topic", "", "topic within the folder")
	chat.Flags().StringVar(&sender, "sender", "", "your name in the chat (default $USER)")
	return chat
}

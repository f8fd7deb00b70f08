// Package gated is the per-folder MCP server a turn's agent talks to. Each
// turn binds <data>/ipc/<folder>/gated.sock before its guest starts; the
// jail bridges the guest's /run/ipc/gated.sock to that path and no other, so
// the caller identity is the turn's folder, fixed by the host. Every tool
// call is authorized by the acl gate as mcp:<tool> on the folder it acts on,
// and tools/list shows only the tools the folder holds a grant for.
//
// Chats belong to tenants. A folder may write into a chat (send, or name it
// for a delegate_group or escalate_group reply) only when it is the chat its
// turn answers, the route table (engagements ignored) sends the chat to the
// folder or below it, or an allow row of mcp:send held by the folder names
// the chat in its params (ChatParams). Every other write is refused with a
// readable error and audited. Only a reply to the chat of a message routed to
// the folder sets the chat's engagement, and the router never lets an
// engagement carry a chat into another tenant (top-level folder) than its
// route names. register_group and add_route refuse a chat some route could
// send to another tenant, and a folder without add_route on the whole tree
// adds only a route naming one chat (chat_jid=<jid>) at seq 100 or more.
package gated

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crackbox/crackbox/internal/relay"
	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// GuestSocket is where the socket appears inside the guest.
const GuestSocket = "/run/ipc/gated.sock"

// MaxSessions bounds concurrent MCP sessions on one turn's socket, so a
// guest cannot exhaust the host by opening connections.
const MaxSessions = 16

// maxFrame bounds one JSON-RPC message from the guest. The biggest a tool takes is a
// MaxText message, a few hundred KiB once escaped; the MCP library's default of 16 MiB
// would let each of a turn's sessions make the host buffer that much.
const maxFrame = 1 << 20

// DefaultMaxDepth bounds a chain of delegations and escalations.
const DefaultMaxDepth = 3

// ErrSocketPath is a socket path too long for a unix socket.
var ErrSocketPath = errors.New("gated: socket path too long")

// Options configure the server.
type Options struct {
	Store *store.Store
	Gate  *acl.Gate
	// Control performs folder, route and network writes after the tool's own
	// mcp:<tool> check passed; it is called as service.AdminPrincipal so its
	// caches stay coherent with the daemon's.
	Control  service.Service
	DataDir  string
	MaxDepth int // 0 = DefaultMaxDepth
	// OnMessage is called after a tool wrote an inbound message for a folder
	// (delegate, escalate): the turn queue wakes that folder.
	OnMessage func(folder, topic string)
	// OnOutbound is called after reply or send stored a pending message.
	OnOutbound func()
	Log        *slog.Logger // nil discards
}

// Server serves the gated tools.
type Server struct {
	o Options
}

// New returns a Server.
func New(o Options) *Server {
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Server{o: o}
}

// Turn is what the host fixes for one turn's socket: who calls, and where a
// reply goes.
type Turn struct {
	Folder  string
	Topic   string
	TurnID  int64
	Depth   int
	ChatJID string // the chat reply answers
	ReplyTo string
	// Engage is set when ChatJID's message reached the folder through a route,
	// a direct address or an engagement: only then does answering it engage
	// the chat.
	Engage bool
	// ReplyKey, when set, names each outbound message the turn writes, so a
	// turn run again after its runner died writes the same keys and the store
	// keeps one copy (store.Outbound.Key).
	ReplyKey func() string
}

func (t Turn) principal() string { return "folder:" + t.Folder }

// SocketPath is the host path of a folder's socket.
func SocketPath(dataDir, f string) string {
	return filepath.Join(dataDir, "ipc", filepath.FromSlash(f), "gated.sock")
}

// Listener is one turn's bound socket.
type Listener struct {
	ln   net.Listener
	path string
	wg   sync.WaitGroup
	stop context.CancelFunc
}

// Listen binds the folder's socket for t and serves it until Close. A stale
// socket of a dead turn is replaced; the folder's single queue worker makes
// sure no live turn holds it.
func (s *Server) Listen(ctx context.Context, t Turn) (*Listener, error) {
	if err := folder.Validate(t.Folder); err != nil {
		return nil, err
	}
	path := SocketPath(s.o.DataDir, t.Folder)
	if len(path) >= 108 {
		return nil, fmt.Errorf("%s is %d bytes, unix sockets allow 107; use a shorter data dir: %w", path, len(path), ErrSocketPath)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("gated: %w", err)
	}
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("gated: listen %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("gated: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &Listener{ln: ln, path: path, stop: cancel}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		slots := make(chan struct{}, MaxSessions)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case slots <- struct{}{}:
			default:
				s.o.Log.Warn("gated session refused: too many open", "folder", t.Folder, "max", MaxSessions)
				c.Close()
				continue
			}
			l.wg.Add(1)
			go func() {
				defer func() { <-slots }()
				defer l.wg.Done()
				go func() { <-ctx.Done(); c.Close() }()
				if err := s.ServeConn(ctx, t, c); err != nil && ctx.Err() == nil {
					s.o.Log.Debug("gated session ended", "folder", t.Folder, "err", err)
				}
			}()
		}
	}()
	return l, nil
}

// Path is the bound socket.
func (l *Listener) Path() string { return l.path }

// Close stops accepting, ends open sessions and removes the socket.
func (l *Listener) Close() error {
	err := l.ln.Close()
	l.stop()
	l.wg.Wait()
	os.Remove(l.path)
	return err
}

// Bridge returns the jail's MCPConn hook: each guest connection is spliced to
// this listener's socket and nowhere else.
func (l *Listener) Bridge() func(net.Conn) {
	return func(g net.Conn) {
		defer g.Close()
		h, err := net.Dial("unix", l.path)
		if err != nil {
			return
		}
		defer h.Close()
		// Half-close passes through so a client that ends its input still reads the
		// answers already asked for.
		relay.Copy(context.Background(), g, h, relay.HalfClose)
	}
}

// ServeConn runs one MCP session for t on c until the client leaves.
func (s *Server) ServeConn(ctx context.Context, t Turn, c net.Conn) error {
	srv := mcp.NewServer(&mcp.Implementation{Name: "arizuko-gated", Version: "1"}, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	h := &handler{s: s, t: t}
	h.register(srv)
	srv.AddReceivingMiddleware(h.filterList)
	ss, err := srv.Connect(ctx, &mcp.IOTransport{Reader: c, Writer: c, MaxLineLength: maxFrame}, nil)
	if err != nil {
		c.Close()
		return err
	}
	return ss.Wait()
}

// filterList hides the tools the folder holds no grant for.
func (h *handler) filterList(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "tools/list" || err != nil {
			return res, err
		}
		lr, ok := res.(*mcp.ListToolsResult)
		if !ok {
			return res, nil
		}
		held, err := h.s.held(ctx, h.t.principal())
		if err != nil {
			return nil, err
		}
		out := *lr
		out.Tools = nil
		for _, tl := range lr.Tools {
			if held("mcp:" + tl.Name) {
				out.Tools = append(out.Tools, tl)
			}
		}
		return &out, nil
	}
}

// held returns a predicate: does principal hold an allow row for action on
// some scope, without a deny of it everywhere?
func (s *Server) held(ctx context.Context, principal string) (func(action string) bool, error) {
	p, err := s.o.Gate.Policy(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := s.o.Store.ListGrants(ctx, "")
	if err != nil {
		return nil, err
	}
	in := map[string]bool{}
	for _, c := range p.Closure(principal) {
		in[c] = true
	}
	return func(action string) bool {
		allowed := false
		for _, g := range rows {
			if !in[g.Principal] || !acl.ActionMatch(g.Action, action) {
				continue
			}
			if g.Effect == acl.Deny && g.Scope == "**" {
				return false
			}
			if g.Effect == acl.Allow {
				allowed = true
			}
		}
		return allowed
	}, nil
}

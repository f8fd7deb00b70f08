package gated

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
)

type sourceIn struct {
	Source string `json:"source"`
}

type registerIn struct {
	Folder  string `json:"folder"`
	ChatJID string `json:"chat_jid"`
}

type forkIn struct {
	Parent string `json:"parent"`
	Child  string `json:"child"`
}

// RegisterSeq is the route seq register_group gives a new child's route:
// the lowest a tenant's route may have, so the operator's routes keep precedence.
const RegisterSeq = service.TenantRouteSeq

// observeLimiter is the control plane's limit on a tenant's observe edges.
type observeLimiter interface {
	LimitObserve(ctx context.Context, observer string) error
}

func (h *handler) registerGroups(srv *mcp.Server) {
	add(srv, "observe_group", "Include another folder's recent messages in this folder's prompts.", schema("source:string"),
		func(ctx context.Context, in sourceIn) (string, error) {
			if err := folder.Validate(in.Source); err != nil {
				return "", err
			}
			if err := h.check(ctx, "observe_group", in.Source); err != nil {
				return "", err
			}
			if lim, ok := h.s.o.Control.(observeLimiter); ok {
				if err := lim.LimitObserve(ctx, h.t.Folder); err != nil {
					return "", err
				}
			}
			if err := h.s.o.Store.AddObserver(ctx, h.t.Folder, in.Source); err != nil {
				return "", err
			}
			return "observing " + in.Source, nil
		})
	add(srv, "unobserve_group", "Stop observing a folder.", schema("source:string"),
		func(ctx context.Context, in sourceIn) (string, error) {
			if err := folder.Validate(in.Source); err != nil {
				return "", err
			}
			if err := h.check(ctx, "unobserve_group", in.Source); err != nil {
				return "", err
			}
			if err := h.s.o.Store.RemoveObserver(ctx, h.t.Folder, in.Source); err != nil {
				return "", fmt.Errorf("not observing %s: %w", in.Source, err)
			}
			return "stopped observing " + in.Source, nil
		})
	add(srv, "register_group", "Create a child folder and route a chat to it.", schema("folder:string", "chat_jid:string"),
		func(ctx context.Context, in registerIn) (string, error) {
			if err := folder.Validate(in.Folder); err != nil {
				return "", err
			}
			if err := validChat(in.ChatJID); err != nil {
				return "", err
			}
			if strings.ContainsAny(in.ChatJID, "*?[]") {
				return "", fmt.Errorf("chat_jid %q: glob characters are not allowed here: %w", in.ChatJID, ErrInvalid)
			}
			if err := h.check(ctx, "register_group", in.Folder); err != nil {
				return "", err
			}
			if err := h.ownTenant(ctx, "register_group", in.ChatJID); err != nil {
				return "", err
			}
			self, err := h.s.o.Store.GetFolder(ctx, h.t.Folder)
			if err != nil {
				return "", err
			}
			if _, err := h.s.o.Control.AddFolder(h.admin(ctx), store.Folder{Path: in.Folder, AgentCommand: self.AgentCommand}); err != nil {
				return "", err
			}
			r, err := h.s.o.Control.AddRoute(h.admin(ctx), router.Route{Seq: RegisterSeq, Match: "chat_jid=" + in.ChatJID, Target: in.Folder})
			if err != nil {
				return "", fmt.Errorf("folder %s created, route failed: %w", in.Folder, err)
			}
			return fmt.Sprintf("created %s with route %d", in.Folder, r.ID), nil
		})
	add(srv, "fork_topic", "Start a topic with a fresh session and a copy of the parent topic's session state.",
		schema("parent:string", "child:string"),
		func(ctx context.Context, in forkIn) (string, error) {
			if err := router.ValidateTopic(in.Child); err != nil {
				return "", fmt.Errorf("child %w", err)
			}
			if err := h.check(ctx, "fork_topic", h.t.Folder); err != nil {
				return "", err
			}
			parent, err := h.s.o.Store.GetSession(ctx, h.t.Folder, in.Parent)
			if err != nil {
				return "", err
			}
			// An existing child is refused before any copying, so repeating a fork
			// costs the host no I/O; the state is copied before the row is written,
			// so a fork refused for its size leaves no topic.
			if _, err := h.s.o.Store.GetSession(ctx, h.t.Folder, in.Child); err == nil {
				return "", fmt.Errorf("topic %s: %w", in.Child, store.ErrExists)
			} else if !errors.Is(err, store.ErrNotFound) {
				return "", err
			}
			id := NewSessionID()
			if err := copySessionState(h.s.o.DataDir, h.t.Folder, parent.SessionID, id); err != nil {
				return "", err
			}
			if err := h.s.o.Store.InsertSession(ctx, store.Session{Folder: h.t.Folder, Topic: in.Child, SessionID: id, ParentTopic: in.Parent}); err != nil {
				removeSessionState(h.s.o.DataDir, h.t.Folder, id)
				return "", err
			}
			return fmt.Sprintf("topic %s has session %s", in.Child, id), nil
		})
}

// NewSessionID returns a random session id.
func NewSessionID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// SessionDir is where an agent keeps a session's state inside its folder's
// home (the guest sees it under $HOME/.arizuko/sessions/<id>).
func SessionDir(dataDir, f, id string) (string, error) {
	p, err := folder.Home(dataDir, f)
	if err != nil {
		return "", err
	}
	return filepath.Join(p, ".arizuko", "sessions", id), nil
}

package gated

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

type replyIn struct {
	Text    string `json:"text"`
	ReplyTo string `json:"reply_to"`
}

type sendIn struct {
	ChatJID string `json:"chat_jid"`
	Text    string `json:"text"`
}

type editIn struct {
	ID   int64  `json:"id"`
	Text string `json:"text"`
}

type delegateIn struct {
	Folder  string `json:"folder"`
	Prompt  string `json:"prompt"`
	ChatJID string `json:"chat_jid"`
}

type escalateIn struct {
	Prompt  string `json:"prompt"`
	ChatJID string `json:"chat_jid"`
}

type submitIn struct {
	Status string `json:"status"`
	Result string `json:"result"`
}

func (h *handler) registerMessaging(srv *mcp.Server) {
	add(srv, "reply", "Reply to the chat this turn answers.", schema("text:string", "reply_to?:string"),
		func(ctx context.Context, in replyIn) (string, error) {
			if err := h.check(ctx, "reply", h.t.Folder); err != nil {
				return "", err
			}
			if h.t.ChatJID == "" {
				return "", fmt.Errorf("reply: this turn answers no chat; use send with a chat_jid: %w", ErrInvalid)
			}
			if in.ReplyTo == "" {
				in.ReplyTo = h.t.ReplyTo
			}
			return h.out(ctx, h.t.ChatJID, in.Text, in.ReplyTo)
		})
	add(srv, "send", "Send a message to a chat.", schema("chat_jid:string", "text:string"),
		func(ctx context.Context, in sendIn) (string, error) {
			if err := h.check(ctx, "send", h.t.Folder); err != nil {
				return "", err
			}
			if err := validChat(in.ChatJID); err != nil {
				return "", err
			}
			if err := h.mayChat(ctx, "send", in.ChatJID); err != nil {
				return "", err
			}
			return h.out(ctx, in.ChatJID, in.Text, "")
		})
	add(srv, "edit_message", "Replace the text of a message this folder sent (the id reply or send answered).",
		schema("id:integer", "text:string"),
		func(ctx context.Context, in editIn) (string, error) {
			if err := h.check(ctx, "edit_message", h.t.Folder); err != nil {
				return "", err
			}
			return h.edit(ctx, in)
		})
	add(srv, "delegate_group", "Hand a task to a child folder; it runs in its own turn and replies to chat_jid.",
		schema("folder:string", "prompt:string", "chat_jid:string"),
		func(ctx context.Context, in delegateIn) (string, error) {
			if err := folder.Validate(in.Folder); err != nil {
				return "", fmt.Errorf("delegate_group: %w", err)
			}
			if err := h.check(ctx, "delegate_group", in.Folder); err != nil {
				return "", err
			}
			return h.internal(ctx, "delegate", in.Folder, in.Prompt, in.ChatJID)
		})
	add(srv, "escalate_group", "Ask the parent folder; it answers back through this folder or to chat_jid.",
		schema("prompt:string", "chat_jid:string"),
		func(ctx context.Context, in escalateIn) (string, error) {
			parent := folder.Parent(h.t.Folder)
			if parent == "" {
				return "", fmt.Errorf("escalate_group: %s is a top-level folder and has no parent: %w", h.t.Folder, ErrInvalid)
			}
			if err := h.check(ctx, "escalate_group", parent); err != nil {
				return "", err
			}
			return h.internal(ctx, "escalate", parent, fmt.Sprintf("[escalated from %s] %s", h.t.Folder, in.Prompt), in.ChatJID)
		})
	add(srv, "submit_turn", "Record this turn's status and result.", schema("status:string", "result?:string"),
		func(ctx context.Context, in submitIn) (string, error) {
			if err := h.check(ctx, "submit_turn", h.t.Folder); err != nil {
				return "", err
			}
			if err := validText("status", in.Status); err != nil {
				return "", err
			}
			if h.t.TurnID == 0 {
				return "", fmt.Errorf("submit_turn: no turn is bound to this socket: %w", ErrInvalid)
			}
			out := in.Status
			if in.Result != "" {
				out += ": " + in.Result
			}
			if len(out) > 4096 {
				out = out[:4096]
			}
			if err := h.s.o.Store.SubmitTurn(ctx, h.t.TurnID, out); err != nil {
				return "", err
			}
			return "recorded", nil
		})
}

// out stores a pending outbound message and wakes delivery.
func (h *handler) out(ctx context.Context, chat, text, replyTo string) (string, error) {
	if err := validText("text", text); err != nil {
		return "", err
	}
	key := ""
	if h.t.ReplyKey != nil {
		key = h.t.ReplyKey()
	}
	o, err := h.s.o.Store.PutOutbound(ctx, store.Outbound{ChatJID: chat, Folder: h.t.Folder, Topic: h.t.Topic, Text: text,
		ReplyTo: replyTo, TurnID: h.t.TurnID, Key: key})
	if err != nil {
		return "", err
	}
	if chat == h.t.ChatJID && h.t.Engage {
		if err := h.s.o.Store.SetEngagement(ctx, chat, h.t.Folder, h.t.Topic, time.Now().UnixMilli()); err != nil {
			h.s.o.Log.Warn("engagement", "chat", chat, "err", err)
		}
	}
	if h.s.o.OnOutbound != nil {
		h.s.o.OnOutbound()
	}
	return fmt.Sprintf("queued message %d for %s", o.ID, chat), nil
}

// edit stores an edit of a message the folder sent and wakes delivery,
// which calls the chat's adapter at /edit.
func (h *handler) edit(ctx context.Context, in editIn) (string, error) {
	if err := validText("text", in.Text); err != nil {
		return "", err
	}
	orig, err := h.s.o.Store.GetOutbound(ctx, in.ID)
	if err == nil && orig.EditOf != 0 {
		orig, err = h.s.o.Store.GetOutbound(ctx, orig.EditOf) // an edit replaces the message, not the last edit
	}
	if err != nil || orig.Folder != h.t.Folder {
		return "", fmt.Errorf("edit_message: message %d is not one %s sent: %w", in.ID, h.t.Folder, ErrInvalid)
	}
	key := ""
	if h.t.ReplyKey != nil {
		key = h.t.ReplyKey()
	}
	o, err := h.s.o.Store.PutOutbound(ctx, store.Outbound{ChatJID: orig.ChatJID, Platform: orig.Platform, Folder: h.t.Folder, Topic: h.t.Topic,
		Text: in.Text, TurnID: h.t.TurnID, Key: key, EditOf: orig.ID})
	if err != nil {
		return "", err
	}
	if h.s.o.OnOutbound != nil {
		h.s.o.OnOutbound()
	}
	return fmt.Sprintf("queued edit %d of message %d", o.ID, orig.ID), nil
}

// internal writes a message for another folder's next turn, one level deeper.
func (h *handler) internal(ctx context.Context, how, to, text, chat string) (string, error) {
	if err := validText("prompt", text); err != nil {
		return "", err
	}
	if err := validChat(chat); err != nil {
		return "", err
	}
	// The other folder's reply goes to chat on this folder's word, so the
	// chat must be one this folder may write to itself.
	if err := h.mayChat(ctx, how+"_group", chat); err != nil {
		return "", err
	}
	depth := h.t.Depth + 1
	if depth > h.s.o.MaxDepth {
		return "", fmt.Errorf("%s: chain is %d deep, the limit is %d: %w", how, depth, h.s.o.MaxDepth, ErrInvalid)
	}
	if _, err := h.s.o.Store.GetFolder(ctx, to); err != nil {
		return "", fmt.Errorf("%s: %w", how, err)
	}
	id, err := h.s.o.Store.PutInternal(ctx, store.Internal{ChatJID: chat, From: h.t.Folder, To: to, Text: text, How: how, Depth: depth})
	if err != nil {
		return "", err
	}
	if h.s.o.OnMessage != nil {
		h.s.o.OnMessage(to, "")
	}
	return fmt.Sprintf("message %d queued for %s", id, to), nil
}

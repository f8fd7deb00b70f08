package gated

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
)

// ErrInvalid is a tool call with bad arguments.
var ErrInvalid = errors.New("invalid arguments")

// MaxText bounds a message a tool writes.
const MaxText = 64 << 10

// handler serves one session's tool calls with the turn's fixed identity.
type handler struct {
	s *Server
	t Turn
}

// Tools lists every tool name the server knows, in registration order.
var Tools = []string{
	"reply", "send", "edit_message", "delegate_group", "escalate_group", "observe_group", "unobserve_group",
	"register_group", "fork_topic", "network_allow", "network_deny", "network_list",
	"list_routes", "add_route", "delete_route", "submit_turn", "schedule_task",
}

// schema builds an object schema from "name:type" (required) and
// "name?:type" (optional) fields.
func schema(fields ...string) map[string]any {
	props := map[string]any{}
	req := []string{}
	for _, f := range fields {
		name, typ, _ := strings.Cut(f, ":")
		if n, ok := strings.CutSuffix(name, "?"); ok {
			name = n
		} else {
			req = append(req, name)
		}
		props[name] = map[string]any{"type": typ}
	}
	return map[string]any{"type": "object", "properties": props, "required": req}
}

// add registers one tool whose arguments decode into In.
func add[In any](srv *mcp.Server, name, desc string, sch map[string]any, fn func(ctx context.Context, in In) (string, error)) {
	srv.AddTool(&mcp.Tool{Name: name, Description: desc, InputSchema: sch}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in In
		if raw := req.Params.Arguments; len(raw) > 0 && string(raw) != "null" {
			if err := json.Unmarshal(raw, &in); err != nil {
				return toolErr(fmt.Errorf("%s: arguments: %v: %w", name, err, ErrInvalid)), nil
			}
		}
		out, err := fn(ctx, in)
		if err != nil {
			return toolErr(err), nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out}}}, nil
	})
}

// toolErr is an error result the agent reads (not a protocol error).
func toolErr(err error) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
}

// check authorizes mcp:<tool> on scope for the turn's folder; the gate
// audits every denial.
func (h *handler) check(ctx context.Context, tool, scope string) error {
	err := h.s.o.Gate.Check(ctx, h.t.principal(), "mcp:"+tool, scope)
	if err != nil {
		h.s.o.Log.Info("gated deny", "folder", h.t.Folder, "tool", tool, "scope", scope)
	}
	return err
}

// admin is the context a tool calls the control plane with once its own
// grant check passed: the admin principal, acting for the turn's folder.
func (h *handler) admin(ctx context.Context) context.Context {
	return service.OnBehalf(service.WithPrincipal(ctx, service.AdminPrincipal), h.t.principal())
}

func jsonText(v any) (string, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	return string(b), err
}

func validText(field, s string) error {
	if s == "" {
		return fmt.Errorf("%s is required: %w", field, ErrInvalid)
	}
	if len(s) > MaxText {
		return fmt.Errorf("%s is %d bytes, the limit is %d: %w", field, len(s), MaxText, ErrInvalid)
	}
	return nil
}

// validChat is the one check of a chat_jid argument (service.ValidChatJID):
// no space, control character or '=' can make the chat a route is written
// for differ from the chat its ownership was checked on.
func validChat(jid string) error { return service.ValidChatJID(jid) }

func (h *handler) register(srv *mcp.Server) {
	h.registerMessaging(srv)
	h.registerGroups(srv)
	h.registerNetwork(srv)
	h.registerRoutes(srv)
	h.registerSchedule(srv)
}

// optFolder resolves an optional folder argument to the turn's own folder.
func (h *handler) optFolder(f string) (string, error) {
	if f == "" {
		return h.t.Folder, nil
	}
	return f, folder.Validate(f)
}

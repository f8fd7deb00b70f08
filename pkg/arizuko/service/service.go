// Package service is arizuko's control plane as one interface. The
// store-backed Local implements it for the daemon and for the CLI working on
// a data dir directly; pkg/arizuko/api's Client implements it over HTTP, so every CLI
// command is written once.
package service

import (
	"context"
	"errors"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/adapter"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
)

// Service is every control-plane operation. The caller's principal travels in
// the context (WithPrincipal); every operation is authorized by the acl gate.
type Service interface {
	PostMessage(ctx context.Context, in MessageIn) (Ingest, error)
	ListMessages(ctx context.Context, chat string, after int64, limit int) ([]store.Message, error)
	Resolve(ctx context.Context, in MessageIn) (router.Result, error)

	AddFolder(ctx context.Context, f store.Folder) (store.Folder, error)
	ListFolders(ctx context.Context) ([]store.Folder, error)
	RemoveFolder(ctx context.Context, path string) error
	SetFolder(ctx context.Context, path string, in FolderSet) (store.Folder, error)

	AddRoute(ctx context.Context, r router.Route) (router.Route, error)
	ListRoutes(ctx context.Context) ([]router.Route, error)
	RemoveRoute(ctx context.Context, id int64) error

	AddGrant(ctx context.Context, g acl.Grant) (acl.Grant, error)
	ListGrants(ctx context.Context, principal string) ([]acl.Grant, error)
	RemoveGrant(ctx context.Context, id int64) error
	AddMember(ctx context.Context, e acl.Edge) error
	RemoveMember(ctx context.Context, e acl.Edge) error
	ListMembers(ctx context.Context) ([]acl.Edge, error)
	ListAudit(ctx context.Context, limit int) ([]store.AuditEntry, error)

	ListObservations(ctx context.Context, observer string) ([]store.Observation, error)
	RemoveObservation(ctx context.Context, observer, source string) error

	SetNetworkRule(ctx context.Context, r store.NetworkRule) (store.NetworkRule, error)
	RemoveNetworkRule(ctx context.Context, folder, host string) error
	ListNetwork(ctx context.Context, folder string) (NetworkView, error)

	SetSecret(ctx context.Context, s SecretIn) error
	RemoveSecret(ctx context.Context, scope, name string) error
	ListSecrets(ctx context.Context, scope string) ([]store.SecretName, error)
	RotateSecrets(ctx context.Context) (int, error)

	AddToken(ctx context.Context, in TokenIn) (NewToken, error)
	ListTokens(ctx context.Context) ([]store.Token, error)
	RemoveToken(ctx context.Context, name string) error
	ListOutbound(ctx context.Context, platform string, limit int) ([]store.Outbound, error)

	ListTurns(ctx context.Context, folder string, limit int) ([]store.Turn, error)
	GetTurn(ctx context.Context, id int64) (TurnDetail, error)
	GetBudget(ctx context.Context, folder string) (FolderBudget, error)
	SetBudget(ctx context.Context, folder string, in BudgetIn) (FolderBudget, error)
	SetAdapter(ctx context.Context, a store.Adapter) (store.Adapter, error)
	RemoveAdapter(ctx context.Context, platform string) error

	AddHook(ctx context.Context, in HookIn) (NewHook, error)
	ListHooks(ctx context.Context) ([]store.Hook, error)
	RemoveHook(ctx context.Context, id int64) error
	AddSchedule(ctx context.Context, in ScheduleIn) (store.Schedule, error)
	ListSchedules(ctx context.Context) ([]store.Schedule, error)
	RemoveSchedule(ctx context.Context, id int64) error
}

// MessageIn is an inbound message as an adapter delivers it.
type MessageIn struct {
	ChatJID    string `json:"chat_jid"`
	Sender     string `json:"sender,omitempty"`
	Text       string `json:"text"`
	Platform   string `json:"platform,omitempty"`
	Room       string `json:"room,omitempty"`
	PlatformID string `json:"platform_id,omitempty"`
	ReplyTo    string `json:"reply_to,omitempty"`
	Verb       string `json:"verb,omitempty"`
	// Adapter names the registered adapter that carries replies to this
	// chat when it is not the platform's own (one terminal session of
	// platform "term"); "" is Platform.
	Adapter string `json:"adapter,omitempty"`
	// Attachments travel by reference; the agent sees one line per file
	// after the text.
	Attachments []adapter.Attachment `json:"attachments,omitempty"`
}

// Ingest is the outcome of PostMessage: the stored row and where it went.
type Ingest struct {
	Message   store.Message `json:"message"`
	Route     router.Result `json:"route"`
	Duplicate bool          `json:"duplicate,omitempty"`
}

// NetworkView is a folder's own and inherited rules and the effective allowlist.
type NetworkView struct {
	Folder    string              `json:"folder"`
	Rules     []store.NetworkRule `json:"rules"`
	Effective []string            `json:"effective"`
}

// SecretIn is a write-only secret value. Scope is "folder:<path>" or "user:<id>".
type SecretIn struct {
	Scope string `json:"scope"`
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Sentinel errors; every error from a Service wraps one of them (or is
// classified into one by Code).
var (
	ErrInvalid     = errors.New("invalid input")
	ErrNotFound    = errors.New("not found")
	ErrConflict    = errors.New("conflict")
	ErrDenied      = errors.New("permission denied")
	ErrUnavailable = errors.New("unavailable")
)

type principalKey struct{}

// WithPrincipal attaches the caller identity (user:, role: or folder:) to ctx.
func WithPrincipal(ctx context.Context, p string) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

type actorKey struct{}

// OnBehalf records that the context's principal acts for p: an MCP tool
// runs with the admin principal after its own grant check, for the folder
// principal p. Audit rows and the owner of what it adds name p.
func OnBehalf(ctx context.Context, p string) context.Context {
	return context.WithValue(ctx, actorKey{}, p)
}

// Actor is who a change is for: the OnBehalf principal, else the caller.
func Actor(ctx context.Context) string {
	if p, _ := ctx.Value(actorKey{}).(string); p != "" {
		return p
	}
	return Principal(ctx)
}

// Principal returns the caller identity, "" when none was attached.
func Principal(ctx context.Context) string {
	p, _ := ctx.Value(principalKey{}).(string)
	return p
}

package service

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/crackbox/crackbox/internal/httpjson"
	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// Token kinds. An admin token acts as an operator; a read token may only
// read; an adapter token may post inbound messages for its platform and read
// that platform's outbound queue.
const (
	KindAdmin   = "admin"
	KindRead    = "read"
	KindAdapter = "adapter"
	// KindRunner is a fleet runner's: it may only pull, run and report turns.
	KindRunner = "runner"
	// KindTenant is an operator of one tenant: every action on its top-level
	// folder and below, and nothing of the whole tree (tokens, adapters,
	// other tenants' rows).
	KindTenant = "tenant"
)

// ErrBadToken is a token that is missing, malformed, unknown or revoked.
var ErrBadToken = errors.New("unknown or revoked token")

// TokenPrefix starts every token arizuko makes, so a leaked one is easy to grep for.
const TokenPrefix = "azk_"

// readActions are what a read token's principal is granted on the whole tree.
var readActions = []string{"folder:read", "route:read", "grant:read", "audit:read", "network:read",
	"message:read", "secret:read", "turn:read", "token:read", "outbound:read", "observe:read", "hook:read", "schedule:read"}

// adapterActions are an adapter token's rows; the platform is pinned by the API.
var adapterActions = []string{"message:post", "outbound:read"}

// Caller is who an API request authenticated as.
type Caller struct {
	Name      string // token name; "admin" for the data dir's token
	Kind      string
	Platform  string // adapter tokens only
	Tenant    string // tenant tokens only
	Principal string // the acl principal the request runs as
}

type callerKey struct{}

// WithCaller attaches an authenticated caller and its acl principal to ctx.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return WithPrincipal(context.WithValue(ctx, callerKey{}, c), c.Principal)
}

// CallerOf returns the caller WithCaller attached; ok is false when none was.
func CallerOf(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// TokenIn asks for a new token.
type TokenIn struct {
	Name     string `json:"name"`
	Kind     string `json:"kind"`
	Platform string `json:"platform,omitempty"`
	Tenant   string `json:"tenant,omitempty"`
}

// NewToken is a created token: Secret is shown this once and stored only as a hash.
type NewToken struct {
	store.Token
	Secret string `json:"token"`
}

// TokenPrincipal is the acl principal a named token runs as.
func TokenPrincipal(name string) string { return "user:token:" + name }

func (in TokenIn) validate() error {
	if in.Name == "" || len(in.Name) > 64 || strings.Trim(in.Name, "abcdefghijklmnopqrstuvwxyz0123456789._-") != "" {
		return invalid("token name %q: want 1..64 of a-z 0-9 . _ -", in.Name)
	}
	if in.Platform != "" && in.Kind != KindAdapter {
		return invalid("platform %q: only adapter tokens have a platform", in.Platform)
	}
	if in.Tenant != "" && in.Kind != KindTenant {
		return invalid("tenant %q: only tenant tokens have a tenant (--tenant alone makes one)", in.Tenant)
	}
	switch in.Kind {
	case KindAdmin, KindRead, KindRunner:
	case KindAdapter:
		if err := ValidPlatform(in.Platform); err != nil {
			return err
		}
	case KindTenant:
		if err := folder.Validate(in.Tenant); err != nil || strings.Contains(in.Tenant, "/") {
			return invalid("tenant %q: want a top-level folder, e.g. acme", in.Tenant)
		}
	default:
		return invalid("token kind %q: want admin, read, adapter, runner or tenant", in.Kind)
	}
	return nil
}

// ValidPlatform checks an adapter platform name.
func ValidPlatform(p string) error {
	if p == "" || len(p) > 64 || strings.ContainsAny(p, ": /") {
		return invalid("platform %q: want 1..64 characters without ':', '/' or spaces", p)
	}
	for _, r := range p {
		if r <= ' ' || r > '~' {
			return invalid("platform %q has %q: a platform name is printable ASCII", p, r)
		}
	}
	return nil
}

// AddToken creates a token; its secret is returned once.
func (l *Local) AddToken(ctx context.Context, in TokenIn) (NewToken, error) {
	if err := in.validate(); err != nil {
		return NewToken{}, err
	}
	if err := l.check(ctx, "token:add", ""); err != nil {
		return NewToken{}, err
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return NewToken{}, err
	}
	secret := TokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	sum := httpjson.Sum(secret)
	p := TokenPrincipal(in.Name)
	by := l.principal(ctx)
	var grants []acl.Grant
	var edges []acl.Edge
	switch in.Kind {
	case KindAdmin:
		edges = []acl.Edge{{Member: p, Role: "role:operator"}}
	case KindRead:
		grants = rows(p, by, readActions)
	case KindAdapter:
		grants = rows(p, by, adapterActions)
	case KindTenant:
		if _, err := l.st.GetFolder(ctx, in.Tenant); err != nil {
			return NewToken{}, fmt.Errorf("tenant %s: %w (add the folder first)", in.Tenant, err)
		}
		// Everything on the tenant's tree, and the right to hand it on
		// there; whole-tree actions (scope "") are outside acme/**.
		// The turn budget is the operator's limit on the tenant, not the
		// tenant's to raise.
		grants = []acl.Grant{
			{Principal: p, Action: "*", Scope: in.Tenant + "/**", Effect: acl.Allow, GrantedBy: by, GrantOption: true},
			{Principal: p, Action: "folder:budget", Scope: in.Tenant + "/**", Effect: acl.Deny, GrantedBy: by},
		}
	}
	t, err := l.st.InsertToken(ctx, store.Token{Name: in.Name, Kind: in.Kind, Platform: in.Platform, Tenant: in.Tenant, CreatedBy: by}, sum[:], grants, edges)
	if err != nil {
		return NewToken{}, err
	}
	l.invalidate()
	return NewToken{Token: t, Secret: secret}, nil
}

func rows(principal, by string, actions []string) []acl.Grant {
	out := make([]acl.Grant, len(actions))
	for i, a := range actions {
		out[i] = acl.Grant{Principal: principal, Action: a, Scope: "**", Effect: acl.Allow, GrantedBy: by}
	}
	return out
}

// ListTokens lists token records; secrets are never kept, so never shown.
func (l *Local) ListTokens(ctx context.Context) ([]store.Token, error) {
	if err := l.check(ctx, "token:read", ""); err != nil {
		return nil, err
	}
	return l.st.ListTokens(ctx)
}

// RemoveToken revokes a token at once, with its principal's rows.
func (l *Local) RemoveToken(ctx context.Context, name string) error {
	if err := l.check(ctx, "token:rm", ""); err != nil {
		return err
	}
	if err := l.st.DeleteToken(ctx, name, TokenPrincipal(name)); err != nil {
		return err
	}
	l.invalidate()
	return nil
}

// Authenticate finds the token whose secret this is. Every stored sum is
// compared in constant time, so the answer's timing says nothing about which
// prefix matched.
func (l *Local) Authenticate(ctx context.Context, secret string) (Caller, error) {
	if secret == "" {
		return Caller{}, ErrBadToken
	}
	ts, err := l.st.TokenSums(ctx)
	if err != nil {
		return Caller{}, err
	}
	sums := make([][]byte, len(ts))
	for i := range ts {
		sums[i] = ts[i].Sum
	}
	i, ok := httpjson.Matches(secret, sums...)
	if !ok {
		return Caller{}, ErrBadToken
	}
	found := &ts[i]
	return Caller{Name: found.Name, Kind: found.Kind, Platform: found.Platform, Tenant: found.Tenant, Principal: TokenPrincipal(found.Name)}, nil
}

// ListOutbound lists a platform's pending outbound messages.
func (l *Local) ListOutbound(ctx context.Context, platform string, limit int) ([]store.Outbound, error) {
	if err := ValidPlatform(platform); err != nil {
		return nil, err
	}
	if err := l.check(ctx, "outbound:read", ""); err != nil {
		return nil, err
	}
	return l.st.PlatformOutbound(ctx, platform, limit)
}

// PinPlatform holds an adapter caller to its own platform: it may post only
// as that platform and only into chats named "<platform>:…", so it can neither
// write into another platform's chats nor pull their replies to itself.
func PinPlatform(ctx context.Context, platform, chatJID string) (string, error) {
	c, ok := CallerOf(ctx)
	if !ok || c.Kind != KindAdapter {
		return platform, nil
	}
	if platform == "" {
		platform = c.Platform
	}
	if platform != c.Platform {
		return "", fmt.Errorf("adapter token %q is for platform %q, not %q: %w", c.Name, c.Platform, platform, ErrDenied)
	}
	if chatJID != "" && !strings.HasPrefix(chatJID, c.Platform+":") {
		return "", fmt.Errorf("adapter token %q may only post to chats named %q…, not %q: %w", c.Name, c.Platform+":", chatJID, ErrDenied)
	}
	return platform, nil
}

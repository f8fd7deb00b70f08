package acl

import (
	"context"
	"fmt"
	"log/slog"
)

// Gate is the single door every caller (HTTP API, CLI, MCP tools) passes
// through: it loads the current policy, decides, and audits every denial.
type Gate struct {
	Policy func(ctx context.Context) (*Policy, error)
	// Audit records a denying decision; a failure to audit is logged and the
	// request stays denied.
	Audit func(ctx context.Context, d Decision) error
	// Log hears of every denial and of a failed audit; nil discards.
	Log *slog.Logger
}

// Check returns nil when principal may perform action on scope, else an error
// wrapping ErrDenied. The denial is audited before Check returns.
func (g *Gate) Check(ctx context.Context, principal, action, scope string) error {
	p, err := g.Policy(ctx)
	if err != nil {
		return fmt.Errorf("acl: load policy: %w", err)
	}
	return g.finish(ctx, p.Decide(principal, action, scope))
}

// CheckGrant decides whether granter may add row r (see Policy.CanGrant).
func (g *Gate) CheckGrant(ctx context.Context, granter string, r Grant) error {
	p, err := g.Policy(ctx)
	if err != nil {
		return fmt.Errorf("acl: load policy: %w", err)
	}
	return g.finish(ctx, p.CanGrant(granter, r))
}

// Refuse audits a denial its caller decided (a rule the grant rows alone
// cannot express) and returns it as an error wrapping ErrDenied.
func (g *Gate) Refuse(ctx context.Context, d Decision) error {
	d.Allow = false
	return g.finish(ctx, d)
}

func (g *Gate) finish(ctx context.Context, d Decision) error {
	if d.Allow {
		return nil
	}
	log := g.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log.InfoContext(ctx, "acl deny", "principal", d.Principal, "action", d.Action, "scope", d.Scope, "reason", d.Reason)
	if g.Audit != nil {
		if err := g.Audit(ctx, d); err != nil {
			log.ErrorContext(ctx, "acl audit failed", "err", err)
		}
	}
	return d.Err()
}

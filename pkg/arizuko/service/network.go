package service

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"

	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/proxy"
	"github.com/crackbox/crackbox/pkg/proxy/allow"
)

// normalizeHost validates one allowlist entry with the same parser crackbox's
// proxy uses and returns its canonical spelling.
func normalizeHost(h string) (string, error) {
	l, err := allow.Parse([]string{h})
	if err != nil {
		return "", fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	return l.Entries()[0], nil
}

// SetNetworkRule allows or denies a host for a folder and everything below
// it; needs network:allow or network:deny on the folder.
func (l *Local) SetNetworkRule(ctx context.Context, r store.NetworkRule) (store.NetworkRule, error) {
	if err := folder.Validate(r.Folder); err != nil {
		return r, err
	}
	if r.Effect != "allow" && r.Effect != "deny" {
		return r, invalid("effect %q: want allow or deny", r.Effect)
	}
	h, err := normalizeHost(r.Host)
	if err != nil {
		return r, err
	}
	r.Host = h
	if err := l.check(ctx, "network:"+r.Effect, r.Folder); err != nil {
		return r, err
	}
	if r.Effect == "allow" {
		if err := l.guardEntry(ctx, r); err != nil {
			return r, err
		}
	}
	return r, l.st.SetNetworkRule(ctx, r)
}

// guardEntry refuses, and audits, an address entry naming a loopback,
// private, CGNAT, link-local or other special range the operator's
// allow_cidrs do not cover: folder rules are what tenants write, so they
// never open the host's networks, and each turn's proxy would refuse the
// entry anyway (it also refuses what no static range tells: the host's own
// public address, the daemon's listeners). Refusing here says so at once.
func (l *Local) guardEntry(ctx context.Context, r store.NetworkRule) error {
	list, err := allow.Parse([]string{r.Host})
	if err != nil {
		return invalid("%w", err)
	}
	pfxs := list.Prefixes()
	if len(pfxs) == 0 {
		return nil
	}
	for _, p := range pfxs {
		if !proxy.SpecialPurpose(p) || coveredBy(l.opts.AllowCIDRs, p) {
			continue
		}
		return l.gate.Refuse(ctx, acl.Decision{Principal: l.actor(ctx), Action: "network:allow", Scope: r.Folder,
			Reason: fmt.Sprintf("%s is a loopback, private, link-local or other special-purpose range; only the operator's proxy.allow_cidrs in arizuko.toml open one to turns", r.Host)})
	}
	return nil
}

// coveredBy reports whether one of outer holds every address of p.
func coveredBy(outer []netip.Prefix, p netip.Prefix) bool {
	for _, o := range outer {
		if o.Bits() <= p.Bits() && o.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// RemoveNetworkRule drops a folder's own rule for host (allow or deny);
// needs network:rm on the folder.
func (l *Local) RemoveNetworkRule(ctx context.Context, f, host string) error {
	if err := folder.Validate(f); err != nil {
		return err
	}
	h, err := normalizeHost(host)
	if err != nil {
		return err
	}
	if err := l.check(ctx, "network:rm", f); err != nil {
		return err
	}
	return l.st.DeleteNetworkRule(ctx, f, h)
}

// ListNetwork shows a folder's own and inherited rules and the result;
// needs network:read on the folder.
func (l *Local) ListNetwork(ctx context.Context, f string) (NetworkView, error) {
	if err := folder.Validate(f); err != nil {
		return NetworkView{}, err
	}
	if err := l.check(ctx, "network:read", f); err != nil {
		return NetworkView{}, err
	}
	if _, err := l.st.GetFolder(ctx, f); err != nil {
		return NetworkView{}, err
	}
	rules, err := l.st.NetworkRules(ctx, folder.Ancestors(f)...)
	if err != nil {
		return NetworkView{}, err
	}
	eff, err := effective(rules)
	if err != nil {
		return NetworkView{}, err
	}
	// Lists answer [] when empty, never null.
	if rules == nil {
		rules = []store.NetworkRule{}
	}
	if eff == nil {
		eff = []string{}
	}
	return NetworkView{Folder: f, Rules: rules, Effective: eff}, nil
}

// EffectiveAllowlist is the union of the allow rules of the folder and its
// ancestors, minus every entry denied at any of those levels. It is for the
// turn runner in this process and does no authorization.
func (l *Local) EffectiveAllowlist(ctx context.Context, f string) ([]string, error) {
	if err := folder.Validate(f); err != nil {
		return nil, err
	}
	rules, err := l.st.NetworkRules(ctx, folder.Ancestors(f)...)
	if err != nil {
		return nil, err
	}
	return effective(rules)
}

func effective(rules []store.NetworkRule) ([]string, error) {
	var add, remove []string
	for _, r := range rules {
		if r.Effect == "allow" {
			add = append(add, r.Host)
		} else {
			remove = append(remove, r.Host)
		}
	}
	list, err := allow.Parse(add)
	if err != nil {
		return nil, fmt.Errorf("stored network rule: %w", err)
	}
	list, err = list.With(nil, remove)
	if err != nil {
		return nil, fmt.Errorf("stored network rule: %w", err)
	}
	return list.Entries(), nil
}

package store

import (
	"context"
	"fmt"
	"strings"
)

// NetworkRule is one folder's allow or deny entry for a host pattern.
type NetworkRule struct {
	Folder string `json:"folder"`
	Host   string `json:"host"`
	Effect string `json:"effect"`
}

// SetNetworkRule inserts the rule or flips the effect of an existing one.
func (s *Store) SetNetworkRule(ctx context.Context, r NetworkRule) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO network_rules (folder, host, effect, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (folder, host) DO UPDATE SET effect = excluded.effect`, r.Folder, r.Host, r.Effect, now())
	if s.isForeignKey(err) {
		return fmt.Errorf("folder %q: %w", r.Folder, ErrNotFound)
	}
	return err
}

// DeleteNetworkRule removes one rule.
func (s *Store) DeleteNetworkRule(ctx context.Context, folder, host string) error {
	if err := affected(s.db.ExecContext(ctx, `DELETE FROM network_rules WHERE folder = ? AND host = ?`, folder, host)); err != nil {
		return fmt.Errorf("network rule %s %s: %w", folder, host, err)
	}
	return nil
}

// NetworkRules returns the rules of the given folders (all folders when none
// are given), ordered by folder then host.
func (s *Store) NetworkRules(ctx context.Context, folders ...string) ([]NetworkRule, error) {
	q := `SELECT folder, host, effect FROM network_rules`
	args := make([]any, len(folders))
	if len(folders) > 0 {
		q += ` WHERE folder IN (?` + strings.Repeat(", ?", len(folders)-1) + `)`
		for i, f := range folders {
			args[i] = f
		}
	}
	return queryAll(ctx, s.db, func(sc scanner) (NetworkRule, error) {
		var r NetworkRule
		err := sc.Scan(&r.Folder, &r.Host, &r.Effect)
		return r, err
	}, q+` ORDER BY folder, host`, args...)
}

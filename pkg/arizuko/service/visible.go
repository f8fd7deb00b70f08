package service

import (
	"context"
	"strings"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
)

// visible decides the rows of a list row by row: a row shows when the caller
// may perform action on its folder, so a caller holding the action on part
// of the tree (a tenant) sees its own rows and no other tenant's, and a deny
// row on a subtree hides that subtree even from a whole-tree reader. A
// caller holding the action nowhere is refused, and audited, as before.
func (l *Local) visible(ctx context.Context, action string) (func(scope string) bool, error) {
	p, err := l.loadPolicy(ctx)
	if err != nil {
		return nil, err
	}
	who := l.principal(ctx)
	if !p.HoldsAny(who, action) {
		return nil, l.check(ctx, action, "")
	}
	return func(scope string) bool { return p.Decide(who, action, scope).Allow }, nil
}

// filter keeps the rows of xs whose scope show accepts.
func filter[T any](xs []T, show func(string) bool, scope func(T) string) []T {
	out := make([]T, 0, len(xs))
	for _, x := range xs {
		if show(scope(x)) {
			out = append(out, x)
		}
	}
	return out
}

// globRoot is the literal folder a scope glob starts with ("acme" for
// "acme/**", "" for "**" or "{self}"): a grant row is a tenant's to read
// when its scope lies in the tenant's tree.
func globRoot(scope string) string {
	var segs []string
	for _, s := range strings.Split(scope, "/") {
		if s == "*" || s == "**" || s == acl.SelfSegment {
			break
		}
		segs = append(segs, s)
	}
	return strings.Join(segs, "/")
}

// principalFolder is the folder a folder principal names, "" for any other:
// users and roles are the operator's to list.
func principalFolder(p string) string {
	f, _ := strings.CutPrefix(p, "folder:")
	if f == p {
		return ""
	}
	return f
}

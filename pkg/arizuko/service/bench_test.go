package service

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/router"
)

// benchTables builds 50 routes and ~200 grant rows over 50 folders.
func benchTables(b *testing.B) (*router.Table, *acl.Policy) {
	var routes []router.Route
	var rows []acl.Grant
	var edges []acl.Edge
	for i := 0; i < 50; i++ {
		f := fmt.Sprintf("corp/team%d", i)
		routes = append(routes, router.Route{ID: int64(i + 1), Seq: i, Match: fmt.Sprintf("platform=tg chat_jid=tg:group:%d*", i), Target: f})
		rows = append(rows,
			acl.Grant{ID: int64(4*i + 1), Principal: fmt.Sprintf("user:u%d", i), Action: "mcp:*", Scope: f + "/**", Effect: acl.Allow},
			acl.Grant{ID: int64(4*i + 2), Principal: fmt.Sprintf("role:r%d", i), Action: "route:add", Scope: f, Effect: acl.Allow},
			acl.Grant{ID: int64(4*i + 3), Principal: fmt.Sprintf("role:r%d", i), Action: "mcp:delegate_group", Scope: f + "/secret", Effect: acl.Deny},
			acl.Grant{ID: int64(4*i + 4), Principal: fmt.Sprintf("user:u%d", i), Action: "network:allow", Scope: f + "/*", Effect: acl.Allow},
		)
		edges = append(edges, acl.Edge{Member: fmt.Sprintf("user:u%d", i), Role: fmt.Sprintf("role:r%d", i)}, acl.Edge{Member: "folder:" + f, Role: "role:member"})
	}
	rows = append(rows, acl.Seeds...)
	t, err := router.NewTable(routes)
	if err != nil {
		b.Fatal(err)
	}
	return t, acl.NewPolicy(rows, edges)
}

// BenchmarkResolveAuthorize is the pure hot path of an inbound message and a
// tool call: resolve against 50 routes, then decide against ~200 rows.
func BenchmarkResolveAuthorize(b *testing.B) {
	t, p := benchTables(b)
	now := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := i % 50
		r := t.Resolve(router.Msg{Platform: "tg", ChatJID: fmt.Sprintf("tg:group:%d", n), Sender: "s"}, nil, now, 0)
		if r.Folder == "" {
			b.Fatal("unrouted")
		}
		if !p.Decide("folder:"+r.Folder, "mcp:reply", r.Folder).Allow {
			b.Fatal("denied")
		}
	}
}

// BenchmarkLocalResolveAuthorize adds the store: the chat's engagement
// lookup and the cached policy through the gate.
func BenchmarkLocalResolveAuthorize(b *testing.B) {
	l, admin := newLocal(b, nil)
	mustFolders(b, l, admin, "corp")
	for i := 0; i < 50; i++ {
		f := fmt.Sprintf("corp/team%d", i)
		mustFolders(b, l, admin, f)
		if _, err := l.AddRoute(admin, router.Route{Seq: i, Match: fmt.Sprintf("platform=tg chat_jid=tg:group:%d*", i), Target: f}); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := i % 50
		r, err := l.resolve(ctx, MessageIn{Platform: "tg", ChatJID: fmt.Sprintf("tg:group:%d", n)})
		if err != nil || r.Folder == "" {
			b.Fatal(err)
		}
		if err := l.gate.Check(ctx, "folder:"+r.Folder, "mcp:reply", r.Folder); err != nil {
			b.Fatal(err)
		}
	}
}

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/crackbox/crackbox/pkg/arizuko/email"
	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// startEmail runs the [email] channel inside the daemon when it is
// enabled. It lives here rather than in an adapter process because it
// needs what only the daemon has: the folder homes its attachments go
// into, known before the turn that reads them is queued, and the audit
// log its refusals go to. Replies still take the adapter path: the
// channel registers platform email with a loopback callback, so the
// daemon's delivery queue retries them like any adapter's.
func startEmail(ctx context.Context, ec email.Config, k kickingService) (stop func(), err error) {
	if !ec.Enabled {
		return func() {}, nil
	}
	dataDir := k.Local.DataDir()
	if err := ec.Check(dataDir); err != nil {
		return nil, err
	}
	// The operator configured the channel, so it posts as the operator.
	admin := service.WithPrincipal(ctx, service.AdminPrincipal)
	ch, err := email.New(email.Options{Config: ec, Sink: k, Audit: k.Local.Store().Audit,
		Home: func(f string) (string, error) { return folder.EnsureHome(dataDir, f) }, Log: slog.Default()})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	var b [16]byte
	rand.Read(b[:])
	secret := hex.EncodeToString(b[:])
	srv := &http.Server{Handler: ch.Handler(secret), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	cb := fmt.Sprintf("http://%s/%s", ln.Addr(), secret)
	if _, err := k.SetAdapter(admin, store.Adapter{Platform: email.Platform, CallbackURL: cb}); err != nil {
		srv.Close()
		return nil, fmt.Errorf("register the email adapter: %w", err)
	}
	rctx, cancel := context.WithCancel(admin)
	done := make(chan struct{})
	go func() { defer close(done); ch.Run(rctx) }()
	slog.Info("email channel", "address", ec.Address, "imap", ec.IMAP, "smtp", ec.SMTP, "chat_by", ec.ChatBy)
	return func() { cancel(); <-done; srv.Close() }, nil
}

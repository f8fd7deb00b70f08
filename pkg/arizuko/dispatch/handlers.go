package dispatch

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/crackbox/crackbox/pkg/arizuko/api"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
)

// API paths of the fleet, served by the control plane to runner tokens.
const (
	PathWhoami  = "/v1/fleet/whoami"
	PathClaim   = "/v1/fleet/claim"
	PathOutcome = "/v1/fleet/outcome"
	PathRenew   = "/v1/fleet/renew"
	PathMCP     = "/v1/fleet/mcp"
)

// ClaimHeader carries the claim of a tool session, whose body is the MCP stream.
const ClaimHeader = "X-Arizuko-Claim"

// upgrade is the protocol a tool session switches to: the raw MCP stream.
const upgrade = "arizuko-mcp"

// Register serves the fleet routes on s.
func (d *Dispatcher) Register(s *api.Server) {
	s.Handle(PathWhoami, map[string]api.HandlerFunc{"GET": whoami})
	s.Handle(PathClaim, map[string]api.HandlerFunc{"POST": d.handleClaim})
	s.Handle(PathOutcome, map[string]api.HandlerFunc{"POST": d.handleOutcome})
	s.Handle(PathRenew, map[string]api.HandlerFunc{"POST": d.handleRenew})
	s.Handle(PathMCP, map[string]api.HandlerFunc{"POST": d.handleMCP})
	d.registerHomes(s)
}

// Whoami is the runner identity the control plane sees for a token.
type Whoami struct {
	Runner string `json:"runner"`
	Kind   string `json:"kind"`
}

// runnerOf is the authenticated runner: its token's name.
func runnerOf(r *http.Request) (string, error) {
	c, ok := service.CallerOf(r.Context())
	if !ok || (c.Kind != service.KindRunner && c.Kind != service.KindAdmin) {
		return "", fmt.Errorf("fleet routes need a runner token: %w", service.ErrDenied)
	}
	return c.Name, nil
}

func whoami(w http.ResponseWriter, r *http.Request) error {
	c, _ := service.CallerOf(r.Context())
	if _, err := runnerOf(r); err != nil {
		return err
	}
	return api.WriteJSON(w, http.StatusOK, Whoami{Runner: c.Name, Kind: c.Kind})
}

// apiErr maps the fleet's sentinels onto the envelope codes.
func apiErr(err error) error {
	switch {
	case errors.Is(err, ErrStale):
		return fmt.Errorf("%w: %w", err, service.ErrConflict)
	case errors.Is(err, ErrNotHolder):
		return fmt.Errorf("%w: %w", err, service.ErrDenied)
	case errors.Is(err, ErrTooManySessions):
		return fmt.Errorf("%w: %w", err, service.ErrUnavailable)
	}
	return err
}

func (d *Dispatcher) handleClaim(w http.ResponseWriter, r *http.Request) error {
	runner, err := runnerOf(r)
	if err != nil {
		return err
	}
	var c Claim
	if err := api.Decode(w, r, &c); err != nil {
		return err
	}
	work, err := d.Claim(r.Context(), runner, c)
	if err != nil {
		return apiErr(err)
	}
	return api.WriteJSON(w, http.StatusOK, work)
}

func (d *Dispatcher) handleOutcome(w http.ResponseWriter, r *http.Request) error {
	runner, err := runnerOf(r)
	if err != nil {
		return err
	}
	var o Outcome
	if err := api.Decode(w, r, &o); err != nil {
		return err
	}
	ack, err := d.Report(r.Context(), runner, o)
	if err != nil {
		return apiErr(err)
	}
	return api.WriteJSON(w, http.StatusOK, ack)
}

func (d *Dispatcher) handleRenew(w http.ResponseWriter, r *http.Request) error {
	runner, err := runnerOf(r)
	if err != nil {
		return err
	}
	var c Claim
	if err := api.Decode(w, r, &c); err != nil {
		return err
	}
	if err := d.Renew(r.Context(), runner, c); err != nil {
		return apiErr(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// handleMCP switches the request's connection to the raw MCP stream of one
// guest session and serves it with the folder's tools, as the turn's folder.
func (d *Dispatcher) handleMCP(w http.ResponseWriter, r *http.Request) error {
	runner, err := runnerOf(r)
	if err != nil {
		return err
	}
	if r.Header.Get("Upgrade") != upgrade {
		return fmt.Errorf("tool session: want header Upgrade: %s: %w", upgrade, service.ErrInvalid)
	}
	var c Claim
	if err := json.Unmarshal([]byte(r.Header.Get(ClaimHeader)), &c); err != nil {
		return fmt.Errorf("tool session: header %s: %v: %w", ClaimHeader, err, service.ErrInvalid)
	}
	ctx, t, release, err := d.session(r.Context(), runner, c)
	if err != nil {
		return apiErr(err)
	}
	defer release()
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return err
	}
	conn.SetDeadline(time.Time{})
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + upgrade + "\r\n\r\n")
	if err := brw.Flush(); err != nil {
		conn.Close()
		return nil
	}
	bc := &bufConn{Conn: conn, r: brw.Reader}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-ctx.Done():
		case <-stop:
		}
		conn.Close()
	}()
	if err := d.o.Gated.ServeConn(ctx, t, bc); err != nil && ctx.Err() == nil {
		d.o.Log.Debug("fleet tool session ended", "turn", c.Turn, "runner", runner, "err", err)
	}
	return nil
}

// bufConn reads what the server's reader already buffered before the conn.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufConn) Read(p []byte) (int, error) { return b.r.Read(p) }

package admin

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"

	"github.com/crackbox/crackbox/internal/buildinfo"
	"github.com/crackbox/crackbox/internal/httpjson"
	"github.com/crackbox/crackbox/pkg/proxy"
	"github.com/crackbox/crackbox/pkg/proxy/allow"
	"github.com/crackbox/crackbox/pkg/proxy/inject"
)

// maxBody bounds request bodies; the largest legitimate one is an allowlist.
const maxBody = 1 << 20

// ClientJSON is a client as the API and the state file show it.
type ClientJSON struct {
	IP        string   `json:"ip"`
	ID        string   `json:"id"`
	Allowlist []string `json:"allowlist"`
	// Secrets are the client's injected secrets: names, hosts and the
	// placeholders its guest uses, never the values.
	Secrets []inject.SecretInfo `json:"secrets,omitempty"`
}

// StateJSON is the body of GET /v1/state.
type StateJSON struct {
	Clients       []ClientJSON `json:"clients"`
	ActiveTunnels int          `json:"active_tunnels"`
}

type registerRequest struct {
	IP        string          `json:"ip"`
	ID        string          `json:"id"`
	Allowlist []string        `json:"allowlist"`
	Secrets   []secretRequest `json:"secrets"`
}

type unregisterRequest struct {
	IP string `json:"ip"`
}

type patchRequest struct {
	Add    []string `json:"add"`
	Remove []string `json:"remove"`
}

// ErrorJSON is the body of every error response.
type ErrorJSON = httpjson.Envelope

func clientJSON(c proxy.Client) ClientJSON {
	return ClientJSON{IP: c.IP.String(), ID: c.ID, Allowlist: c.Allow.Entries(), Secrets: c.Secrets.Info()}
}

// health reports whether the proxy serves, and which build is running.
func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	doc := buildinfo.Get().Fields()
	doc["status"] = "ok"
	s.sharedHealth(doc)
	if s.opts.Healthy != nil {
		if err := s.opts.Healthy(); err != nil {
			doc["status"], doc["message"] = "proxy_down", err.Error()
			writeJSON(w, http.StatusServiceUnavailable, doc)
			return
		}
	}
	writeJSON(w, http.StatusOK, doc)
}

func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	var req registerRequest
	if !decode(w, r, &req) {
		return
	}
	ip, ok := parseIP(w, req.IP)
	if !ok {
		return
	}
	list, err := allow.Parse(req.Allowlist)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_allowlist", err.Error())
		return
	}
	set, err := secretSet(req.Secrets)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_secret", err.Error())
		return
	}
	c := proxy.Client{ID: req.ID, IP: ip, Allow: list, Secrets: set}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.addClient(c); err != nil {
		switch {
		case errors.Is(err, proxy.ErrClientExists):
			writeError(w, http.StatusConflict, "client_exists", err.Error()+"; unregister it first")
			return
		case errors.Is(err, ErrUnavailable):
			writeUnavailable(w, err)
			return
		}
		writeError(w, http.StatusBadRequest, "invalid_client", err.Error())
		return
	}
	s.log.Info("client registered", "ip", ip, "id", req.ID, "allow", list.Entries(), "secrets", set.Names())
	if !set.Empty() && s.opts.StateFile != "" && s.opts.StateKey == nil {
		s.log.Warn("client secrets not saved: it must register again after a restart",
			"ip", ip, "id", req.ID, "fix", "set "+EnvStateKey+" or proxy.state_key_file")
	}
	if !s.persist(w) {
		return
	}
	c, _ = s.opts.Registry.Lookup(ip)
	writeJSON(w, http.StatusCreated, clientJSON(c))
}

func (s *Server) unregister(w http.ResponseWriter, r *http.Request) {
	var req unregisterRequest
	if !decode(w, r, &req) {
		return
	}
	ip, ok := parseIP(w, req.IP)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	removed, err := s.removeClient(ip)
	if err != nil {
		writeUnavailable(w, err)
		return
	}
	if !removed {
		writeError(w, http.StatusNotFound, "unknown_client", fmt.Sprintf("no client registered at %s", ip))
		return
	}
	s.log.Info("client unregistered", "ip", ip)
	if !s.persist(w) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) patch(w http.ResponseWriter, r *http.Request) {
	ip, ok := parseIP(w, r.PathValue("ip"))
	if !ok {
		return
	}
	var req patchRequest
	if !decode(w, r, &req) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.updateClient(ip, req.Add, req.Remove)
	switch {
	case errors.Is(err, proxy.ErrUnknownClient):
		writeError(w, http.StatusNotFound, "unknown_client", fmt.Sprintf("no client registered at %s", ip))
		return
	case errors.Is(err, ErrUnavailable):
		writeUnavailable(w, err)
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, "invalid_allowlist", err.Error())
		return
	}
	s.log.Info("client allowlist changed", "ip", ip, "id", c.ID, "add", req.Add, "remove", req.Remove)
	if !s.persist(w) {
		return
	}
	writeJSON(w, http.StatusOK, clientJSON(c))
}

func (s *Server) state(w http.ResponseWriter, _ *http.Request) {
	st := StateJSON{Clients: []ClientJSON{}}
	for _, c := range s.opts.Registry.List() {
		st.Clients = append(st.Clients, clientJSON(c))
	}
	if s.opts.Active != nil {
		st.ActiveTunnels = s.opts.Active()
	}
	writeJSON(w, http.StatusOK, st)
}

// persist saves the registry after a change; the change is already live, so
// a failure is reported as such rather than as a refused request.
func (s *Server) persist(w http.ResponseWriter) bool {
	if err := s.saveLocked(); err != nil {
		s.log.Error("state file write failed", "file", s.opts.StateFile, "err", err)
		writeError(w, http.StatusInternalServerError, "state_write_failed",
			"the change is live but was not saved: "+err.Error())
		return false
	}
	return true
}

// decode reads one JSON object, rejecting unknown fields and trailing data.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := httpjson.Decode(w, r, maxBody, v); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_json", "request body: "+err.Error())
		return false
	}
	return true
}

func parseIP(w http.ResponseWriter, s string) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(s)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_ip", fmt.Sprintf("ip %q is not an IP address like 10.0.0.2", s))
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

// writeUnavailable answers an edit the shared registry could not store.
func writeUnavailable(w http.ResponseWriter, err error) {
	writeError(w, http.StatusServiceUnavailable, "registry_unavailable",
		"the change was not made: "+err.Error()+"; retry when the registry is reachable")
}

// style is the admin API's encoding: indented, HTML characters escaped.
var style = httpjson.Style{Indent: "  ", EscapeHTML: true}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	style.Error(w, status, code, msg)
}

func writeJSON(w http.ResponseWriter, status int, v any) { _ = style.Write(w, status, v) }

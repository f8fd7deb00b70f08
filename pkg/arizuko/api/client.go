package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
)

// Client implements service.Service against a running daemon.
type Client struct {
	base  string
	token string
	hc    *http.Client
}

var _ service.Service = (*Client)(nil)

// NewClient talks to the daemon at base (http://host:port) with a bearer token.
func NewClient(base, token string) *Client {
	return &Client{base: strings.TrimSuffix(base, "/"), token: token, hc: &http.Client{Timeout: 30 * time.Second}}
}

// do sends body (nil for none) and decodes a 2xx answer into out (nil to discard).
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body, out any) error {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		if f := invalidString(reflect.ValueOf(body), ""); f != "" {
			return fmt.Errorf("field %s is not valid UTF-8: send text as UTF-8: %w", f, service.ErrInvalid)
		}
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("arizuko daemon at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		e := &service.Error{}
		if json.Unmarshal(data, e) != nil || e.Code == "" {
			return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))
		}
		return e
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	return json.Unmarshal(data, out)
}

// Health checks GET /health.
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, "GET", "/health", nil, nil, nil)
}

func (c *Client) PostMessage(ctx context.Context, in service.MessageIn) (out service.Ingest, err error) {
	return out, c.do(ctx, "POST", "/v1/messages", nil, in, &out)
}

func (c *Client) ListMessages(ctx context.Context, chat string, after int64, limit int) (out []store.Message, err error) {
	q := url.Values{"chat": {chat}, "after": {strconv.FormatInt(after, 10)}, "limit": {strconv.Itoa(limit)}}
	return out, c.do(ctx, "GET", "/v1/messages", q, nil, &out)
}

func (c *Client) Resolve(ctx context.Context, in service.MessageIn) (out router.Result, err error) {
	return out, c.do(ctx, "POST", "/v1/resolve", nil, in, &out)
}

func (c *Client) AddFolder(ctx context.Context, f store.Folder) (out store.Folder, err error) {
	return out, c.do(ctx, "POST", "/v1/folders", nil, f, &out)
}

func (c *Client) ListFolders(ctx context.Context) (out []store.Folder, err error) {
	return out, c.do(ctx, "GET", "/v1/folders", nil, nil, &out)
}

func (c *Client) RemoveFolder(ctx context.Context, path string) error {
	return c.do(ctx, "DELETE", "/v1/folders/"+pathEscape(path), nil, nil, nil)
}

func (c *Client) SetFolder(ctx context.Context, path string, in service.FolderSet) (out store.Folder, err error) {
	return out, c.do(ctx, "PATCH", "/v1/folders/"+pathEscape(path), nil, in, &out)
}

// pathEscape escapes each segment so the daemon sees exactly path, '/' kept.
func pathEscape(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

func (c *Client) AddRoute(ctx context.Context, r router.Route) (out router.Route, err error) {
	return out, c.do(ctx, "POST", "/v1/routes", nil, r, &out)
}

func (c *Client) ListRoutes(ctx context.Context) (out []router.Route, err error) {
	return out, c.do(ctx, "GET", "/v1/routes", nil, nil, &out)
}

func (c *Client) RemoveRoute(ctx context.Context, id int64) error {
	return c.do(ctx, "DELETE", "/v1/routes/"+strconv.FormatInt(id, 10), nil, nil, nil)
}

func (c *Client) AddGrant(ctx context.Context, g acl.Grant) (out acl.Grant, err error) {
	return out, c.do(ctx, "POST", "/v1/grants", nil, g, &out)
}

func (c *Client) ListGrants(ctx context.Context, principal string) (out []acl.Grant, err error) {
	var q url.Values
	if principal != "" {
		q = url.Values{"principal": {principal}}
	}
	return out, c.do(ctx, "GET", "/v1/grants", q, nil, &out)
}

func (c *Client) RemoveGrant(ctx context.Context, id int64) error {
	return c.do(ctx, "DELETE", "/v1/grants/"+strconv.FormatInt(id, 10), nil, nil, nil)
}

func (c *Client) AddMember(ctx context.Context, e acl.Edge) error {
	return c.do(ctx, "POST", "/v1/members", nil, e, nil)
}

func (c *Client) RemoveMember(ctx context.Context, e acl.Edge) error {
	return c.do(ctx, "DELETE", "/v1/members", url.Values{"member": {e.Member}, "role": {e.Role}}, nil, nil)
}

func (c *Client) ListMembers(ctx context.Context) (out []acl.Edge, err error) {
	return out, c.do(ctx, "GET", "/v1/members", nil, nil, &out)
}

func (c *Client) ListAudit(ctx context.Context, limit int) (out []store.AuditEntry, err error) {
	return out, c.do(ctx, "GET", "/v1/audit", url.Values{"limit": {strconv.Itoa(limit)}}, nil, &out)
}

func (c *Client) SetNetworkRule(ctx context.Context, r store.NetworkRule) (out store.NetworkRule, err error) {
	return out, c.do(ctx, "POST", "/v1/network", nil, r, &out)
}

func (c *Client) RemoveNetworkRule(ctx context.Context, folder, host string) error {
	return c.do(ctx, "DELETE", "/v1/network", url.Values{"folder": {folder}, "host": {host}}, nil, nil)
}

func (c *Client) ListNetwork(ctx context.Context, folder string) (out service.NetworkView, err error) {
	return out, c.do(ctx, "GET", "/v1/network", url.Values{"folder": {folder}}, nil, &out)
}

func (c *Client) SetSecret(ctx context.Context, s service.SecretIn) error {
	return c.do(ctx, "POST", "/v1/secrets", nil, s, nil)
}

func (c *Client) RemoveSecret(ctx context.Context, scope, name string) error {
	return c.do(ctx, "DELETE", "/v1/secrets", url.Values{"scope": {scope}, "name": {name}}, nil, nil)
}

func (c *Client) ListSecrets(ctx context.Context, scope string) (out []store.SecretName, err error) {
	var q url.Values
	if scope != "" {
		q = url.Values{"scope": {scope}}
	}
	return out, c.do(ctx, "GET", "/v1/secrets", q, nil, &out)
}

func (c *Client) RotateSecrets(ctx context.Context) (int, error) {
	var out struct {
		Resealed int `json:"resealed"`
	}
	err := c.do(ctx, "POST", "/v1/secrets/rotate", nil, nil, &out)
	return out.Resealed, err
}

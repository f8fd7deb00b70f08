package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/crackbox/crackbox/internal/httpjson"
	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
)

// Client implements service.Service against a running daemon.
type Client struct {
	base string
	hc   httpjson.Client
}

var _ service.Service = (*Client)(nil)

// NewClient talks to the daemon at base (http://host:port) with a bearer token.
func NewClient(base, token string) *Client {
	base = strings.TrimSuffix(base, "/")
	return &Client{base: base, hc: httpjson.Client{Base: base, Token: token, HTTP: &http.Client{Timeout: 30 * time.Second}}}
}

// do sends body (nil for none) and decodes a 2xx answer into out (nil to discard).
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body, out any) error {
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	if body != nil {
		if f := invalidString(reflect.ValueOf(body), ""); f != "" {
			return fmt.Errorf("field %s is not valid UTF-8: send text as UTF-8: %w", f, service.ErrInvalid)
		}
	}
	return RemoteError(c.base, c.hc.Do(ctx, method, path, body, out))
}

// RemoteError turns the error envelope of the daemon at base into a
// *service.Error, so callers branch on it as on a local one, and names the
// daemon in a transport failure.
func RemoteError(base string, err error) error {
	var se *httpjson.StatusError
	var ue *url.Error
	switch {
	case errors.As(err, &se) && se.Envelope.Error != "":
		return &service.Error{Code: se.Envelope.Error, Message: se.Envelope.Message}
	case errors.As(err, &ue):
		return fmt.Errorf("arizuko daemon at %s: %w", base, err)
	}
	return err
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

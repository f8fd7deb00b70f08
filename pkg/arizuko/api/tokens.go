package api

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// tokenRoutes serves the scoped tokens and the adapters' outbound queue.
func (s *Server) tokenRoutes() {
	s.handle("/v1/tokens", true, map[string]HandlerFunc{
		"GET":  listed(s.svc.ListTokens),
		"POST": decoded(http.StatusCreated, s.svc.AddToken),
	})
	s.handle("/v1/tokens/{name}", true, map[string]HandlerFunc{"DELETE": func(w http.ResponseWriter, r *http.Request) error {
		return done(w, s.svc.RemoveToken(r.Context(), r.PathValue("name")))
	}})
	s.handle("/v1/outbound", true, map[string]HandlerFunc{"GET": func(w http.ResponseWriter, r *http.Request) error {
		q := r.URL.Query()
		limit, err := intParam(q.Get("limit"), "limit")
		if err != nil {
			return err
		}
		platform, err := service.PinPlatform(r.Context(), q.Get("platform"), "")
		if err != nil {
			return err
		}
		out, err := s.svc.ListOutbound(r.Context(), platform, int(limit))
		return list(w, out, err)
	}})
}

func (c *Client) AddToken(ctx context.Context, in service.TokenIn) (out service.NewToken, err error) {
	return out, c.do(ctx, "POST", "/v1/tokens", nil, in, &out)
}

func (c *Client) ListTokens(ctx context.Context) (out []store.Token, err error) {
	return out, c.do(ctx, "GET", "/v1/tokens", nil, nil, &out)
}

func (c *Client) RemoveToken(ctx context.Context, name string) error {
	return c.do(ctx, "DELETE", "/v1/tokens/"+url.PathEscape(name), nil, nil, nil)
}

func (c *Client) ListOutbound(ctx context.Context, platform string, limit int) (out []store.Outbound, err error) {
	q := url.Values{"platform": {platform}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return out, c.do(ctx, "GET", "/v1/outbound", q, nil, &out)
}

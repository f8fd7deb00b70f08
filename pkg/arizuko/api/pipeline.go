package api

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// pipelineRoutes serves the turn pipeline's records and settings.
func (s *Server) pipelineRoutes() {
	s.handle("/v1/adapters", true, map[string]HandlerFunc{"POST": decoded(http.StatusOK, s.svc.SetAdapter)})
	s.handle("/v1/adapters/{platform}", true, map[string]HandlerFunc{"DELETE": func(w http.ResponseWriter, r *http.Request) error {
		return done(w, s.svc.RemoveAdapter(r.Context(), r.PathValue("platform")))
	}})
	s.handle("/v1/turns", true, map[string]HandlerFunc{"GET": func(w http.ResponseWriter, r *http.Request) error {
		limit, err := intParam(r.URL.Query().Get("limit"), "limit")
		if err != nil {
			return err
		}
		out, err := s.svc.ListTurns(r.Context(), r.URL.Query().Get("folder"), int(limit))
		return list(w, out, err)
	}})
	s.handle("/v1/turns/{id}", true, map[string]HandlerFunc{"GET": func(w http.ResponseWriter, r *http.Request) error {
		id, err := idParam(r)
		if err != nil {
			return err
		}
		out, err := s.svc.GetTurn(r.Context(), id)
		return reply(w, http.StatusOK, out, err)
	}})
	s.handle("/v1/budgets/{folder...}", true, map[string]HandlerFunc{
		"GET": func(w http.ResponseWriter, r *http.Request) error {
			out, err := s.svc.GetBudget(r.Context(), r.PathValue("folder"))
			return reply(w, http.StatusOK, out, err)
		},
		"PUT": func(w http.ResponseWriter, r *http.Request) error {
			var in service.BudgetIn
			if err := Decode(w, r, &in); err != nil {
				return err
			}
			out, err := s.svc.SetBudget(r.Context(), r.PathValue("folder"), in)
			return reply(w, http.StatusOK, out, err)
		},
	})
}

func (c *Client) SetAdapter(ctx context.Context, a store.Adapter) (out store.Adapter, err error) {
	return out, c.do(ctx, "POST", "/v1/adapters", nil, a, &out)
}

func (c *Client) RemoveAdapter(ctx context.Context, platform string) error {
	return c.do(ctx, "DELETE", "/v1/adapters/"+url.PathEscape(platform), nil, nil, nil)
}

func (c *Client) ListTurns(ctx context.Context, folder string, limit int) (out []store.Turn, err error) {
	q := url.Values{}
	if folder != "" {
		q.Set("folder", folder)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return out, c.do(ctx, "GET", "/v1/turns", q, nil, &out)
}

func (c *Client) GetTurn(ctx context.Context, id int64) (out service.TurnDetail, err error) {
	return out, c.do(ctx, "GET", "/v1/turns/"+strconv.FormatInt(id, 10), nil, nil, &out)
}

func (c *Client) GetBudget(ctx context.Context, folder string) (out service.FolderBudget, err error) {
	return out, c.do(ctx, "GET", "/v1/budgets/"+pathEscape(folder), nil, nil, &out)
}

func (c *Client) SetBudget(ctx context.Context, folder string, in service.BudgetIn) (out service.FolderBudget, err error) {
	return out, c.do(ctx, "PUT", "/v1/budgets/"+pathEscape(folder), nil, in, &out)
}

// Do sends one request to the daemon: body (nil for none) as JSON, a 2xx
// answer decoded into out (nil to discard), anything else as the envelope's
// *service.Error.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	return c.do(ctx, method, path, nil, body, out)
}

package api

import (
	"context"
	"net/http"
	"net/url"

	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// observeRoutes serves GET /v1/observations[?observer=F] and
// DELETE /v1/observations?observer=F&source=S.
func (s *Server) observeRoutes() {
	s.handle("/v1/observations", true, map[string]HandlerFunc{
		"GET": listedBy("observer", s.svc.ListObservations),
		"DELETE": func(w http.ResponseWriter, r *http.Request) error {
			q := r.URL.Query()
			return done(w, s.svc.RemoveObservation(r.Context(), q.Get("observer"), q.Get("source")))
		},
	})
}

// ListObservations implements service.Service.
func (c *Client) ListObservations(ctx context.Context, observer string) ([]store.Observation, error) {
	var out []store.Observation
	q := url.Values{}
	if observer != "" {
		q.Set("observer", observer)
	}
	return out, c.do(ctx, "GET", "/v1/observations", q, nil, &out)
}

// RemoveObservation implements service.Service.
func (c *Client) RemoveObservation(ctx context.Context, observer, source string) error {
	return c.do(ctx, "DELETE", "/v1/observations", url.Values{"observer": {observer}, "source": {source}}, nil, nil)
}

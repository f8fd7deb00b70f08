package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// channelRoutes serves the webhooks and scheduled turns of the folders.
func (s *Server) channelRoutes() {
	s.handle("/v1/hooks", true, map[string]HandlerFunc{
		"GET":  listed(s.svc.ListHooks),
		"POST": decoded(http.StatusCreated, s.svc.AddHook),
	})
	s.handle("/v1/hooks/{id}", true, map[string]HandlerFunc{"DELETE": removedByID(s.svc.RemoveHook)})
	s.handle("/v1/schedules", true, map[string]HandlerFunc{
		"GET":  listed(s.svc.ListSchedules),
		"POST": decoded(http.StatusCreated, s.svc.AddSchedule),
	})
	s.handle("/v1/schedules/{id}", true, map[string]HandlerFunc{"DELETE": removedByID(s.svc.RemoveSchedule)})
}

func (c *Client) AddHook(ctx context.Context, in service.HookIn) (out service.NewHook, err error) {
	return out, c.do(ctx, "POST", "/v1/hooks", nil, in, &out)
}

func (c *Client) ListHooks(ctx context.Context) (out []store.Hook, err error) {
	return out, c.do(ctx, "GET", "/v1/hooks", nil, nil, &out)
}

func (c *Client) RemoveHook(ctx context.Context, id int64) error {
	return c.do(ctx, "DELETE", "/v1/hooks/"+strconv.FormatInt(id, 10), nil, nil, nil)
}

func (c *Client) AddSchedule(ctx context.Context, in service.ScheduleIn) (out store.Schedule, err error) {
	return out, c.do(ctx, "POST", "/v1/schedules", nil, in, &out)
}

func (c *Client) ListSchedules(ctx context.Context) (out []store.Schedule, err error) {
	return out, c.do(ctx, "GET", "/v1/schedules", nil, nil, &out)
}

func (c *Client) RemoveSchedule(ctx context.Context, id int64) error {
	return c.do(ctx, "DELETE", "/v1/schedules/"+strconv.FormatInt(id, 10), nil, nil, nil)
}

package api

import (
	"net/http"
	"strconv"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
)

// messageRoutes serves inbound messages and the routing dry run.
func (s *Server) messageRoutes() {
	s.handle("/v1/messages", true, map[string]HandlerFunc{
		"POST": func(w http.ResponseWriter, r *http.Request) error {
			var in service.MessageIn
			if err := Decode(w, r, &in); err != nil {
				return err
			}
			// A retried POST carries the same key, and a key is the message's
			// platform id: the store keeps one message per chat and id.
			if k := r.Header.Get("Idempotency-Key"); k != "" {
				if in.PlatformID != "" && in.PlatformID != k {
					return badRequest{"Idempotency-Key " + strconv.Quote(k) + " and platform_id " + strconv.Quote(in.PlatformID) + " differ: send one, or both the same"}
				}
				in.PlatformID = k
			}
			var err error
			if in.Platform, err = service.PinPlatform(r.Context(), in.Platform, in.ChatJID); err != nil {
				return err
			}
			out, err := s.svc.PostMessage(r.Context(), in)
			if err != nil {
				return err
			}
			status := http.StatusCreated
			if out.Duplicate {
				status = http.StatusOK
			}
			return WriteJSON(w, status, out)
		},
		"GET": func(w http.ResponseWriter, r *http.Request) error {
			q := r.URL.Query()
			after, err := intParam(q.Get("after"), "after")
			if err != nil {
				return err
			}
			limit, err := intParam(q.Get("limit"), "limit")
			if err != nil {
				return err
			}
			out, err := s.svc.ListMessages(r.Context(), q.Get("chat"), after, int(limit))
			return list(w, out, err)
		},
	})
	s.handle("/v1/resolve", true, map[string]HandlerFunc{"POST": decoded(http.StatusOK, s.svc.Resolve)})
}

package api

import (
	"net/http"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
)

// grantRoutes serves grant rows, role membership and the audit of denials.
func (s *Server) grantRoutes() {
	s.handle("/v1/grants", true, map[string]HandlerFunc{
		"GET":  listedBy("principal", s.svc.ListGrants),
		"POST": decoded(http.StatusCreated, s.svc.AddGrant),
	})
	s.handle("/v1/grants/{id}", true, map[string]HandlerFunc{"DELETE": removedByID(s.svc.RemoveGrant)})
	s.handle("/v1/members", true, map[string]HandlerFunc{
		"GET": listed(s.svc.ListMembers),
		"POST": func(w http.ResponseWriter, r *http.Request) error {
			var e acl.Edge
			if err := Decode(w, r, &e); err != nil {
				return err
			}
			return reply(w, http.StatusCreated, e, s.svc.AddMember(r.Context(), e))
		},
		"DELETE": func(w http.ResponseWriter, r *http.Request) error {
			q := r.URL.Query()
			return done(w, s.svc.RemoveMember(r.Context(), acl.Edge{Member: q.Get("member"), Role: q.Get("role")}))
		},
	})
	s.handle("/v1/audit", true, map[string]HandlerFunc{"GET": func(w http.ResponseWriter, r *http.Request) error {
		limit, err := intParam(r.URL.Query().Get("limit"), "limit")
		if err != nil {
			return err
		}
		out, err := s.svc.ListAudit(r.Context(), int(limit))
		return list(w, out, err)
	}})
}

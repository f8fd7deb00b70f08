package api

import (
	"net/http"
	"strconv"

	"github.com/crackbox/crackbox/pkg/acl"
	"github.com/crackbox/crackbox/pkg/buildinfo"
	"github.com/crackbox/crackbox/pkg/router"
	"github.com/crackbox/crackbox/pkg/service"
	"github.com/crackbox/crackbox/pkg/store"
)

func (s *Server) register() {
	s.handle("/health", false, map[string]HandlerFunc{"GET": func(w http.ResponseWriter, r *http.Request) error {
		doc := buildinfo.Get().Fields()
		doc["status"] = "ok"
		return WriteJSON(w, http.StatusOK, doc)
	}})
	s.registerOpenAPI()
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, service.CodeNotFound, "no such endpoint: "+r.URL.Path)
	})

	s.handle("/v1/messages", true, map[string]HandlerFunc{
		"POST": func(w http.ResponseWriter, r *http.Request) error {
			var in service.MessageIn
			if err := Decode(w, r, &in); err != nil {
				return err
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
	s.handle("/v1/resolve", true, map[string]HandlerFunc{"POST": func(w http.ResponseWriter, r *http.Request) error {
		var in service.MessageIn
		if err := Decode(w, r, &in); err != nil {
			return err
		}
		out, err := s.svc.Resolve(r.Context(), in)
		return reply(w, http.StatusOK, out, err)
	}})

	s.handle("/v1/folders", true, map[string]HandlerFunc{
		"GET": func(w http.ResponseWriter, r *http.Request) error {
			out, err := s.svc.ListFolders(r.Context())
			return list(w, out, err)
		},
		"POST": func(w http.ResponseWriter, r *http.Request) error {
			var f store.Folder
			if err := Decode(w, r, &f); err != nil {
				return err
			}
			out, err := s.svc.AddFolder(r.Context(), f)
			return reply(w, http.StatusCreated, out, err)
		},
	})
	s.handle("/v1/folders/{path...}", true, map[string]HandlerFunc{"DELETE": func(w http.ResponseWriter, r *http.Request) error {
		return done(w, s.svc.RemoveFolder(r.Context(), r.PathValue("path")))
	}})

	s.handle("/v1/routes", true, map[string]HandlerFunc{
		"GET": func(w http.ResponseWriter, r *http.Request) error {
			out, err := s.svc.ListRoutes(r.Context())
			return list(w, out, err)
		},
		"POST": func(w http.ResponseWriter, r *http.Request) error {
			var rt router.Route
			if err := Decode(w, r, &rt); err != nil {
				return err
			}
			out, err := s.svc.AddRoute(r.Context(), rt)
			return reply(w, http.StatusCreated, out, err)
		},
	})
	s.handle("/v1/routes/{id}", true, map[string]HandlerFunc{"DELETE": func(w http.ResponseWriter, r *http.Request) error {
		id, err := idParam(r)
		if err != nil {
			return err
		}
		return done(w, s.svc.RemoveRoute(r.Context(), id))
	}})

	s.handle("/v1/grants", true, map[string]HandlerFunc{
		"GET": func(w http.ResponseWriter, r *http.Request) error {
			out, err := s.svc.ListGrants(r.Context(), r.URL.Query().Get("principal"))
			return list(w, out, err)
		},
		"POST": func(w http.ResponseWriter, r *http.Request) error {
			var g acl.Grant
			if err := Decode(w, r, &g); err != nil {
				return err
			}
			out, err := s.svc.AddGrant(r.Context(), g)
			return reply(w, http.StatusCreated, out, err)
		},
	})
	s.handle("/v1/grants/{id}", true, map[string]HandlerFunc{"DELETE": func(w http.ResponseWriter, r *http.Request) error {
		id, err := idParam(r)
		if err != nil {
			return err
		}
		return done(w, s.svc.RemoveGrant(r.Context(), id))
	}})
	s.handle("/v1/members", true, map[string]HandlerFunc{
		"GET": func(w http.ResponseWriter, r *http.Request) error {
			out, err := s.svc.ListMembers(r.Context())
			return list(w, out, err)
		},
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

	s.handle("/v1/network", true, map[string]HandlerFunc{
		"GET": func(w http.ResponseWriter, r *http.Request) error {
			out, err := s.svc.ListNetwork(r.Context(), r.URL.Query().Get("folder"))
			return reply(w, http.StatusOK, out, err)
		},
		"POST": func(w http.ResponseWriter, r *http.Request) error {
			var nr store.NetworkRule
			if err := Decode(w, r, &nr); err != nil {
				return err
			}
			out, err := s.svc.SetNetworkRule(r.Context(), nr)
			return reply(w, http.StatusOK, out, err)
		},
		"DELETE": func(w http.ResponseWriter, r *http.Request) error {
			q := r.URL.Query()
			return done(w, s.svc.RemoveNetworkRule(r.Context(), q.Get("folder"), q.Get("host")))
		},
	})

	s.handle("/v1/secrets", true, map[string]HandlerFunc{
		"GET": func(w http.ResponseWriter, r *http.Request) error {
			out, err := s.svc.ListSecrets(r.Context(), r.URL.Query().Get("scope"))
			return list(w, out, err)
		},
		"POST": func(w http.ResponseWriter, r *http.Request) error {
			var in service.SecretIn
			if err := Decode(w, r, &in); err != nil {
				return err
			}
			return done(w, s.svc.SetSecret(r.Context(), in))
		},
		"DELETE": func(w http.ResponseWriter, r *http.Request) error {
			q := r.URL.Query()
			return done(w, s.svc.RemoveSecret(r.Context(), q.Get("scope"), q.Get("name")))
		},
	})
	s.registerTokens()
	s.registerPipeline()
	s.handle("/v1/secrets/rotate", true, map[string]HandlerFunc{"POST": func(w http.ResponseWriter, r *http.Request) error {
		n, err := s.svc.RotateSecrets(r.Context())
		return reply(w, http.StatusOK, map[string]int{"resealed": n}, err)
	}})
}

func reply(w http.ResponseWriter, status int, v any, err error) error {
	if err != nil {
		return err
	}
	return WriteJSON(w, status, v)
}

// list always answers with a JSON array, never null.
func list[T any](w http.ResponseWriter, v []T, err error) error {
	if err != nil {
		return err
	}
	if v == nil {
		v = []T{}
	}
	return WriteJSON(w, http.StatusOK, v)
}

func done(w http.ResponseWriter, err error) error {
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func intParam(s, name string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, badRequest{"query parameter " + name + "=" + strconv.Quote(s) + ": want a non-negative integer"}
	}
	return n, nil
}

func idParam(r *http.Request) (int64, error) {
	n, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || n <= 0 {
		return 0, badRequest{"id " + strconv.Quote(r.PathValue("id")) + ": want a positive integer"}
	}
	return n, nil
}

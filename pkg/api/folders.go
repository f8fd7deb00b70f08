package api

import (
	"net/http"

	"github.com/crackbox/crackbox/pkg/store"
)

// folderRoutes serves the folders (tenants).
func (s *Server) folderRoutes() {
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
}

package api

import (
	"net/http"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
)

// folderRoutes serves the folders (tenants).
func (s *Server) folderRoutes() {
	s.handle("/v1/folders", true, map[string]HandlerFunc{
		"GET":  listed(s.svc.ListFolders),
		"POST": decoded(http.StatusCreated, s.svc.AddFolder),
	})
	s.handle("/v1/folders/{path...}", true, map[string]HandlerFunc{
		"DELETE": func(w http.ResponseWriter, r *http.Request) error {
			return done(w, s.svc.RemoveFolder(r.Context(), r.PathValue("path")))
		},
		"PATCH": func(w http.ResponseWriter, r *http.Request) error {
			var in service.FolderSet
			if err := Decode(w, r, &in); err != nil {
				return err
			}
			out, err := s.svc.SetFolder(r.Context(), r.PathValue("path"), in)
			return reply(w, http.StatusOK, out, err)
		},
	})
}

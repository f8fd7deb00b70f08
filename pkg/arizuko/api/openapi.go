package api

import (
	_ "embed"
	"net/http"
)

// OpenAPI is the API's OpenAPI 3 document: every route, the error envelope,
// and the adapter protocol (the adapterSend callback of POST /v1/adapters).
// A test holds it to the routes the daemon registers and to real answers.
//
//go:embed openapi.yaml
var OpenAPI []byte

func (s *Server) registerOpenAPI() {
	s.handle("/openapi.yaml", false, map[string]HandlerFunc{"GET": func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "application/yaml")
		_, err := w.Write(OpenAPI)
		return err
	}})
}

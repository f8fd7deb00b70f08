package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/crackbox/crackbox/internal/buildinfo"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
)

// register serves every route of the core API, one resource at a time.
func (s *Server) register() {
	s.observeRoutes()
	s.handle("/health", false, map[string]HandlerFunc{"GET": func(w http.ResponseWriter, r *http.Request) error {
		doc := buildinfo.Get().Fields()
		doc["status"] = "ok"
		for k, v := range s.notes {
			doc[k] = v
		}
		return WriteJSON(w, http.StatusOK, doc)
	}})
	s.registerOpenAPI()
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, service.CodeNotFound, "no such endpoint: "+r.URL.Path)
	})

	s.messageRoutes()
	s.folderRoutes()
	s.routingRoutes()
	s.grantRoutes()
	s.networkRoutes()
	s.secretRoutes()
	s.tokenRoutes()
	s.pipelineRoutes()
	s.channelRoutes()
}

// decoded serves a JSON body of type In: fn's answer goes out with status.
func decoded[In, Out any](status int, fn func(context.Context, In) (Out, error)) HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var in In
		if err := Decode(w, r, &in); err != nil {
			return err
		}
		out, err := fn(r.Context(), in)
		return reply(w, status, out, err)
	}
}

// listed serves GET of a whole list.
func listed[T any](fn func(context.Context) ([]T, error)) HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		out, err := fn(r.Context())
		return list(w, out, err)
	}
}

// listedBy serves GET of a list narrowed by the query parameter param.
func listedBy[T any](param string, fn func(context.Context, string) ([]T, error)) HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		out, err := fn(r.Context(), r.URL.Query().Get(param))
		return list(w, out, err)
	}
}

// removedByID serves DELETE of the row named by the {id} path value.
func removedByID(fn func(context.Context, int64) error) HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		id, err := idParam(r)
		if err != nil {
			return err
		}
		return done(w, fn(r.Context(), id))
	}
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

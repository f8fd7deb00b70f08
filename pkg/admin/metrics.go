package admin

import (
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MetricsHandler serves GET /metrics and GET /health and nothing else, with no
// token: what a scraper needs, and no way to register a client or widen an
// allowlist. The daemon serves it on its own listener (admin.metrics_listen),
// so the scraper never holds the admin secret.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", s.health)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.opts.Gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found",
			"this listener serves only GET /metrics and GET /health; the admin API is on admin.listen")
	})
	return mux
}

// ServeMetrics serves MetricsHandler on ln until Shutdown.
func (s *Server) ServeMetrics(ln net.Listener) error {
	s.mu.Lock()
	if s.metrics == nil {
		s.metrics = &http.Server{
			Handler:           s.MetricsHandler(),
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          s.srv.ErrorLog,
		}
	}
	srv := s.metrics
	s.mu.Unlock()
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

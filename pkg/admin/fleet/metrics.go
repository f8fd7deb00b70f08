package fleet

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	degraded prometheus.Gauge
	skipped  prometheus.Counter
}

func newMetrics(r prometheus.Registerer) metrics {
	m := metrics{
		degraded: prometheus.NewGauge(prometheus.GaugeOpts{Name: "crackbox_registry_degraded",
			Help: "1 while this replica cannot follow the shared registry and enforces its last copy."}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "crackbox_registry_entries_skipped_total",
			Help: "Malformed shared registry entries skipped (their clients are refused)."}),
	}
	if r != nil {
		r.MustRegister(m.degraded, m.skipped)
	}
	return m
}

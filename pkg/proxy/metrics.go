package proxy

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are always created so the hot path needs no nil checks; they are
// only exported when Options.Registerer is set.
type metrics struct {
	decisions *prometheus.CounterVec
	active    prometheus.Gauge
	bytes     *prometheus.CounterVec
	dial      prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "crackbox", Subsystem: "proxy", Name: "decisions_total",
			Help: "Proxy decisions by reason (\"allowed\" for allowed requests).",
		}, []string{"reason"}),
		active: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "crackbox", Subsystem: "proxy", Name: "active_tunnels",
			Help: "Connections currently relaying to an upstream.",
		}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "crackbox", Subsystem: "proxy", Name: "bytes_total",
			Help: "Bytes relayed; direction is \"out\" (client to upstream) or \"in\".",
		}, []string{"direction"}),
		dial: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "crackbox", Subsystem: "proxy", Name: "dial_duration_seconds",
			Help:    "Time to connect to an upstream.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 10),
		}),
	}
	if reg == nil {
		return m, nil
	}
	// A second proxy on the same registerer (tests, reloads) shares the
	// collectors that are already there instead of failing.
	var err error
	if m.decisions, err = register(reg, m.decisions); err != nil {
		return nil, err
	}
	if m.active, err = register(reg, m.active); err != nil {
		return nil, err
	}
	if m.bytes, err = register(reg, m.bytes); err != nil {
		return nil, err
	}
	if m.dial, err = register(reg, m.dial); err != nil {
		return nil, err
	}
	return m, nil
}

func register[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing, nil
		}
	}
	return c, err
}

func (m *metrics) observe(d Decision) {
	r := d.Reason
	if d.Allowed && r == "" {
		r = "allowed"
	}
	m.decisions.WithLabelValues(r).Inc()
	if d.BytesOut > 0 {
		m.bytes.WithLabelValues("out").Add(float64(d.BytesOut))
	}
	if d.BytesIn > 0 {
		m.bytes.WithLabelValues("in").Add(float64(d.BytesIn))
	}
}

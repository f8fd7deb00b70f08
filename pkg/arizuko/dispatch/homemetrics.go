package dispatch

import "github.com/prometheus/client_golang/prometheus"

// homeMetrics count the fleet's home traffic, as runners report it with
// their outcomes and as the control plane commits it.
type homeMetrics struct {
	fetched, sent, committed prometheus.Counter
	chunks, hits, sentChunks prometheus.Counter
}

func newHomeMetrics(reg prometheus.Registerer) homeMetrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m := homeMetrics{
		fetched:    c("arizuko_home_fetched_bytes_total", "Bytes of home chunks runners fetched from the control plane."),
		sent:       c("arizuko_home_sent_bytes_total", "Bytes of home chunks runners sent to the control plane."),
		committed:  c("arizuko_home_committed_bytes_total", "Bytes of the home versions committed (their whole size)."),
		chunks:     c("arizuko_home_fetched_chunks_total", "Home chunks runners fetched from the control plane."),
		hits:       c("arizuko_home_cache_hits_total", "Home chunks runners found in their own cache."),
		sentChunks: c("arizuko_home_sent_chunks_total", "Home chunks runners sent to the control plane."),
	}
	if reg != nil {
		reg.MustRegister(m.fetched, m.sent, m.committed, m.chunks, m.hits, m.sentChunks)
	}
	return m
}

func (d *Dispatcher) recordHomeStats(s HomeStats) {
	d.metrics.fetched.Add(float64(max(s.FetchedBytes, 0)))
	d.metrics.sent.Add(float64(max(s.SentBytes, 0)))
	d.metrics.chunks.Add(float64(max(s.FetchedChunk, 0)))
	d.metrics.hits.Add(float64(max(s.CacheHits, 0)))
	d.metrics.sentChunks.Add(float64(max(s.SentChunks, 0)))
}

package proxy

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/crackbox/crackbox/pkg/proxy/inject"
)

// Reasons carried in Decision.Reason and in the X-Crackbox-Error header.
// Allowed decisions have the empty reason.
const (
	ReasonAllowlist       = "blocked-by-allowlist"
	ReasonPrivateAddress  = "blocked-private-address"
	ReasonPort            = "blocked-port"
	ReasonUnknownClient   = "unknown-client"
	ReasonUpstreamError   = "upstream-error"
	ReasonUpstreamTimeout = "upstream-timeout"
	ReasonBadRequest      = "bad-request"
	ReasonNoServerName    = "blocked-no-server-name"
	// ReasonSecretExfiltration: a secret's placeholder was sent where that
	// secret is not bound (plain HTTP, a CONNECT authority, an SNI, another host).
	ReasonSecretExfiltration = inject.Reason
)

// ErrorHeader names the response header that carries the reason of a refusal.
const ErrorHeader = "X-Crackbox-Error"

// Decision records what the proxy did with one request or connection.
// BytesOut counts client-to-upstream bytes, BytesIn upstream-to-client.
// Allowed requests that then failed upstream keep Allowed true and carry an
// upstream-* reason.
type Decision struct {
	Time     time.Time
	ClientID string
	Src      string
	Method   string
	Host     string
	Port     int
	IP       string
	Allowed  bool
	Reason   string
	BytesIn  int64
	BytesOut int64
	Duration time.Duration
	// Secret names the secret of a secret-exfiltration refusal (never its value).
	Secret string
	// Class and Fix come with a blocked-private-address refusal: what kind of address IP
	// is (documentation, private, the proxy host's own, ...) and how the operator opens it.
	Class string
	Fix   string
}

// decisionLine is the JSON shape of one decision log line.
type decisionLine struct {
	Time       string  `json:"time"`
	ClientID   string  `json:"client_id"`
	Src        string  `json:"src"`
	Method     string  `json:"method"`
	Host       string  `json:"host"`
	Port       int     `json:"port"`
	IP         string  `json:"ip"`
	Decision   string  `json:"decision"`
	Reason     string  `json:"reason"`
	BytesIn    int64   `json:"bytes_in"`
	BytesOut   int64   `json:"bytes_out"`
	DurationMS float64 `json:"duration_ms"`
	Secret     string  `json:"secret,omitempty"`
	Class      string  `json:"class,omitempty"`
	Fix        string  `json:"fix,omitempty"`
	Replica    string  `json:"replica,omitempty"`
}

// decisionLog writes one JSON line per decision; the mutex keeps lines whole
// when many connections finish at once.
type decisionLog struct {
	mu      sync.Mutex
	w       io.Writer
	replica string
}

func (l *decisionLog) write(d Decision) error {
	if l == nil || l.w == nil {
		return nil
	}
	verdict := "deny"
	if d.Allowed {
		verdict = "allow"
	}
	b, err := json.Marshal(decisionLine{
		Time:       d.Time.UTC().Format(time.RFC3339Nano),
		ClientID:   d.ClientID,
		Src:        d.Src,
		Method:     d.Method,
		Host:       d.Host,
		Port:       d.Port,
		IP:         d.IP,
		Decision:   verdict,
		Reason:     d.Reason,
		BytesIn:    d.BytesIn,
		BytesOut:   d.BytesOut,
		DurationMS: float64(d.Duration.Microseconds()) / 1000,
		Secret:     d.Secret,
		Class:      d.Class,
		Fix:        d.Fix,
		Replica:    l.replica,
	})
	if err != nil {
		return err
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err = l.w.Write(b)
	return err
}

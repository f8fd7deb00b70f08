package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProxyServeMetricsListener: a scraper reads /metrics on admin.metrics_listen
// without the admin secret, and can change nothing there; the admin API still
// wants the secret for metrics and for every mutation.
func TestProxyServeMetricsListener(t *testing.T) {
	bin := buildCrackbox(t)
	cfg := filepath.Join(t.TempDir(), "crackbox.toml")
	body := `[proxy]
listen = "127.0.0.1:0"
transparent = ""
[admin]
listen = "127.0.0.1:0"
secret = "test-secret"
metrics_listen = "127.0.0.1:0"
`
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, bin, cleanEnv(t), "--config", cfg)
	m := d.waitLine(t, `msg="proxy serving" .*admin=(\S+) metrics=(\S+)`, 1)
	adm, met := m[1], m[2]

	client := &http.Client{Timeout: 10 * time.Second}
	do := func(method, url, token, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	reg := `{"ip":"10.9.8.7","id":"scraper","allowlist":["*"]}`
	for _, tc := range []struct {
		name, method, url, token, body string
		want                           int
	}{
		{"scrape without the secret", "GET", "http://" + met + "/metrics", "", "", 200},
		{"health without the secret", "GET", "http://" + met + "/health", "", "", 200},
		{"no register on the metrics listener", "POST", "http://" + met + "/v1/register", "", reg, 404},
		{"not even with the secret", "POST", "http://" + met + "/v1/register", "test-secret", reg, 404},
		{"no patch on the metrics listener", "PATCH", "http://" + met + "/v1/clients/10.9.8.7", "", `{"add":["*"]}`, 404},
		{"no state on the metrics listener", "GET", "http://" + met + "/v1/state", "", "", 404},
		{"admin metrics still want the secret", "GET", "http://" + adm + "/metrics", "", "", 401},
		{"admin register without the secret", "POST", "http://" + adm + "/v1/register", "", reg, 401},
		{"admin state without the secret", "GET", "http://" + adm + "/v1/state", "", "", 401},
		{"admin register with the secret", "POST", "http://" + adm + "/v1/register", "test-secret", reg, 201},
	} {
		code, out := do(tc.method, tc.url, tc.token, tc.body)
		if code != tc.want {
			t.Errorf("%s: %s %s = %d, want %d: %s", tc.name, tc.method, tc.url, code, tc.want, out)
		}
		if tc.name == "scrape without the secret" && !strings.Contains(out, "go_goroutines") {
			t.Errorf("scrape lacks go_goroutines:\n%.400s", out)
		}
	}
}

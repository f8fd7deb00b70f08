// Package webdriver is a small W3C WebDriver client for tests: it starts
// chromedriver on a loopback port, opens one headless Chromium session with
// a fresh profile, and offers the few commands a page test needs.
package webdriver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// ErrMissing is a browser or driver binary that is not installed.
var ErrMissing = errors.New("chromium or chromedriver not installed (apt-get install chromium chromium-driver; scripts/deps.sh)")

// Flags are Chromium's flags: headless, no sandbox (tests run as root), and
// nothing that reaches out to the network on its own.
var Flags = []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
	"--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage", "--window-size=1000,800"}

// Session is one browser session.
type Session struct {
	base    string // http://127.0.0.1:port/session/<id>
	driver  *exec.Cmd
	profile string
	hc      *http.Client
}

// Find returns the chromium and chromedriver paths.
func Find() (browser, driver string, err error) {
	for _, b := range []string{"chromium", "chromium-browser"} {
		if p, e := exec.LookPath(b); e == nil {
			browser = p
			break
		}
	}
	driver, _ = exec.LookPath("chromedriver")
	if browser == "" || driver == "" {
		return "", "", ErrMissing
	}
	return browser, driver, nil
}

// Start launches chromedriver and opens a session; Close ends both.
func Start(ctx context.Context) (*Session, error) {
	browser, driver, err := Find()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	profile, err := os.MkdirTemp("", "webdriver-profile-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(driver, "--port="+strconv.Itoa(port), "--allowed-ips=127.0.0.1")
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		os.RemoveAll(profile)
		return nil, fmt.Errorf("chromedriver: %w", err)
	}
	s := &Session{driver: cmd, profile: profile, hc: &http.Client{Timeout: 60 * time.Second}}
	root := "http://127.0.0.1:" + strconv.Itoa(port)
	for ready := false; !ready; {
		if ctx.Err() != nil {
			s.Close()
			return nil, fmt.Errorf("chromedriver did not come up: %w", ctx.Err())
		}
		resp, err := s.hc.Get(root + "/status")
		if err == nil {
			resp.Body.Close()
			ready = resp.StatusCode == 200
		}
		if !ready {
			time.Sleep(50 * time.Millisecond)
		}
	}
	caps := map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"browserName": "chrome",
		"goog:chromeOptions": map[string]any{
			"binary": browser,
			"args":   append(append([]string{}, Flags...), "--user-data-dir="+profile),
		},
	}}}
	var out struct {
		SessionID string `json:"sessionId"`
	}
	s.base = root
	if err := s.do("POST", "/session", caps, &out); err != nil {
		s.Close()
		return nil, err
	}
	s.base = root + "/session/" + out.SessionID
	return s, nil
}

// Close ends the session, chromedriver and the profile.
func (s *Session) Close() {
	if strings.Contains(s.base, "/session/") {
		s.do("DELETE", "", nil, nil)
	}
	if s.driver.Process != nil {
		s.driver.Process.Kill()
		s.driver.Wait()
	}
	os.RemoveAll(s.profile)
}

func (s *Session) do(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var env struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return fmt.Errorf("webdriver %s %s: %s: %w", method, path, resp.Status, err)
	}
	if resp.StatusCode != 200 {
		var e struct {
			Error   string `json:"error"`
			Message string `json:"message"`
		}
		json.Unmarshal(env.Value, &e)
		return fmt.Errorf("webdriver %s %s: %s: %s", method, path, e.Error, firstLine(e.Message))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(env.Value, out)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// Navigate opens url.
func (s *Session) Navigate(url string) error {
	return s.do("POST", "/url", map[string]string{"url": url}, nil)
}

// Element is a found element's id.
type Element string

// Find returns the first element matching a CSS selector.
func (s *Session) Find(css string) (Element, error) {
	var out map[string]string
	if err := s.do("POST", "/element", map[string]string{"using": "css selector", "value": css}, &out); err != nil {
		return "", err
	}
	for _, v := range out {
		return Element(v), nil
	}
	return "", fmt.Errorf("webdriver: no element id for %q", css)
}

// Type sends text to the element matching css.
func (s *Session) Type(css, text string) error {
	e, err := s.Find(css)
	if err != nil {
		return err
	}
	return s.do("POST", "/element/"+string(e)+"/value", map[string]string{"text": text}, nil)
}

// Click clicks the element matching css.
func (s *Session) Click(css string) error {
	e, err := s.Find(css)
	if err != nil {
		return err
	}
	return s.do("POST", "/element/"+string(e)+"/click", map[string]any{}, nil)
}

// Text is the rendered text of the element matching css ("" when hidden).
func (s *Session) Text(css string) (string, error) {
	e, err := s.Find(css)
	if err != nil {
		return "", err
	}
	var out string
	err = s.do("GET", "/element/"+string(e)+"/text", nil, &out)
	return out, err
}

// WaitText polls until the element matching css shows text containing want,
// and returns what it shows; ctx bounds the wait.
func (s *Session) WaitText(ctx context.Context, css, want string) (string, error) {
	var last string
	for {
		if t, err := s.Text(css); err == nil {
			last = t
			if strings.Contains(t, want) {
				return t, nil
			}
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("%q never showed %q (last %q): %w", css, want, last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Screenshot writes a PNG of the page to path.
func (s *Session) Screenshot(path string) error {
	var b64 string
	if err := s.do("GET", "/screenshot", nil, &b64); err != nil {
		return err
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

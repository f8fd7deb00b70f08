package proxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"testing"
	"time"
)

// startReflectUpstream is a TLS origin that hands the Authorization value it
// got back in every place a response has: header names and values, an
// informational response, the body, announced and unannounced trailers
// (/reflect, HTTP/1.1 or HTTP/2), and on HTTP/1.1 also the status line and
// raw chunked trailers the server writes itself (/raw).
func startReflectUpstream(t testing.TB) *secretUpstream {
	t.Helper()
	u := &secretUpstream{release: make(chan struct{})}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		u.mu.Lock()
		u.seen = append(u.seen, v)
		u.mu.Unlock()
		if r.URL.Path == "/raw" {
			reflectRaw(w, v)
			return
		}
		w.Header().Set("X-Early-"+v, v)
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("X-Early-" + v)
		w.Header().Set("X-Seen-"+v, v)
		w.Header().Set("Trailer", "X-Tr-Value, X-Tr-"+v)
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "body "+v+"\n")
		w.Header().Set("X-Tr-Value", v)
		w.Header().Set("X-Tr-"+v, v)
		w.Header().Set(http.TrailerPrefix+"X-Late-"+v, v)
		w.Header().Set(http.TrailerPrefix+"X-Late-Value", v)
	}))
	u.srv.EnableHTTP2 = true
	u.srv.StartTLS()
	t.Cleanup(u.srv.Close)
	u.port = portOf(t, u.srv.URL)
	u.pool = x509.NewCertPool()
	u.pool.AddCert(u.srv.Certificate())
	return u
}

// reflectRaw writes an HTTP/1.1 answer by hand, with v in the reason
// phrases, a header name, the body and undeclared trailers.
func reflectRaw(w http.ResponseWriter, v string) {
	c, bw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer c.Close()
	fmt.Fprintf(bw, "HTTP/1.1 103 Early %s\r\nLink-%s: %s\r\n\r\n", v, v, v)
	fmt.Fprintf(bw, "HTTP/1.1 200 OK %s\r\nX-Seen-%s: %s\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n", v, v, v)
	body := "raw " + v + "\n"
	fmt.Fprintf(bw, "%x\r\n%s\r\n0\r\nX-Raw-%s: %s\r\nX-Raw-Value: %s\r\n\r\n", len(body), body, v, v, v)
	bw.Flush()
}

// rawGuestGet sends one HTTP/1.1 request through the proxy to the bound host
// inside TLS from the run's CA and returns every byte the guest gets back.
func rawGuestGet(t *testing.T, tp *testProxy, roots *x509.CertPool, port int, path, ph string) string {
	t.Helper()
	rc := dialProxy(t, tp.addr)
	authority := fmt.Sprintf("api.example.com:%d", port)
	resp, _ := rc.do(t, "CONNECT", "CONNECT "+authority+" HTTP/1.1\r\nHost: "+authority+"\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT %d", resp.StatusCode)
	}
	tc := tls.Client(rc.Conn, &tls.Config{ServerName: "api.example.com", RootCAs: roots, NextProtos: []string{"http/1.1"}})
	fmt.Fprintf(tc, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nTE: trailers\r\nConnection: close\r\n\r\n", path, authority, ph)
	b, err := io.ReadAll(tc)
	if err != nil && len(b) == 0 {
		t.Fatal(err)
	}
	return string(b)
}

// noValueFold fails when s holds the value in any letter case: header
// names reach the client canonicalized.
func noValueFold(t *testing.T, what, s string) {
	t.Helper()
	if strings.Contains(strings.ToLower(s), strings.ToLower(apiValue)) {
		t.Fatalf("%s holds the secret value: %q", what, s)
	}
}

// The value a bound upstream reflects comes back as the placeholder in
// every place of the response, over HTTP/1.1 and HTTP/2: a header name,
// informational answers, the status line, announced and unannounced
// trailers, and the body.
func TestInjectReflectedEverywhere(t *testing.T) {
	u := startReflectUpstream(t)
	tp, set, _ := injectProxy(t, u)
	ph := set.Placeholder("API_KEY")
	roots := set.CA().Pool()

	for _, path := range []string{"/reflect", "/raw"} {
		t.Run("h1"+path, func(t *testing.T) {
			raw := rawGuestGet(t, tp, roots, u.port, path, ph)
			noValueFold(t, "HTTP/1.1 response", raw)
			if !strings.Contains(raw, "\r\n\r\n") || !strings.Contains(raw, " "+ph+"\n") {
				t.Fatalf("response lost its body: %q", raw)
			}
			if !strings.Contains(strings.ToLower(raw), "x-seen-"+ph) {
				t.Fatalf("header name not scrubbed back to the placeholder: %q", raw)
			}
			if !strings.Contains(raw, "\r\n0\r\n") || !strings.Contains(raw, "-Value: "+ph+"\r\n") {
				t.Fatalf("trailers not passed on scrubbed: %q", raw)
			}
		})
	}
	if seen := u.requests(); strings.Count(seen, apiValue) != 2 {
		t.Fatalf("upstream did not get the value: %q", seen)
	}

	t.Run("h2/reflect", func(t *testing.T) {
		c := guestClient(tp, roots, true)
		defer c.CloseIdleConnections()
		var early []string
		trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			early = append(early, fmt.Sprint(code, h))
			return nil
		}}
		req, _ := http.NewRequest("GET", fmt.Sprintf("https://api.example.com:%d/reflect", u.port), nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		req.Header.Set("Authorization", "Bearer "+ph)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("proto %s", resp.Proto)
		}
		var all strings.Builder
		fmt.Fprintf(&all, "%s\n", resp.Status)
		resp.Header.Write(&all)
		resp.Trailer.Write(&all)
		all.WriteString(strings.Join(early, "\n"))
		all.Write(body)
		noValueFold(t, "HTTP/2 response", all.String())
		if string(body) != "body "+ph+"\n" || resp.Header.Get("X-Seen-"+ph) != ph ||
			resp.Trailer.Get("X-Tr-Value") != ph || resp.Trailer.Get("X-Late-"+ph) != ph {
			t.Fatalf("not scrubbed back to the placeholder: %q", all.String())
		}
	})
}

// The hold-back of the body scrubber does not depend on what the held bytes
// are: an upstream that streams bytes the guest chose and then pauses
// releases as many of them to the guest before the pause ends when they are
// the start of the value as when they are not. Were it otherwise, the guest
// could learn the value a character at a time from the delay.
func TestInjectHoldBackIsBlind(t *testing.T) {
	u := &secretUpstream{release: make(chan struct{})}
	pause := make(chan struct{})
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "line\n"+r.URL.Query().Get("echo"))
		w.(http.Flusher).Flush()
		select {
		case <-pause:
		case <-r.Context().Done():
		}
		io.WriteString(w, "\nend\n")
	}))
	u.srv.StartTLS()
	t.Cleanup(u.srv.Close)
	u.port = portOf(t, u.srv.URL)
	u.pool = x509.NewCertPool()
	u.pool.AddCert(u.srv.Certificate())
	tp, set, _ := injectProxy(t, u)
	ph := set.Placeholder("API_KEY")

	// received is what the guest holds once the upstream has paused and the
	// proxy had ample time to pass on what it was going to, and how long
	// after the line the echoed bytes reached it.
	received := func(t *testing.T, echo string) (string, time.Duration) {
		c := guestClient(tp, set.CA().Pool(), false)
		defer c.CloseIdleConnections()
		req, _ := http.NewRequest("GET", fmt.Sprintf("https://api.example.com:%d/?echo=%s", u.port, echo), nil)
		req.Header.Set("Authorization", "Bearer "+ph)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got := make(chan string, 1)
		var delay time.Duration // read once got is closed
		go func() {
			br := bufio.NewReader(resp.Body)
			line, _ := br.ReadString('\n')
			lineAt := time.Now()
			b := []byte(line)
			got <- line
			for {
				c, err := br.ReadByte()
				if err != nil {
					break
				}
				b = append(b, c)
				if len(b) == len(line)+len(echo) {
					delay = time.Since(lineAt)
				}
				got <- string(b)
			}
			close(got)
		}()
		// The line ends in a control byte, so it always comes at once; then
		// the proxy gets two seconds, ample, to pass on what else it would.
		var last string
		select {
		case last = <-got:
		case <-time.After(20 * time.Second):
			t.Fatal("the first line never came")
		}
		deadline := time.After(2 * time.Second)
	wait:
		for {
			select {
			case s, ok := <-got:
				if !ok {
					break wait
				}
				last = s
			case <-deadline:
				break wait
			}
		}
		pause <- struct{}{}
		for range got {
		}
		return last, delay
	}
	match, dm := received(t, apiValue[:6])
	other, do := received(t, "zz"+apiValue[2:6])
	t.Logf("the echoed bytes reached the guest %v after the line when they began the value, %v when not", dm.Round(time.Millisecond), do.Round(time.Millisecond))
	if len(match) != len(other) {
		t.Fatalf("before the pause the guest got %d bytes after a prefix of the value (%q) and %d after another string (%q)", len(match), match, len(other), other)
	}
}

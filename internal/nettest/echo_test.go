package nettest

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// HTTPSEcho keeps what it received and answers with the same, over HTTP/2 and
// HTTP/1.1 alike.
func TestHTTPSEcho(t *testing.T) {
	e := NewHTTPSEcho(t)
	for _, h2 := range []bool{true, false} {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: e.Roots()}, ForceAttemptHTTP2: h2}
		req, _ := http.NewRequest("GET", fmt.Sprintf("https://127.0.0.1:%d/p?k=v", e.Port()), nil)
		req.Header.Set("X-Test", fmt.Sprint(h2))
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		tr.CloseIdleConnections()
		want := "/p?k=v\n"
		if (resp.ProtoMajor == 2) != h2 || !strings.Contains(string(body), want) || !strings.Contains(string(body), "X-Test: "+fmt.Sprint(h2)) {
			t.Fatalf("h2=%v: %s answered %q", h2, resp.Proto, body)
		}
		if !strings.Contains(e.Requests(), "X-Test: "+fmt.Sprint(h2)) {
			t.Fatalf("h2=%v: not recorded: %q", h2, e.Requests())
		}
	}
}

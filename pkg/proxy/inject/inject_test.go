package inject

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
)

const (
	valA = "sk-live-AAAA1111"
	valB = "ghp_BBBB22223333"
)

func testSet(t testing.TB) *Set {
	t.Helper()
	s, err := New([]Secret{
		{Name: "API_KEY", Hosts: []string{"api.test"}, Value: valA},
		{Name: "GH_TOKEN", Hosts: []string{"git.test", "API.test"}, Value: valB},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewRefusesBadSecrets(t *testing.T) {
	for _, tc := range []struct {
		name string
		sec  Secret
	}{
		{"bad name", Secret{Name: "A-B", Hosts: []string{"x.test"}, Value: valA}},
		{"short value", Secret{Name: "A", Hosts: []string{"x.test"}, Value: "short"}},
		{"no host", Secret{Name: "A", Value: valA}},
		{"control byte", Secret{Name: "A", Hosts: []string{"x.test"}, Value: valA + "\n"}},
		{"wildcard", Secret{Name: "A", Hosts: []string{"*.x.test"}, Value: valA}},
		{"ip", Secret{Name: "A", Hosts: []string{"10.0.0.1"}, Value: valA}},
	} {
		if _, err := New([]Secret{tc.sec}); !errors.Is(err, ErrBadSecret) {
			t.Errorf("%s: err = %v, want ErrBadSecret", tc.name, err)
		}
	}
}

func TestPlaceholdersAreRandom(t *testing.T) {
	a, b := testSet(t), testSet(t)
	pa, pb := a.Placeholder("API_KEY"), b.Placeholder("API_KEY")
	if pa == pb || !strings.HasPrefix(pa, placeholderPrefix) || strings.Contains(pa, valA) {
		t.Fatalf("placeholders %q %q", pa, pb)
	}
	env := strings.Join(a.Env(), "\n")
	if strings.Contains(env, valA) || strings.Contains(env, valB) || !strings.Contains(env, "API_KEY="+pa) {
		t.Fatalf("env %q", env)
	}
}

func request(t *testing.T, rawURL string, h map[string]string) *http.Request {
	t.Helper()
	r, err := http.NewRequest("GET", rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return r
}

func TestRewrite(t *testing.T) {
	s := testSet(t)
	pA, pB := s.Placeholder("API_KEY"), s.Placeholder("GH_TOKEN")
	basic := func(u, p string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(u+":"+p)) }
	for _, tc := range []struct {
		name, host, url string
		hdr             map[string]string
		wantHdr         map[string]string
		wantQuery       string
		exfil           string
	}{
		{name: "bearer", host: "api.test", url: "https://api.test/v1",
			hdr: map[string]string{"Authorization": "Bearer " + pA}, wantHdr: map[string]string{"Authorization": "Bearer " + valA}},
		{name: "any header, upper case", host: "api.test", url: "https://api.test/",
			hdr: map[string]string{"X-Api-Key": strings.ToUpper(pA)}, wantHdr: map[string]string{"X-Api-Key": valA}},
		{name: "two secrets bound to one host", host: "api.test", url: "https://api.test/",
			hdr: map[string]string{"A": pA, "B": pB}, wantHdr: map[string]string{"A": valA, "B": valB}},
		{name: "basic", host: "git.test", url: "https://git.test/r.git",
			hdr: map[string]string{"Authorization": basic("x", pB)}, wantHdr: map[string]string{"Authorization": basic("x", valB)}},
		{name: "query", host: "api.test", url: "https://api.test/q?key=" + pA + "&a=1", wantQuery: "key=" + valA + "&a=1"},
		{name: "path is not rewritten", host: "api.test", url: "https://api.test/" + pA, wantQuery: ""},
		{name: "secret not bound to host", host: "git.test", url: "https://git.test/",
			hdr: map[string]string{"Authorization": "Bearer " + pA}, exfil: "API_KEY"},
		{name: "unbound in basic", host: "git.test", url: "https://git.test/",
			hdr: map[string]string{"Authorization": basic(pA, "x")}, exfil: "API_KEY"},
		{name: "unbound in query", host: "git.test", url: "https://git.test/?k=" + pA, exfil: "API_KEY"},
		{name: "unbound in path", host: "git.test", url: "https://git.test/" + pA, exfil: "API_KEY"},
		{name: "unbound in header name", host: "git.test", url: "https://git.test/",
			hdr: map[string]string{"X-" + pA: "1"}, exfil: "API_KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := request(t, tc.url, tc.hdr)
			pairs, err := s.Rewrite(tc.host, r)
			if tc.exfil != "" {
				var ee *ExfilError
				if !errors.As(err, &ee) || ee.Name != tc.exfil {
					t.Fatalf("err = %v, want exfiltration of %s", err, tc.exfil)
				}
				if strings.Contains(ee.Error(), valA) || strings.Contains(ee.Error(), valB) {
					t.Fatal("error text holds a value")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.wantHdr {
				if got := r.Header.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if r.URL.RawQuery != tc.wantQuery {
				t.Errorf("query %q, want %q", r.URL.RawQuery, tc.wantQuery)
			}
			// Whatever was sent, an echo of it scrubs back to what the guest sent.
			var sent bytes.Buffer
			r.Header.Write(&sent)
			sent.WriteString(r.URL.String())
			back, _ := io.ReadAll(NewScrubber(&sent, pairs))
			if bytes.Contains(back, []byte(valA)) || bytes.Contains(back, []byte(valB)) ||
				bytes.Contains(back, []byte(base64.StdEncoding.EncodeToString([]byte("x:"+valB)))) {
				t.Errorf("echo scrubbed to %q, still holds a value", back)
			}
		})
	}
}

func TestFind(t *testing.T) {
	s := testSet(t)
	pA := s.Placeholder("API_KEY")
	for _, tc := range []struct{ text, want string }{
		{"api.test:443", ""},
		{pA + ".evil.test", "API_KEY"},
		{strings.ToUpper(pA) + ".evil.test:443", "API_KEY"},
		{"x." + s.Placeholder("GH_TOKEN"), "GH_TOKEN"},
		{placeholderPrefix + "00", ""},
	} {
		if got := s.Find(tc.text); got != tc.want {
			t.Errorf("Find(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
	var empty *Set
	if empty.Find(pA) != "" || empty.Bound("api.test") {
		t.Fatal("nil set finds something")
	}
	if !s.Bound("api.test") || !s.Bound("git.test") || s.Bound("other.test") {
		t.Fatal("Bound")
	}
}

func TestScrubHeader(t *testing.T) {
	s := testSet(t)
	h := http.Header{"X-Echo": {"Bearer " + valA}, "Set-Cookie": {"t=" + valB + "; Path=/"}}
	h.Set("X-Seen-"+valA, "1")
	ScrubHeader(h, s.valuePairs())
	var all strings.Builder
	h.Write(&all)
	if low := strings.ToLower(all.String()); strings.Contains(low, strings.ToLower(valA)) || strings.Contains(low, strings.ToLower(valB)) ||
		h.Get("X-Echo") != "Bearer "+s.Placeholder("API_KEY") || h.Get("X-Seen-"+s.Placeholder("API_KEY")) != "1" {
		t.Fatalf("headers %v", h)
	}
}

func TestScrubber(t *testing.T) {
	pairs := []Pair{{Sent: "SECRETVALUE", Guest: "ph1"}, {Sent: "SECRET", Guest: "ph2"}, {Sent: "xyzxyz", Guest: "P"}}
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"nothing here", "nothing here"},
		{"a SECRETVALUE b", "a ph1 b"},
		{"SECRETVALUESECRET", "ph1ph2"},
		{"SECRETVALU", "ph2VALU"},
		{"xyzxyzxyz", "Pxyz"},
		{"SECRETVALUE", "ph1"},
	} {
		for _, r := range []func(io.Reader) io.Reader{
			func(r io.Reader) io.Reader { return r }, iotest.OneByteReader, iotest.HalfReader, iotest.DataErrReader,
		} {
			got, err := io.ReadAll(NewScrubber(r(strings.NewReader(tc.in)), pairs))
			if err != nil || string(got) != tc.want {
				t.Errorf("scrub(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		}
	}
}

// A scrubber returns what it can decide without waiting for the end of the
// stream: a server-sent event is delivered while the stream stays open.
func TestScrubberStreams(t *testing.T) {
	pr, pw := io.Pipe()
	sc := NewScrubber(pr, []Pair{{Sent: "SECRETVALUE", Guest: "ph"}})
	go pw.Write([]byte("data: hello SECRETVALUE and more\n\n"))
	buf := make([]byte, 100)
	got := ""
	for !strings.Contains(got, "more\n\n") {
		n, err := sc.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got += string(buf[:n])
	}
	if got != "data: hello ph and more\n\n" {
		t.Fatalf("got %q before the stream ended", got)
	}
	pw.Close()
}

func TestErrorPropagates(t *testing.T) {
	boom := errors.New("boom")
	_, err := io.ReadAll(NewScrubber(io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom)), []Pair{{Sent: "SECRETVALUE", Guest: "x"}}))
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
}

// FuzzScrubberChunks splits a stream at arbitrary points: the output never
// holds a value and equals scrubbing the whole input at once.
func FuzzScrubberChunks(f *testing.F) {
	f.Add([]byte("head SECRETVALUE tail"), uint8(3), uint8(7))
	f.Add([]byte("SECRETSECRETVALUESECRETVALU"), uint8(1), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, a, b uint8) {
		pairs := []Pair{{Sent: "SECRETVALUE", Guest: "[1]"}, {Sent: "ETVALUE00", Guest: "[2]"}}
		whole := string(data)
		want := ""
		for whole != "" {
			i, j := strings.Index(whole, "SECRETVALUE"), strings.Index(whole, "ETVALUE00")
			switch {
			case i < 0 && j < 0:
				want += whole
				whole = ""
			case j < 0 || i >= 0 && i <= j:
				want += whole[:i] + "[1]"
				whole = whole[i+11:]
			default:
				want += whole[:j] + "[2]"
				whole = whole[j+9:]
			}
		}
		r := &chunkReader{data: data, sizes: []int{int(a)%13 + 1, int(b)%5 + 1}}
		// The caller's buffer sizes vary too: a scrubber reads straight into them.
		sc := NewScrubber(r, pairs)
		var got []byte
		for i := 0; ; i++ {
			buf := make([]byte, []int{int(b)%11 + 1, int(a)%3 + 1, 64}[i%3])
			n, err := sc.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if string(got) != want {
			t.Fatalf("chunked scrub %q != whole scrub %q", got, want)
		}
		if bytes.Contains(got, []byte("SECRETVALUE")) && !bytes.Contains(data, []byte("SECRETVALUE")) {
			t.Fatal("value invented")
		}
	})
}

type chunkReader struct {
	data  []byte
	sizes []int
	i     int
}

func (c *chunkReader) Read(b []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(c.sizes[c.i%len(c.sizes)], len(c.data), len(b))
	c.i++
	copy(b, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func TestCALeaf(t *testing.T) {
	s := testSet(t)
	l1, err := s.CA().Leaf("api.test")
	if err != nil {
		t.Fatal(err)
	}
	l2, _ := s.CA().Leaf("api.test")
	if l1 != l2 {
		t.Fatal("leaf not cached")
	}
	cert, _ := x509.ParseCertificate(l1.Certificate[0])
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "api.test", Roots: s.CA().Pool()}); err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "other.test", Roots: s.CA().Pool()}); err == nil {
		t.Fatal("leaf valid for another name")
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "api.test", Roots: testSet(t).CA().Pool()}); err == nil {
		t.Fatal("leaf valid under another run's CA")
	}
	cfg, _ := s.CA().ServerConfig("api.test")
	if cfg.MinVersion != tls.VersionTLS12 {
		t.Fatal("min version")
	}
}

// FuzzIndexAnchored: the anchored search finds what bytes.Index finds.
func FuzzIndexAnchored(f *testing.F) {
	f.Add([]byte("abc sk-live-X_1 sk-live-X_2"), "sk-live-X_2")
	f.Add([]byte("aaaa-aaa-a"), "a-a")
	f.Fuzz(func(t *testing.T, b []byte, sent string) {
		if sent == "" {
			return
		}
		if got, want := indexAnchored(b, sent, anchor(sent)), bytes.Index(b, []byte(sent)); got != want {
			t.Fatalf("indexAnchored(%q, %q) = %d, want %d", b, sent, got, want)
		}
	})
}

// pausingReader returns its chunk, then blocks until closed, telling paused
// once it blocks: by then the scrubber has returned all it would release.
type pausingReader struct {
	chunk  []byte
	paused chan struct{}
	resume chan struct{}
}

func (p *pausingReader) Read(b []byte) (int, error) {
	if len(p.chunk) > 0 {
		n := copy(b, p.chunk)
		p.chunk = p.chunk[n:]
		return n, nil
	}
	close(p.paused)
	<-p.resume
	return 0, io.EOF
}

// released is how many bytes of chunk a scrubber returns before its source
// pauses, read with buffers of size bufSize.
func released(t *testing.T, chunk string, pairs []Pair, bufSize int) int {
	t.Helper()
	src := &pausingReader{chunk: []byte(chunk), paused: make(chan struct{}), resume: make(chan struct{})}
	sc := NewScrubber(src, pairs)
	var mu sync.Mutex
	got := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, bufSize)
		for {
			n, err := sc.Read(buf)
			mu.Lock()
			got += n
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	<-src.paused
	mu.Lock()
	n := got
	mu.Unlock()
	close(src.resume)
	<-done
	return n
}

// The bytes a scrubber holds back while its source pauses are as many when
// they begin a value as when they do not, whatever the read size, so the
// delay tells a guest nothing about the value.
func TestScrubberHoldIsBlind(t *testing.T) {
	pairs := []Pair{{Sent: valA, Guest: "ph1"}, {Sent: valB, Guest: "ph2"}}
	for k := 1; k < len(valA); k++ {
		for _, head := range []string{"", "head ", "line\n", strings.Repeat("x", 100)} {
			for _, size := range []int{7, 64, 32 << 10} {
				match := released(t, head+valA[:k], pairs, size)
				other := released(t, head+strings.Repeat("#", k), pairs, size)
				if match != other {
					t.Fatalf("head %q, %d bytes, reads of %d: %d released of a prefix of the value, %d of another string", head, k, size, match, other)
				}
			}
		}
	}
	// A control byte, which no value holds, ends the hold: a line is whole.
	if n := released(t, "data: x\n\n", pairs, 64); n != 9 {
		t.Fatalf("released %d bytes of an event, want all 9", n)
	}
}

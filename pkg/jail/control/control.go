// Package control is the wire protocol between the host (pkg/jail) and guest-init.
//
// One byte stream (the virtio-serial port pkg/jail gives every guest; guest-init can
// also dial vsock, which the host does not offer) carries a yamux session. Every yamux stream starts with a single JSON
// header line naming its kind; after the header the stream is raw bytes, except the
// "ctl" stream, which carries newline-delimited JSON messages in both directions.
//
// The host opens: ctl (exactly one, first), stdin, stdout, stderr.
// The guest opens: proxy (one per TCP connection a guest program makes to the in-guest
// proxy listener in proxy-only mode) and mcp (one per connection to the in-guest MCP
// socket). The host decides what each guest-opened stream may reach; nothing in a
// header from the guest widens that.
package control

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hashicorp/yamux"
)

// Stream kinds.
const (
	KindCtl    = "ctl"
	KindStdin  = "stdin"
	KindStdout = "stdout"
	KindStderr = "stderr"
	KindProxy  = "proxy"
	KindMCP    = "mcp"
	// KindShare prefixes a 9p share stream: "share:" + the share's tag.
	KindShare = "share:"
	// KindSync prefixes the one stream a share synced at exit hands its changes back
	// on: "sync:" + the share's tag (pkg/jail/sharefs's changes stream).
	KindSync = "sync:"
)

// ErrBadHeader is returned when a stream does not start with a valid header line.
var ErrBadHeader = errors.New("control: bad stream header")

// headerTimeout bounds how long a new stream may take to send its header.
const headerTimeout = 10 * time.Second

// maxHeader bounds a header line so a hostile peer cannot make the reader buffer forever.
const maxHeader = 4096

// Header is the first line of every stream.
type Header struct {
	Kind string `json:"kind"`
}

func yamuxConfig() *yamux.Config {
	c := yamux.DefaultConfig()
	c.LogOutput = io.Discard
	c.EnableKeepAlive = false // the guest may be paused (TCG, snapshot); liveness comes from QEMU
	c.ConnectionWriteTimeout = 30 * time.Second
	c.MaxStreamWindowSize = 1 << 20
	return c
}

// Client starts the host side of a session on rw, the side that must hold against a
// hostile peer.
func Client(rw io.ReadWriteCloser) (*yamux.Session, error) {
	c := yamuxConfig()
	// A stream the host closed that the guest keeps open still holds what the guest
	// sends into its window; it is reset after this, not the default 5 minutes.
	c.StreamCloseTimeout = time.Minute
	s, err := yamux.Client(dropPings(rw), c)
	if err != nil {
		return nil, fmt.Errorf("control: client session: %w", err)
	}
	return s, nil
}

// Server starts the guest side of a session on rw.
func Server(rw io.ReadWriteCloser) (*yamux.Session, error) {
	s, err := yamux.Server(rw, yamuxConfig())
	if err != nil {
		return nil, fmt.Errorf("control: server session: %w", err)
	}
	return s, nil
}

// Open opens a stream of the given kind.
func Open(s *yamux.Session, kind string) (net.Conn, error) {
	st, err := s.OpenStream()
	if err != nil {
		return nil, fmt.Errorf("control: open %s: %w", kind, err)
	}
	b, _ := json.Marshal(Header{Kind: kind})
	if _, err := st.Write(append(b, '\n')); err != nil {
		st.Close()
		return nil, fmt.Errorf("control: write %s header: %w", kind, err)
	}
	return st, nil
}

// Accept waits for the peer to open a stream and returns its kind. The returned conn
// yields the bytes after the header.
func Accept(s *yamux.Session) (string, net.Conn, error) {
	st, err := s.AcceptStream()
	if err != nil {
		return "", nil, fmt.Errorf("control: accept: %w", err)
	}
	// A peer that opens a stream and never sends its header must not stall the accept
	// loop behind it.
	st.SetReadDeadline(time.Now().Add(headerTimeout))
	br := bufio.NewReaderSize(st, 256)
	var line []byte
	for {
		chunk, isPrefix, err := br.ReadLine()
		if err != nil {
			st.Close()
			return "", nil, fmt.Errorf("%w: %v", ErrBadHeader, err)
		}
		line = append(line, chunk...)
		if len(line) > maxHeader {
			st.Close()
			return "", nil, fmt.Errorf("%w: longer than %d bytes", ErrBadHeader, maxHeader)
		}
		if !isPrefix {
			break
		}
	}
	st.SetReadDeadline(time.Time{})
	var h Header
	if err := json.Unmarshal(line, &h); err != nil || h.Kind == "" {
		st.Close()
		return "", nil, fmt.Errorf("%w: %q", ErrBadHeader, line)
	}
	return h.Kind, &bufferedConn{Conn: st, r: br}, nil
}

// bufferedConn keeps the bytes the header reader already pulled off the stream.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// CloseWrite half-closes the stream so the peer sees EOF while it can still reply.
func (c *bufferedConn) CloseWrite() error { return CloseWrite(c.Conn) }

// CloseWrite half-closes a stream returned by Open or Accept.
func CloseWrite(c net.Conn) error {
	switch v := c.(type) {
	case *bufferedConn:
		return CloseWrite(v.Conn)
	case *yamux.Stream:
		// yamux's Close sends FIN but keeps the receive side open until the peer's FIN.
		return v.Close()
	case interface{ CloseWrite() error }:
		return v.CloseWrite()
	}
	return c.Close()
}

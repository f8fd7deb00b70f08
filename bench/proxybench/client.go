package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// target is one way of reaching the upstream: directly, or through a proxy
// with CONNECT.
type target struct {
	Name  string `json:"name"`
	Proxy string `json:"proxy,omitempty"` // proxy address; empty = direct
	Host  string `json:"host,omitempty"`  // CONNECT host name
	PID   int    `json:"pid,omitempty"`   // proxy process, for RSS and CPU
	// Baseline marks an earlier build of the subject, run for a before/after
	// comparison; it is not one of the other proxies the subject is ranked against.
	Baseline bool `json:"baseline,omitempty"`
}

func (t target) direct() bool { return t.Proxy == "" }

// tunnel is an established byte stream to the upstream. Reads go through br
// so bytes a proxy sent right after its CONNECT answer are not lost.
type tunnel struct {
	net.Conn
	br *bufio.Reader
}

func (t *tunnel) Read(p []byte) (int, error) { return t.br.Read(p) }

var errRefused = errors.New("connect refused")

// open dials the target and, through a proxy, completes a CONNECT to
// host:port of the upstream.
func open(t target, upstream string, deadline time.Time) (*tunnel, error) {
	addr := upstream
	if !t.direct() {
		addr = t.Proxy
	}
	d := net.Dialer{Deadline: deadline}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(deadline)
	tn := &tunnel{Conn: c, br: bufio.NewReaderSize(c, 4096)}
	if t.direct() {
		return tn, nil
	}
	_, port, _ := net.SplitHostPort(upstream)
	auth := net.JoinHostPort(t.Host, port)
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", auth, auth); err != nil {
		c.Close()
		return nil, err
	}
	status, err := tn.br.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("read connect answer: %w", err)
	}
	var why []string
	for {
		line, err := tn.br.ReadString('\n')
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("read connect headers: %w", err)
		}
		if line == "\r\n" || line == "\n" {
			break
		}
		// Each proxy names its reason in its own header.
		if k, v, ok := strings.Cut(line, ":"); ok && (strings.EqualFold(k, "X-Crackbox-Error") || strings.EqualFold(k, "X-Squid-Error")) {
			why = append(why, strings.TrimSpace(v))
		}
	}
	f := strings.Fields(status)
	if len(f) < 2 || f[1] != "200" {
		c.Close()
		return nil, fmt.Errorf("%w: %s %s", errRefused, strings.TrimSpace(status), strings.Join(why, " "))
	}
	return tn, nil
}

// download asks the upstream for n bytes and reads them to EOF.
func download(t target, upstream string, n int64, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	tn, err := open(t, upstream, start.Add(timeout))
	if err != nil {
		return 0, err
	}
	defer tn.Close()
	var req [9]byte
	req[0] = cmdDownload
	binary.BigEndian.PutUint64(req[1:], uint64(n))
	if _, err := tn.Write(req[:]); err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	var got int64
	for {
		r, err := tn.Read(buf)
		got += int64(r)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("after %d bytes: %w", got, err)
		}
	}
	if got != n {
		return 0, fmt.Errorf("got %d bytes, want %d", got, n)
	}
	return time.Since(start), nil
}

var echoPayload = []byte("crackbox-proxybench-0123456789abcdef")

// roundTrip is one short-lived tunnel: open, one echo, close. It returns
// the time from the dial to the echo's last byte.
func roundTrip(t target, upstream string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	tn, err := open(t, upstream, start.Add(timeout))
	if err != nil {
		return 0, err
	}
	defer tn.Close()
	msg := append([]byte{cmdEcho, byte(len(echoPayload))}, echoPayload...)
	if _, err := tn.Write(msg); err != nil {
		return 0, err
	}
	got := make([]byte, len(echoPayload))
	if _, err := io.ReadFull(tn, got); err != nil {
		return 0, fmt.Errorf("read echo: %w", err)
	}
	if !bytes.Equal(got, echoPayload) {
		return 0, errors.New("echo mismatch")
	}
	return time.Since(start), nil
}

// hold opens a tunnel the upstream keeps open, and waits until the upstream
// has seen it, so the proxy holds both of its sockets when this returns.
func hold(t target, upstream string, timeout time.Duration) (*tunnel, error) {
	tn, err := open(t, upstream, time.Now().Add(timeout))
	if err != nil {
		return nil, err
	}
	if _, err := tn.Write([]byte{cmdHold}); err != nil {
		tn.Close()
		return nil, err
	}
	var ack [1]byte
	if _, err := io.ReadFull(tn, ack[:]); err != nil || ack[0] != 'h' {
		tn.Close()
		return nil, fmt.Errorf("hold ack: %v", err)
	}
	tn.SetDeadline(time.Time{})
	return tn, nil
}

package relay

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// pair returns two ends of one real connection on network ("tcp" on loopback or "unix").
func pair(t *testing.T, network string) (client, server net.Conn) {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), "s")
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial(network, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// relayed starts Copy between two real connections and returns the outer ends: x talks
// to the relay's a side, y to its b side; the channel closes when Copy returns.
func relayed(t *testing.T, ctx context.Context, network string, mode Mode) (x, y net.Conn, returned chan struct{}) {
	x, a := pair(t, network)
	b, y := pair(t, network)
	returned = make(chan struct{})
	go func() { Copy(ctx, a, b, mode); close(returned) }()
	x.SetDeadline(time.Now().Add(10 * time.Second))
	y.SetDeadline(time.Now().Add(10 * time.Second))
	return x, y, returned
}

func waitReturn(t *testing.T, returned chan struct{}) {
	t.Helper()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("Copy did not return")
	}
}

func TestCopyEndOfStream(t *testing.T) {
	for _, tc := range []struct {
		network string
		mode    Mode
		// answer is what x reads after it half-closed and y answered.
		answer string
	}{
		{"tcp", HalfClose, "pong"},
		{"unix", HalfClose, "pong"},
		{"tcp", CloseBoth, ""},
		{"unix", CloseBoth, ""},
	} {
		name := map[Mode]string{HalfClose: "halfclose", CloseBoth: "closeboth"}[tc.mode]
		t.Run(tc.network+"/"+name, func(t *testing.T) {
			x, y, returned := relayed(t, context.Background(), tc.network, tc.mode)
			if _, err := x.Write([]byte("ping")); err != nil {
				t.Fatal(err)
			}
			x.(interface{ CloseWrite() error }).CloseWrite()
			got, err := io.ReadAll(y)
			if string(got) != "ping" || err != nil {
				t.Fatalf("far side read %q, %v; want ping then EOF", got, err)
			}
			y.Write([]byte("pong"))
			y.(interface{ CloseWrite() error }).CloseWrite()
			got, err = io.ReadAll(x)
			if string(got) != tc.answer {
				t.Fatalf("near side read %q (%v) after its half-close, want %q", got, err, tc.answer)
			}
			waitReturn(t, returned)
		})
	}
}

func TestCopyEndsWithContext(t *testing.T) {
	for _, network := range []string{"tcp", "unix"} {
		for _, mode := range []Mode{HalfClose, CloseBoth} {
			t.Run(fmt.Sprint(network, "/", mode), func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				x, y, returned := relayed(t, ctx, network, mode)
				x.Write([]byte("hi"))
				buf := make([]byte, 2)
				if _, err := io.ReadFull(y, buf); err != nil || string(buf) != "hi" {
					t.Fatalf("relay before cancel: %q, %v", buf, err)
				}
				cancel()
				waitReturn(t, returned)
				for _, c := range []net.Conn{x, y} {
					if n, err := c.Read(buf); err == nil {
						t.Fatalf("read %d bytes after cancel, want the relay closed", n)
					} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
						t.Fatal("side still open after cancel")
					}
				}
			})
		}
	}
}

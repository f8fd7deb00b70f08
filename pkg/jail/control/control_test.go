package control

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
)

func pair(t *testing.T) (client, server *yamux.Session) {
	t.Helper()
	a, b := net.Pipe()
	c, err := Client(a)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Server(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

func TestStreamHeaderAndHalfClose(t *testing.T) {
	c, s := pair(t)
	type accepted struct {
		kind string
		conn net.Conn
		err  error
	}
	got := make(chan accepted, 1)
	go func() {
		k, conn, err := Accept(s)
		got <- accepted{k, conn, err}
	}()
	st, err := Open(c, KindStdout)
	if err != nil {
		t.Fatal(err)
	}
	// Payload written right behind the header must not be swallowed by the header reader.
	if _, err := st.Write([]byte("payload")); err != nil {
		t.Fatal(err)
	}
	if err := CloseWrite(st); err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.err != nil || a.kind != KindStdout {
		t.Fatalf("accept = %q, %v", a.kind, a.err)
	}
	b, err := io.ReadAll(a.conn)
	if err != nil || string(b) != "payload" {
		t.Fatalf("read %q, %v", b, err)
	}
	// The reader can still answer after the writer's half-close.
	go func() {
		a.conn.Write([]byte("answer"))
		CloseWrite(a.conn)
	}()
	b, err = io.ReadAll(st)
	if err != nil || string(b) != "answer" {
		t.Fatalf("reply %q, %v", b, err)
	}
}

func TestAcceptRejectsBadHeaders(t *testing.T) {
	cases := []struct {
		name   string
		header string
	}{
		{"not json", "hello\n"},
		{"no kind", "{}\n"},
		{"too long", `{"kind":"` + strings.Repeat("x", maxHeader+10) + "\"}\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, s := pair(t)
			errc := make(chan error, 1)
			go func() {
				_, _, err := Accept(s)
				errc <- err
			}()
			st, err := c.OpenStream()
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				st.Write([]byte(tc.header))
				st.Close()
			}()
			select {
			case err := <-errc:
				if !errors.Is(err, ErrBadHeader) {
					t.Fatalf("err = %v, want ErrBadHeader", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Accept did not return")
			}
		})
	}
}

func TestConnMessages(t *testing.T) {
	c, s := pair(t)
	go func() {
		st, err := Open(c, KindCtl)
		if err != nil {
			return
		}
		conn := NewConn(st)
		conn.Send(Message{Type: MsgRun, Run: &RunSpec{Argv: []string{"echo", "hi"}, UID: 1000, Net: Net{Mode: "none"}}})
		conn.Send(Message{Type: MsgResize, Rows: 24, Cols: 80})
	}()
	kind, st, err := Accept(s)
	if err != nil || kind != KindCtl {
		t.Fatalf("accept %q, %v", kind, err)
	}
	conn := NewConn(st)
	m, err := conn.Recv()
	if err != nil || m.Type != MsgRun || m.Run == nil || m.Run.Argv[1] != "hi" || m.Run.UID != 1000 {
		t.Fatalf("first message %+v, %v", m, err)
	}
	m, err = conn.Recv()
	if err != nil || m.Type != MsgResize || m.Rows != 24 || m.Cols != 80 {
		t.Fatalf("second message %+v, %v", m, err)
	}
}

func TestConnRejectsOversizedMessage(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		// A peer streaming one endless line, never a newline.
		chunk := []byte(`{"type":"log","text":"` + strings.Repeat("x", 64<<10))
		for {
			if _, err := a.Write(chunk); err != nil {
				return
			}
		}
	}()
	_, err := NewConn(b).Recv()
	if !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("err = %v, want ErrMessageTooLarge", err)
	}
}

func TestConnReportsEOFAndGarbage(t *testing.T) {
	for _, in := range []string{"", "not json\n", `{"type":"run"`} {
		a, b := net.Pipe()
		go func() { a.Write([]byte(in)); a.Close() }()
		if _, err := NewConn(b).Recv(); err == nil {
			t.Errorf("%q: Recv succeeded", in)
		}
		b.Close()
	}
}

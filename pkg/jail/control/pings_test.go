package control

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
	"testing"
	"testing/iotest"
	"time"
)

func frame(typ byte, flags uint16, stream, length uint32, payload []byte) []byte {
	h := make([]byte, frameHeader, frameHeader+len(payload))
	h[1] = typ
	binary.BigEndian.PutUint16(h[2:], flags)
	binary.BigEndian.PutUint32(h[4:], stream)
	binary.BigEndian.PutUint32(h[8:], length)
	return append(h, payload...)
}

// typeWindowUpdate opens a stream when it carries flagSYN.
const typeWindowUpdate = 1

type rwc struct{ io.Reader }

func (rwc) Write(p []byte) (int, error) { return len(p), nil }
func (rwc) Close() error                { return nil }

// Only ping requests go; a data frame whose payload looks like a ping stays whole.
func TestDropPingsKeepsEveryOtherFrame(t *testing.T) {
	pingSYN := frame(typePing, flagSYN, 0, 7, nil)
	data := frame(typeData, 0, 3, uint32(2*len(pingSYN)), append(append([]byte{}, pingSYN...), pingSYN...))
	pingACK := frame(typePing, 2, 0, 9, nil)
	window := frame(typeWindowUpdate, flagSYN, 5, 1<<18, nil)
	var in, want bytes.Buffer
	for _, f := range []struct {
		b    []byte
		kept bool
	}{{pingSYN, false}, {data, true}, {pingSYN, false}, {pingACK, true}, {window, true}, {pingSYN, false}} {
		in.Write(f.b)
		if f.kept {
			want.Write(f.b)
		}
	}
	got, err := io.ReadAll(dropPings(rwc{iotest.OneByteReader(&in)}))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("filtered stream\n got %x\nwant %x", got, want.Bytes())
	}
}

// A hostile guest stops reading its end of the control channel and sends ping after
// ping. Without the filter yamux answers each from a goroutine waiting on the stalled
// send loop: 12 bytes from the guest bought a goroutine on the host. After the flood
// the session still carries streams.
func TestGuestPingFloodCostsTheHostNothing(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	fc := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "end")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	hostEnd, guestEnd := fc(fds[0]), fc(fds[1])
	defer guestEnd.Close()
	before := runtime.NumGoroutine()
	sess, err := Client(hostEnd)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()

	const pings = 200000
	buf := make([]byte, 0, frameHeader*pings)
	for i := range pings {
		buf = append(buf, frame(typePing, flagSYN, 0, uint32(i), nil)...)
	}
	guestEnd.SetWriteDeadline(time.Now().Add(20 * time.Second))
	if _, err := guestEnd.Write(buf); err != nil {
		t.Fatalf("guest write: %v", err)
	}
	// yamux reads frames in order, so once the stream the guest opens after the flood
	// is accepted, every ping before it has been handled (its answer's goroutine, if
	// any, started). The stream's ID is one the guest's own session will never pick.
	guestEnd.Write(frame(typeWindowUpdate, flagSYN, 1<<30, 0, nil))
	marker, acceptErr := sess.AcceptStream()
	if n := runtime.NumGoroutine() - before; n > 100 {
		t.Fatalf("%d host goroutines after %d guest pings the guest never reads the answers to, want a bound", n, pings)
	}
	if acceptErr != nil {
		t.Fatalf("accept the stream opened after the flood: %v", acceptErr)
	}
	defer marker.Close()

	guest, err := Server(guestEnd)
	if err != nil {
		t.Fatal(err)
	}
	defer guest.Close()
	c, err := Open(guest, KindProxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("hi"))
	kind, hc, err := Accept(sess)
	if err != nil || kind != KindProxy {
		t.Fatalf("accept after the flood: kind %q err %v", kind, err)
	}
	got := make([]byte, 2)
	hc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(hc, got); err != nil || string(got) != "hi" {
		t.Fatalf("stream after the flood read %q, %v", got, err)
	}
}

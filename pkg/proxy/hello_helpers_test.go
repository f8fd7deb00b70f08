package proxy

import (
	"encoding/binary"
	"net"
	"sync"
	"time"
)

// buildClientHello returns a ClientHello handshake message (4-byte header
// included) naming sni (none if empty), padded with a padding extension so
// the message body is at least bodyLen bytes.
func buildClientHello(sni string, bodyLen int) []byte {
	var body []byte
	body = append(body, 3, 3)
	body = append(body, make([]byte, 32)...) // random
	body = append(body, 32)
	body = append(body, make([]byte, 32)...) // session id
	body = append(body, 0, 4, 0x13, 0x01, 0x13, 0x02)
	body = append(body, 1, 0)
	var ext []byte
	if sni != "" {
		name := []byte(sni)
		e := binary.BigEndian.AppendUint16(nil, uint16(len(name)+3))
		e = append(e, 0)
		e = binary.BigEndian.AppendUint16(e, uint16(len(name)))
		e = append(e, name...)
		ext = binary.BigEndian.AppendUint16(ext, extServerName)
		ext = binary.BigEndian.AppendUint16(ext, uint16(len(e)))
		ext = append(ext, e...)
	}
	// supported_versions: TLS 1.3, so the message looks like a modern hello.
	ext = append(ext, 0, 43, 0, 3, 2, 3, 4)
	if pad := bodyLen - (len(body) + 2 + len(ext) + 4); pad > 0 {
		ext = binary.BigEndian.AppendUint16(ext, 21)
		ext = binary.BigEndian.AppendUint16(ext, uint16(pad))
		ext = append(ext, make([]byte, pad)...)
	}
	body = binary.BigEndian.AppendUint16(body, uint16(len(ext)))
	body = append(body, ext...)
	msg := []byte{typeClientHello, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}
	return append(msg, body...)
}

// records frames a handshake message into TLS records of at most frag bytes.
func records(msg []byte, frag int) []byte {
	var out []byte
	for len(msg) > 0 {
		n := min(frag, len(msg))
		out = append(out, recordHandshake, 3, 1, byte(n>>8), byte(n))
		out = append(out, msg[:n]...)
		msg = msg[n:]
	}
	return out
}

// fragmentingConn re-frames the first TLS record the client writes into
// records of frag bytes and sends each with its own write after a pause, the
// way a hostile or unlucky client splits its ClientHello.
type fragmentingConn struct {
	net.Conn
	frag  int
	pause time.Duration
	once  sync.Once
}

func (c *fragmentingConn) Write(b []byte) (int, error) {
	done := false
	var n int
	var err error
	c.once.Do(func() {
		done = true
		if len(b) < 5 || b[0] != recordHandshake {
			n, err = c.Conn.Write(b)
			return
		}
		l := int(binary.BigEndian.Uint16(b[3:5]))
		msg := b[5 : 5+l]
		out := records(msg, c.frag)
		for len(out) > 0 {
			k := min(len(out), c.frag/2+3)
			if _, err = c.Conn.Write(out[:k]); err != nil {
				return
			}
			out = out[k:]
			time.Sleep(c.pause) // the scenario: a hello split over separate reads
		}
		if rest := b[5+l:]; len(rest) > 0 {
			if _, err = c.Conn.Write(rest); err != nil {
				return
			}
		}
		n = len(b)
	})
	if done {
		return n, err
	}
	return c.Conn.Write(b)
}

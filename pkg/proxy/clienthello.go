package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"

	"github.com/crackbox/crackbox/pkg/proxy/allow"
)

// TLS limits for the peeker. A ClientHello may legally span several
// records; we accept handshake messages up to maxHelloLen, which covers
// post-quantum key shares and large session tickets.
const (
	recordHeaderLen = 5
	maxRecordLen    = 1 << 14
	maxHelloLen     = MaxHeaderBytes
	// maxHelloRaw bounds the bytes read for one ClientHello, record headers
	// included, however finely a client fragments it.
	maxHelloRaw     = maxHelloLen + 4 + 1024
	recordHandshake = 22
	typeClientHello = 1
	extServerName   = 0
)

// Peeker errors; all of them make the transparent proxy refuse the connection.
var (
	ErrNotTLS       = errors.New("not a TLS handshake")
	ErrBadHello     = errors.New("malformed TLS ClientHello")
	ErrNoServerName = errors.New("no server name")
)

// readClientHello reads TLS records from r until it holds one complete
// ClientHello handshake message, and returns every byte it consumed (to be
// replayed upstream) plus the normalized SNI host name.
func readClientHello(r io.Reader) (raw []byte, sni string, err error) {
	var msg []byte // reassembled handshake bytes
	var hdr [recordHeaderLen]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return raw, "", fmt.Errorf("read TLS record header: %w", err)
		}
		raw = append(raw, hdr[:]...)
		if hdr[0] != recordHandshake {
			return raw, "", fmt.Errorf("%w: record type %d", ErrNotTLS, hdr[0])
		}
		if hdr[1] != 3 {
			return raw, "", fmt.Errorf("%w: record version %d.%d", ErrNotTLS, hdr[1], hdr[2])
		}
		n := int(binary.BigEndian.Uint16(hdr[3:5]))
		if n == 0 || n > maxRecordLen {
			return raw, "", fmt.Errorf("%w: record length %d", ErrBadHello, n)
		}
		if len(raw)+n > maxHelloRaw {
			return raw, "", fmt.Errorf("%w: ClientHello records exceed %d bytes", ErrBadHello, maxHelloRaw)
		}
		start := len(raw)
		raw = append(raw, make([]byte, n)...)
		if got, err := io.ReadFull(r, raw[start:]); err != nil {
			return raw[:start+got], "", fmt.Errorf("read TLS record: %w", err)
		}
		msg = append(msg, raw[start:]...)
		if len(msg) < 4 {
			continue
		}
		if msg[0] != typeClientHello {
			return raw, "", fmt.Errorf("%w: handshake type %d", ErrBadHello, msg[0])
		}
		want := 4 + (int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3]))
		if want > maxHelloLen+4 {
			return raw, "", fmt.Errorf("%w: ClientHello of %d bytes exceeds %d", ErrBadHello, want-4, maxHelloLen)
		}
		if len(msg) < want {
			continue
		}
		if len(msg) > want {
			// Another handshake message shares the record; a client must
			// not send one before the server answers.
			return raw, "", fmt.Errorf("%w: trailing handshake data", ErrBadHello)
		}
		name, err := parseClientHello(msg[4:want])
		return raw, name, err
	}
}

// parseClientHello extracts the host_name from the server_name extension of
// a ClientHello body (after the 4-byte handshake header).
func parseClientHello(b []byte) (string, error) {
	s := cursor{b: b}
	s.skip(2 + 32) // legacy_version, random
	s.skip(int(s.u8()))
	cs := s.u16()
	if cs < 2 || cs%2 != 0 {
		return "", fmt.Errorf("%w: cipher suites length %d", ErrBadHello, cs)
	}
	s.skip(int(cs))
	cm := s.u8()
	if cm < 1 {
		return "", fmt.Errorf("%w: no compression methods", ErrBadHello)
	}
	s.skip(int(cm))
	if s.err {
		return "", fmt.Errorf("%w: truncated", ErrBadHello)
	}
	if s.empty() {
		return "", ErrNoServerName
	}
	ext := cursor{b: s.bytes(int(s.u16()))}
	if s.err || !s.empty() {
		return "", fmt.Errorf("%w: extensions length", ErrBadHello)
	}
	var name string
	found := false
	for !ext.empty() {
		typ := ext.u16()
		data := ext.bytes(int(ext.u16()))
		if ext.err {
			return "", fmt.Errorf("%w: truncated extension", ErrBadHello)
		}
		if typ != extServerName {
			continue
		}
		if found {
			return "", fmt.Errorf("%w: duplicate server_name extension", ErrBadHello)
		}
		found = true
		n, err := parseServerName(data)
		if err != nil {
			return "", err
		}
		name = n
	}
	if !found {
		return "", ErrNoServerName
	}
	return name, nil
}

func parseServerName(data []byte) (string, error) {
	c := cursor{b: data}
	list := cursor{b: c.bytes(int(c.u16()))}
	if c.err || !c.empty() || list.empty() {
		return "", fmt.Errorf("%w: server_name list length", ErrBadHello)
	}
	var name string
	for !list.empty() {
		typ := list.u8()
		v := list.bytes(int(list.u16()))
		if list.err {
			return "", fmt.Errorf("%w: truncated server_name", ErrBadHello)
		}
		if typ != 0 {
			continue // unknown name types are skipped, as RFC 6066 allows
		}
		if name != "" {
			return "", fmt.Errorf("%w: more than one host_name", ErrBadHello)
		}
		if len(v) == 0 {
			return "", fmt.Errorf("%w: empty host_name", ErrBadHello)
		}
		h, err := allow.NormalizeHost(string(v))
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrBadHello, err)
		}
		if _, err := netip.ParseAddr(h); err == nil {
			return "", fmt.Errorf("%w: host_name is an IP literal", ErrBadHello)
		}
		name = h
	}
	if name == "" {
		return "", ErrNoServerName
	}
	return name, nil
}

// cursor reads big-endian fields; any overrun sets err and yields zeros.
type cursor struct {
	b   []byte
	err bool
}

func (c *cursor) empty() bool { return len(c.b) == 0 }

func (c *cursor) bytes(n int) []byte {
	if c.err || n > len(c.b) || n < 0 {
		c.err = true
		return nil
	}
	v := c.b[:n]
	c.b = c.b[n:]
	return v
}

func (c *cursor) skip(n int) { c.bytes(n) }

func (c *cursor) u8() uint8 {
	v := c.bytes(1)
	if v == nil {
		return 0
	}
	return v[0]
}

func (c *cursor) u16() uint16 {
	v := c.bytes(2)
	if v == nil {
		return 0
	}
	return binary.BigEndian.Uint16(v)
}

package proxy

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestReadClientHello(t *testing.T) {
	big := buildClientHello("big.example.com", 16<<10)
	cases := []struct {
		name    string
		input   []byte
		wantSNI string
		wantErr error
	}{
		{"small one record", records(buildClientHello("Example.COM.", 0), 1<<14), "example.com", nil},
		{"16 KiB across two records", records(big, 1<<14), "big.example.com", nil},
		{"16 KiB in 100-byte records", records(big, 100), "big.example.com", nil},
		{"split inside the handshake header", records(buildClientHello("a.example.com", 0), 2), "a.example.com", nil},
		{"no sni", records(buildClientHello("", 300), 1<<14), "", ErrNoServerName},
		{"ip sni", records(buildClientHello("10.0.0.1", 0), 1<<14), "", ErrBadHello},
		{"illegal sni", records(buildClientHello("a b.example", 0), 1<<14), "", ErrBadHello},
		{"not tls", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), "", ErrNotTLS},
		{"alert record", []byte{21, 3, 1, 0, 2, 2, 40}, "", ErrNotTLS},
		{"zero-length record", []byte{22, 3, 1, 0, 0}, "", ErrBadHello},
		{"oversized record", []byte{22, 3, 1, 0x40, 0x01}, "", ErrBadHello},
		{"server hello", records([]byte{2, 0, 0, 1, 0}, 100), "", ErrBadHello},
		{"huge hello", records([]byte{1, 0x10, 0, 0}, 100), "", ErrBadHello},
		{"truncated body", records([]byte{1, 0, 0, 3, 3, 3, 0}, 100), "", ErrBadHello},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw, sni, err := readClientHello(bytes.NewReader(tc.input))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sni != tc.wantSNI {
				t.Fatalf("sni = %q, want %q", sni, tc.wantSNI)
			}
			if !bytes.Equal(raw, tc.input) {
				t.Fatalf("raw bytes differ from input (%d vs %d)", len(raw), len(tc.input))
			}
		})
	}
}

func TestReadClientHelloLeavesFollowingBytes(t *testing.T) {
	hello := records(buildClientHello("a.example.com", 0), 1<<14)
	r := bytes.NewReader(append(append([]byte{}, hello...), "next"...))
	raw, _, err := readClientHello(r)
	if err != nil || !bytes.Equal(raw, hello) {
		t.Fatalf("raw %d bytes, err %v", len(raw), err)
	}
	rest, _ := io.ReadAll(r)
	if string(rest) != "next" {
		t.Fatalf("consumed past the hello: rest %q", rest)
	}
}

func TestReadClientHelloTruncatedStream(t *testing.T) {
	hello := records(buildClientHello("a.example.com", 2000), 500)
	_, _, err := readClientHello(bytes.NewReader(hello[:len(hello)-10]))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want unexpected EOF", err)
	}
}

package main

import (
	"bytes"
	"testing"

	"github.com/crackbox/crackbox/pkg/admin"
)

func TestAdminURL(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:3129": "http://127.0.0.1:3129",
		":3129":          "http://127.0.0.1:3129",
		"0.0.0.0:9":      "http://127.0.0.1:9",
		"[::1]:3129":     "http://[::1]:3129",
		"":               "",
		"nonsense":       "",
	} {
		if got := adminURL(in); got != want {
			t.Errorf("adminURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPrintStateTable(t *testing.T) {
	st := &admin.StateJSON{ActiveTunnels: 2, Clients: []admin.ClientJSON{
		{IP: "10.213.0.2", ID: "job-1", Allowlist: []string{"github.com", "*.pypi.org"}},
		{IP: "fd00::10", ID: "a-much-longer-id", Allowlist: nil},
	}}
	var b bytes.Buffer
	if err := printState(&b, st, false); err != nil {
		t.Fatal(err)
	}
	want := `IP          ID                ALLOWLIST
10.213.0.2  job-1             github.com,*.pypi.org
fd00::10    a-much-longer-id  -
2 clients, 2 active tunnels
`
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

package natstest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/crackbox/crackbox/internal/nettest"
)

// Identities of the shipped server config, each a user with its own nkey.
var Identities = []string{"control-plane", "runner-1", "runner-2", "registry-writer", "proxy"}

// Shipped is one node run from deploy/nats/nats-server.conf as shipped, with
// a site.conf the test writes beside a copy of it: test-made TLS files and
// one fresh nkey per identity.
type Shipped struct {
	*Cluster
	CA    string            // PEM file of the CA that signed the server's certificate
	seeds map[string]string // identity → seed file
}

// Seed is the nkey seed file of an identity of Identities.
func (s *Shipped) Seed(identity string) string {
	p, ok := s.seeds[identity]
	if !ok {
		s.t.Fatalf("natstest: no identity %q in the shipped config (%v)", identity, Identities)
	}
	return p
}

// As are the client options of identity: its nkey and the CA.
func (s *Shipped) As(identity string) []nats.Option {
	s.t.Helper()
	opt, err := nats.NkeyOptionFromSeed(s.Seed(identity))
	if err != nil {
		s.t.Fatal(err)
	}
	// A refused publish is what tests of the permissions expect: they check
	// the call's error, so the client's default report to stderr is noise.
	quiet := nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})
	return []nats.Option{opt, nats.RootCAs(s.CA), quiet}
}

// ShippedConfig is the path of deploy/nats/nats-server.conf in this tree.
func ShippedConfig() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "deploy", "nats", "nats-server.conf")
}

// StartShipped starts the shipped config on host. Cluster.Connect and
// WaitReady connect as the control plane; URL is tls://.
func StartShipped(t testing.TB, host string) *Shipped {
	t.Helper()
	dir := t.TempDir()
	conf, err := os.ReadFile(ShippedConfig())
	if err != nil {
		t.Fatalf("natstest: shipped config: %v", err)
	}
	main := filepath.Join(dir, "nats-server.conf")
	if err := os.WriteFile(main, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	s := &Shipped{seeds: map[string]string{}}
	cert := nettest.NewCert(t, "natstest ca", host, "localhost")
	s.CA = filepath.Join(dir, "ca.pem")
	certFile, keyFile := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	if err := os.WriteFile(s.CA, cert.CAPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM := cert.LeafPEM(t)
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	site := []string{
		"SITE_NAME: shipped",
		fmt.Sprintf("SITE_STORE_DIR: %q", t.TempDir()),
		fmt.Sprintf("SITE_TLS_CERT: %q", certFile),
		fmt.Sprintf("SITE_TLS_KEY: %q", keyFile),
	}
	for _, id := range Identities {
		seed, pub := writeSeed(t, filepath.Join(dir, id+".nk"))
		s.seeds[id] = seed
		site = append(site, fmt.Sprintf("%s_NKEY: %s", strings.ToUpper(strings.ReplaceAll(id, "-", "_")), pub))
	}
	if err := os.WriteFile(filepath.Join(dir, "site.conf"), []byte(strings.Join(site, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := server.ProcessConfigFile(main)
	if err != nil {
		t.Fatalf("natstest: shipped config does not load: %v", err)
	}
	// The node listens where the test can reach it; everything else is as shipped.
	o.Host, o.Port = host, freePorts(t, host, 1, nil)[0]
	o.NoSigs, o.NoLog = true, true
	c := &Cluster{t: t, Name: "shipped", host: host, scheme: "tls", opts: []*server.Options{o}, servers: []*server.Server{nil}}
	s.Cluster = c
	c.clientOpts = s.As("control-plane")
	t.Cleanup(c.Shutdown)
	c.startNode(0)
	c.WaitReady()
	return s
}

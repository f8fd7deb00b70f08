package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/natstest"
	"github.com/crackbox/crackbox/pkg/admin/fleet"
	"github.com/crackbox/crackbox/pkg/proxy"
)

// Two replicas on the shipped NATS config: the admin API's replica writes
// the registry as registry-writer and signs every entry; the other reads it
// as proxy. A forged entry changes no replica's allowlist: the proxy
// identity cannot write the bucket at all, and an entry without the admin
// API's signature (written with the writer's NATS credentials, as by a
// host that stole them but not the signing key) is skipped by both.
func TestProxyFleetOnShippedNATSConfig(t *testing.T) {
	bin := buildCrackbox(t)
	ns := natstest.StartShipped(t, "127.0.0.1")
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	t.Cleanup(upstream.Close)
	_, port, _ := net.SplitHostPort(upstream.Listener.Addr().String())
	kp, err := nkeys.FromSeed(fleetSignSeed)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	writer := startReplicaWith(t, bin, ns.URL(), "writer", func(dir string) string {
		return fmt.Sprintf("registry_nkey = %q\nregistry_ca = %q\nregistry_sign_key = %q\n", ns.Seed("registry-writer"), ns.CA, writeSignKey(t, dir))
	})
	reader := startReplicaWith(t, bin, ns.URL(), "reader", func(string) string {
		return fmt.Sprintf("registry_nkey = %q\nregistry_ca = %q\nregistry_signers = [%q]\n", ns.Seed("proxy"), ns.CA, pub)
	})
	allowed := "allowed.test:" + port
	if c, body := writer.admin(t, "POST", "/v1/register", `{"ip":"127.0.0.1","id":"c1","allowlist":["`+allowed+`"]}`); c != http.StatusCreated {
		t.Fatalf("register on the writer: %d %s", c, body)
	}
	for _, r := range []*fleetReplica{writer, reader} {
		eventually.True(t, 90*time.Second, r.name+" allows the registered client", func() bool { c, _ := r.verdict(t, "allowed.test", port); return c == 200 })
	}
	if _, body := reader.admin(t, "GET", "/health", ""); !strings.Contains(body, `"registry_nats": "credentials and tls"`) {
		t.Errorf("reader /health: %s", body)
	}
	if c, body := reader.admin(t, "PATCH", "/v1/clients/127.0.0.1", `{"add":["other.test"]}`); c != http.StatusServiceUnavailable || !strings.Contains(body, "registry_sign_key") {
		t.Errorf("an edit on a replica without the signing key: %d %s, want 503 naming proxy.registry_sign_key", c, body)
	}

	wide := []byte(`{"ip":"127.0.0.1","id":"c1","allowlist":["` + allowed + `","other.test:` + port + `"]}`)
	ghost := []byte(`{"ip":"127.0.0.9","id":"ghost","allowlist":["other.test"]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	asProxy := bucketAs(t, ctx, ns.URL(), ns.As("proxy"))
	for key, val := range map[string][]byte{"c.127.0.0.1": wide, "c.127.0.0.9": ghost} {
		c, stop := context.WithTimeout(ctx, 2*time.Second)
		if _, err := asProxy.Put(c, key, val); err == nil {
			t.Errorf("the proxy identity wrote %s", key)
		}
		if err := asProxy.Delete(c, key); err == nil {
			t.Errorf("the proxy identity deleted %s", key)
		}
		stop()
	}
	asWriter := bucketAs(t, ctx, ns.URL(), ns.As("registry-writer"))
	if _, err := asWriter.Put(ctx, "c.127.0.0.1", wide); err != nil {
		t.Fatalf("forged entry with the writer's NATS credentials: %v", err)
	}
	for _, r := range []*fleetReplica{writer, reader} {
		eventually.True(t, 90*time.Second, r.name+" skips the unsigned entry", func() bool {
			_, body := r.admin(t, "GET", "/metrics", "")
			return strings.Contains(body, "\ncrackbox_registry_entries_skipped_total 1")
		})
		if c, why := r.verdict(t, "other.test", port); c == 200 {
			t.Errorf("%s: other.test allowed after a forged entry (%q)", r.name, why)
		} else if why != proxy.ReasonUnknownClient {
			t.Errorf("%s: other.test refused as %q, want the forged client refused whole", r.name, why)
		}
	}

	if _, err := nats.Connect(ns.URL(), nats.RootCAs(ns.CA)); err == nil {
		t.Error("an anonymous client connected to the shipped config")
	}
}

func bucketAs(t *testing.T, ctx context.Context, url string, opts []nats.Option) jetstream.KeyValue {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, fleet.DefaultBucket)
	if err != nil {
		t.Fatalf("open %s: %v", fleet.DefaultBucket, err)
	}
	return kv
}

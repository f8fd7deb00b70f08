package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/natstest"
	"github.com/crackbox/crackbox/pkg/admin"
	"github.com/crackbox/crackbox/pkg/proxy"
	"github.com/crackbox/crackbox/pkg/proxy/allow"
	"github.com/crackbox/crackbox/pkg/proxy/inject"
)

// testSigner is the admin API's key of every replica open makes.
var testSigner = func() nkeys.KeyPair {
	kp, err := nkeys.CreateAccount()
	if err != nil {
		panic(err)
	}
	return kp
}()

// open starts a replica on an unauthenticated test cluster; it signs with
// testSigner unless o names signers of its own.
func open(t testing.TB, url string, o Options) *Fleet {
	t.Helper()
	o.URL = url
	o.Insecure = true
	if o.Signer == nil && o.Signers == nil {
		o.Signer = testSigner
	}
	if o.Registry == nil {
		o.Registry = proxy.NewRegistry()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	f, err := Open(context.Background(), o)
	if err != nil {
		t.Fatalf("open fleet: %v", err)
	}
	t.Cleanup(f.Close)
	return f
}

func client(t testing.TB, ip string, hosts ...string) proxy.Client {
	t.Helper()
	l, err := allow.Parse(hosts)
	if err != nil {
		t.Fatal(err)
	}
	return proxy.Client{ID: "c-" + ip, IP: netip.MustParseAddr(ip), Allow: l}
}

func bucket(t *testing.T, c *natstest.Cluster) jetstream.KeyValue {
	t.Helper()
	js, err := jetstream.New(c.Connect())
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(context.Background(), DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

func allows(r *proxy.Registry, ip, host string) bool {
	c, ok := r.Lookup(netip.MustParseAddr(ip))
	return ok && c.Allow.Check(host, 443) == nil
}

// A hostile or broken writer to the bucket must not crash a replica or open a
// door: each malformed entry is skipped, and a good client turned malformed
// is refused rather than kept.
func TestMalformedEntries(t *testing.T) {
	c := natstest.Start(t, 1)
	first := open(t, c.URL(), Options{})
	if err := first.Register(client(t, "10.0.0.1", "good.test")); err != nil {
		t.Fatal(err)
	}
	if err := first.Register(client(t, "10.0.0.2", "later-bad.test")); err != nil {
		t.Fatal(err)
	}
	kv := bucket(t, c)
	ctx := context.Background()
	for key, val := range map[string]string{
		"c.10.0.0.3":  `not json`,
		"c.10.0.0.4":  `{"ip":"10.0.0.5","id":"x","allowlist":["a.test"]}`,              // names another address
		"c.10.0.0.6":  `{"ip":"10.0.0.6","id":"x","allowlist":["a.test"],"admin":true}`, // unknown field
		"c.10.0.0.7":  `{"ip":"10.0.0.7","id":"x","allowlist":["a b"]}`,                 // invalid allowlist
		"c.not-an-ip": `{"ip":"10.0.0.8","id":"x","allowlist":["a.test"]}`,
		"other":       `{"ip":"10.0.0.9","id":"x","allowlist":["a.test"]}`,
	} {
		v := []byte(val)
		if json.Valid(v) {
			v = sealed(t, testSigner, key, val) // signed, so the record itself is what is malformed
		}
		if _, err := kv.Put(ctx, key, v); err != nil {
			t.Fatal(err)
		}
	}
	reg := proxy.NewRegistry()
	prom := prometheus.NewRegistry()
	open(t, c.URL(), Options{Registry: reg, Registerer: prom})
	if got := reg.List(); len(got) != 2 || !allows(reg, "10.0.0.1", "good.test") {
		t.Fatalf("registry after reading a bucket with bad entries: %v, want only 10.0.0.1 and 10.0.0.2", got)
	}
	if n := counter(t, prom, "crackbox_registry_entries_skipped_total"); n != 6 {
		t.Errorf("skipped %v entries, want 6", n)
	}
	if _, err := kv.Put(ctx, "c.10.0.0.2", sealed(t, testSigner, "c.10.0.0.2", `{"ip":"10.0.0.2","id":"x","allowlist":[1]}`)); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, time.Minute, "a client whose entry turned malformed is refused", func() bool {
		_, ok := reg.Lookup(netip.MustParseAddr("10.0.0.2"))
		return !ok
	})
	if _, err := first.Update(netip.MustParseAddr("10.0.0.2"), []string{"x.test"}, nil); err == nil {
		t.Error("update of a malformed entry succeeded")
	}
	if _, err := first.Status(); err != nil {
		t.Errorf("status after malformed entries: %v, want following", err)
	}
}

func TestSecretsStayOutOfTheBucket(t *testing.T) {
	c := natstest.Start(t, 1)
	f := open(t, c.URL(), Options{})
	secrets, err := inject.New([]inject.Secret{{Name: "TOKEN", Hosts: []string{"api.test"}, Value: "s3cret-value-123"}})
	if err != nil {
		t.Fatal(err)
	}
	cl := client(t, "10.0.0.1", "api.test")
	cl.Secrets = secrets
	if err := f.Register(cl); !errors.Is(err, ErrSecrets) || !errors.Is(err, proxy.ErrInvalidClient) {
		t.Fatalf("register with secrets: %v, want ErrSecrets", err)
	}
	keys, err := bucket(t, c).ListKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys.Keys() {
		t.Errorf("bucket holds %q after a refused registration", k)
	}
}

func TestOpenBadInput(t *testing.T) {
	url, good, wrong := natstest.StartNKey(t)
	for _, tc := range []struct {
		name string
		o    Options
		want error
	}{
		{"wrong nkey", Options{URL: url, NKey: wrong}, ErrAuth},
		{"no credentials", Options{URL: url}, ErrAuth},
		{"unreachable", Options{URL: "nats://127.0.0.1:1"}, ErrUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Registry = proxy.NewRegistry()
			tc.o.Insecure, tc.o.Signer = true, testSigner
			tc.o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
			if _, err := Open(context.Background(), tc.o); !errors.Is(err, tc.want) {
				t.Fatalf("open: %v, want %v", err, tc.want)
			}
		})
	}
	f := open(t, url, Options{NKey: good})
	if err := f.Register(client(t, "10.0.0.1", "a.test")); err != nil {
		t.Fatalf("register with the right nkey: %v", err)
	}
}

// Edits race on one address from two replicas: exactly one registration wins,
// and concurrent PATCHes both land.
func TestConcurrentEdits(t *testing.T) {
	c := natstest.Start(t, 3)
	a, b := open(t, c.URL(), Options{}), open(t, c.URL(), Options{})
	ip := netip.MustParseAddr("10.0.0.1")
	errs := make(chan error, 2)
	for _, f := range []*Fleet{a, b} {
		go func() { errs <- f.Register(client(t, "10.0.0.1", "base.test")) }()
	}
	e1, e2 := <-errs, <-errs
	if (e1 == nil) == (e2 == nil) || !errors.Is(errors.Join(e1, e2), proxy.ErrClientExists) {
		t.Fatalf("two registrations of one address: %v, %v; want one to win", e1, e2)
	}
	for i, f := range []*Fleet{a, b} {
		go func() {
			_, err := f.Update(ip, []string{[]string{"one.test", "two.test"}[i]}, nil)
			errs <- err
		}()
	}
	if err := errors.Join(<-errs, <-errs); err != nil {
		t.Fatal(err)
	}
	for _, f := range []*Fleet{a, b} {
		eventually.True(t, time.Minute, "both PATCHes on every replica", func() bool {
			return allows(f.reg, "10.0.0.1", "one.test") && allows(f.reg, "10.0.0.1", "two.test") && allows(f.reg, "10.0.0.1", "base.test")
		})
	}
}

func TestStatusWhileNATSDown(t *testing.T) {
	c := natstest.Start(t, 1)
	f := open(t, c.URL(), Options{})
	if err := f.Register(client(t, "10.0.0.1", "a.test")); err != nil {
		t.Fatal(err)
	}
	c.StopNode(0)
	eventually.True(t, time.Minute, "degraded status", func() bool { _, err := f.Status(); return err != nil })
	if err := f.Register(client(t, "10.0.0.2", "b.test")); !errors.Is(err, admin.ErrUnavailable) {
		t.Errorf("register without NATS: %v, want ErrUnavailable", err)
	}
	if !allows(f.reg, "10.0.0.1", "a.test") {
		t.Error("last registry dropped while NATS is down")
	}
	since, err := f.Status()
	if !strings.Contains(err.Error(), "nats") || since.IsZero() {
		t.Errorf("status %v since %v", err, since)
	}
	c.StartNode(0)
	c.WaitReady()
	eventually.True(t, time.Minute, "following again", func() bool { _, err := f.Status(); return err == nil })
}

func counter(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

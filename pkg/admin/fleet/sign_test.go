package fleet

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/natstest"
	"github.com/crackbox/crackbox/pkg/proxy"
)

func sealed(t testing.TB, kp nkeys.KeyPair, key, record string) []byte {
	t.Helper()
	b, err := seal(kp, key, []byte(record))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A NATS identity that can write the bucket but holds no admin API key (a
// proxy host's) forges entries: a plain record, one signed by its own key,
// one signed for another address, one with the signature of another record.
// No replica enforces any of them: the ghost clients stay refused and the
// real client's allowlist is never widened.
func TestForgedEntriesChangeNoAllowlist(t *testing.T) {
	c := natstest.Start(t, 1)
	admin := open(t, c.URL(), Options{})
	if err := admin.Register(client(t, "10.0.0.1", "good.test")); err != nil {
		t.Fatal(err)
	}
	pub, _ := testSigner.PublicKey()
	reg, prom := proxy.NewRegistry(), prometheus.NewRegistry()
	reader := open(t, c.URL(), Options{Signers: []string{pub}, Registry: reg, Registerer: prom})
	eventually.True(t, time.Minute, "the reader has the real client", func() bool { return allows(reg, "10.0.0.1", "good.test") })

	mallory, _ := nkeys.CreateAccount()
	wide := `{"ip":"10.0.0.1","id":"c-10.0.0.1","allowlist":["good.test","evil.test"]}`
	ghost := `{"ip":"10.0.0.9","id":"ghost","allowlist":["evil.test"]}`
	goodSig := sealed(t, testSigner, "c.10.0.0.1", `{"ip":"10.0.0.1","id":"c-10.0.0.1","allowlist":["good.test"]}`)
	var env envelope
	json.Unmarshal(goodSig, &env)
	env.Record = json.RawMessage(wide) // the admin's signature on another record
	spliced, _ := json.Marshal(env)
	kv := bucket(t, c)
	ctx := context.Background()
	for i, f := range []struct {
		name, key string
		val       []byte
	}{
		{"plain record", "c.10.0.0.9", []byte(ghost)},
		{"signed by an untrusted key", "c.10.0.0.9", sealed(t, mallory, "c.10.0.0.9", ghost)},
		{"untrusted key naming itself trusted", "c.10.0.0.1", untrustedAsTrusted(t, mallory, pub, "c.10.0.0.1", wide)},
		{"trusted signature moved to another address", "c.10.0.0.9", sealed(t, testSigner, "c.10.0.0.1", ghost)},
		{"trusted signature on another record", "c.10.0.0.1", spliced},
	} {
		// One at a time: the bucket keeps one revision per key, so a watcher
		// may never see a value overwritten before it was delivered.
		if _, err := kv.Put(ctx, f.key, f.val); err != nil {
			t.Fatal(err)
		}
		want := float64(i + 1)
		eventually.True(t, time.Minute, "the reader skips the forged value "+f.name, func() bool { return counter(t, prom, "crackbox_registry_entries_skipped_total") >= want })
	}
	for _, r := range []*proxy.Registry{reg, admin.reg} {
		if allows(r, "10.0.0.1", "evil.test") {
			t.Error("a forged value widened 10.0.0.1's allowlist")
		}
		if _, ok := r.Lookup(netip.MustParseAddr("10.0.0.9")); ok {
			t.Error("a forged value added a ghost client")
		}
	}
	// A replica starting now reads the bucket whole and enforces none of it.
	late, lprom := proxy.NewRegistry(), prometheus.NewRegistry()
	open(t, c.URL(), Options{Signers: []string{pub}, Registry: late, Registerer: lprom})
	if got := late.List(); len(got) != 0 {
		t.Errorf("a new replica enforces %v from a bucket of forged values", got)
	}
	// A replica without a signing key serves reads but refuses edits.
	if err := reader.Register(client(t, "10.0.0.5", "a.test")); !errors.Is(err, ErrNoSigner) {
		t.Errorf("register on a replica without a key: %v, want %v", err, ErrNoSigner)
	}
	if _, err := reader.Unregister(netip.MustParseAddr("10.0.0.1")); !errors.Is(err, ErrNoSigner) {
		t.Errorf("unregister on a replica without a key: %v, want %v", err, ErrNoSigner)
	}
}

// untrustedAsTrusted is a value that names the trusted key as its signer but
// carries mallory's signature.
func untrustedAsTrusted(t *testing.T, mallory nkeys.KeyPair, trusted, key, record string) []byte {
	t.Helper()
	sig, _ := mallory.Sign(signed(key, []byte(record)))
	b, _ := json.Marshal(envelope{Record: json.RawMessage(record), Signer: trusted, Sig: base64.RawURLEncoding.EncodeToString(sig)})
	return b
}

// A replica needs a key to verify with: without one it would have to
// enforce anything or nothing.
func TestOpenNeedsATrustedKey(t *testing.T) {
	c := natstest.Start(t, 1)
	_, err := Open(context.Background(), Options{URL: c.URL(), Insecure: true, Registry: proxy.NewRegistry()})
	if err == nil || !strings.Contains(err.Error(), "signing key") {
		t.Fatalf("open without keys: %v, want a refusal naming the signing key", err)
	}
	if _, err := Open(context.Background(), Options{URL: c.URL(), Insecure: true, Registry: proxy.NewRegistry(), Signers: []string{"not-a-key"}}); err == nil {
		t.Fatal("open with a malformed signer key succeeded")
	}
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/crackbox/crackbox/internal/natstest"
	"github.com/crackbox/crackbox/pkg/arizuko/dispatch"
)

// The fleet on the shipped NATS config: the control plane and a runner, each
// with its own nkey over TLS, complete a turn; an anonymous client is
// refused; and a runner's identity cannot touch a peer's entry, publish work
// or delete the fleet's stream.
func TestFleetOnShippedNATSConfig(t *testing.T) {
	f := newSecureFleet(t, map[string]string{"acme": `exec python3 "$AGENT"`})
	resp, err := http.Get("http://" + f.addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"fleet_nats":"credentials and tls"`) {
		t.Errorf("/health %s: want fleet_nats credentials and tls", body)
	}
	f.startRunner("runner-1", f.runnerToken("runner-1"), 1)
	f.waitPulling("runner-1")
	f.say("acme", "hi")
	f.waitFor(90*time.Second, "a reply through the runner", func() bool {
		r := f.replies("acme")
		return len(r) == 1 && r[0].Text == "echo: hi"
	})

	if _, err := nats.Connect(f.nats.URL(), nats.RootCAs(f.secure.CA)); err == nil {
		t.Error("an anonymous client connected to the shipped config")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cp := kvs(t, f.nats.Connect(), ctx)
	mallory := kvs(t, f.nats.Connect(f.secure.As("runner-2")...), ctx)
	if _, err := cp.runners.Get(ctx, "runner-1"); err != nil {
		t.Fatalf("runner-1's entry: %v", err)
	}
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 2*time.Second) }
	for _, tc := range []struct {
		what string
		do   func(context.Context) error
	}{
		{"overwrite runner-1's entry", func(c context.Context) error {
			_, err := mallory.runners.Put(c, "runner-1", []byte(`{"id":"runner-1","capacity":0,"labels":["kvm=true"]}`))
			return err
		}},
		{"delete runner-1's entry", func(c context.Context) error { return mallory.runners.Delete(c, "runner-1") }},
		{"publish a work item", func(c context.Context) error {
			_, err := mallory.js.Publish(c, dispatch.Subject, []byte(`{"turn":1,"folder":"acme","dispatch":"x"}`))
			return err
		}},
		{"delete the turn stream", func(c context.Context) error { return mallory.js.DeleteStream(c, dispatch.Stream) }},
		{"delete the lease bucket", func(c context.Context) error { return mallory.js.DeleteKeyValue(c, dispatch.LeaseBucket) }},
	} {
		c, stop := short()
		if err := tc.do(c); err == nil {
			t.Errorf("runner-2 could %s", tc.what)
		}
		stop()
	}
	var a dispatch.Advert
	e, err := cp.runners.Get(ctx, "runner-1")
	if err == nil {
		err = json.Unmarshal(e.Value(), &a)
	}
	if err != nil || a.ID != "runner-1" || a.Capacity != 1 || len(a.Labels) != 0 {
		t.Errorf("runner-1's entry after runner-2's writes: %+v, %v; want its own advert", a, err)
	}
	// Its own entry it may write.
	c, stop := short()
	defer stop()
	if _, err := mallory.runners.Put(c, "runner-2", []byte(`{"id":"runner-2","capacity":1}`)); err != nil {
		t.Errorf("runner-2 writes its own entry: %v", err)
	}
	// The registry lives in another account: a runner cannot even see it.
	if _, err := mallory.js.KeyValue(c, "crackbox-registry"); err == nil {
		t.Error("runner-2 opened the crackbox registry")
	}
}

type fleetKV struct {
	js      jetstream.JetStream
	runners jetstream.KeyValue
}

func kvs(t *testing.T, nc *nats.Conn, ctx context.Context) fleetKV {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, dispatch.RunnerBucket)
	if err != nil {
		t.Fatalf("runner bucket: %v", err)
	}
	return fleetKV{js, kv}
}

// serve and runner refuse NATS without credentials, in one line that names
// the settings and the flag; with credentials, a NATS without TLS is refused
// too.
func TestFleetRefusesNATSWithoutCredentials(t *testing.T) {
	plainURL, seed, _ := natstest.StartNKey(t)
	data, e := initData(t)
	for _, tc := range []struct {
		name, config string
		args         []string
		want         []string
	}{
		{"serve", "", []string{"serve", "--listen", "127.0.0.1:0", "--nats", plainURL},
			[]string{"arizuko serve: NATS without credentials", "fleet.nkey", "--insecure-nats"}},
		{"runner", "", []string{"runner", "--nats", plainURL, "--server", "http://127.0.0.1:1", "--token", "x"},
			[]string{"runner: NATS without credentials", "--nats-nkey", "--insecure-nats"}},
		{"serve without tls", fmt.Sprintf("[fleet]\nnkey = %q\n", seed), []string{"serve", "--listen", "127.0.0.1:0", "--nats", plainURL},
			[]string{"does not offer TLS", "--insecure-nats"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(data, "arizuko.toml"), []byte(tc.config), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, tc.args...)
			cmd.Env = e
			out, err := cmd.CombinedOutput()
			if err == nil || ctx.Err() != nil {
				t.Fatalf("started (%v):\n%s", err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
	// With --insecure-nats it starts, and says so in its log and /health.
	if err := os.WriteFile(filepath.Join(data, "arizuko.toml"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, e, data, "--nats", natstest.Start(t, 1).URL(), "--insecure-nats")
	resp, err := http.Get(d.url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"fleet_nats":"insecure (--insecure-nats)`) {
		t.Errorf("/health with --insecure-nats: %s", body)
	}
	if !strings.Contains(d.logs.String(), "fleet nats without required credentials or tls") {
		t.Errorf("log does not name --insecure-nats:\n%s", d.logs)
	}
}

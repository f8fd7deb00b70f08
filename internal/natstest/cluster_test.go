package natstest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/crackbox/crackbox/internal/eventually"
)

// A replicated KV bucket keeps serving reads and writes with one node of three stopped,
// which is what the fleet tests rely on.
func TestClusterSurvivesOneNode(t *testing.T) {
	c := Start(t, 3)
	js, err := jetstream.New(c.Connect())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "t", Replicas: 3})
	if err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v1")); err != nil {
		t.Fatalf("put: %v", err)
	}
	c.StopNode(0)
	// A request in flight to the stopped node gets no answer, so each attempt has its own
	// short deadline and the client moves to another node between attempts.
	var e jetstream.KeyValueEntry
	var last error
	if !eventually.Within(50*time.Second, func() bool {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		defer acancel()
		_, last = kv.Put(actx, "k", []byte("v2"))
		if last == nil {
			e, last = kv.Get(actx, "k")
		}
		// KV reads are direct gets any replica may answer, so one that has
		// not applied the put yet answers the old value; read again.
		if last == nil && string(e.Value()) != "v2" {
			last = fmt.Errorf("stale read %q", e.Value())
		}
		return last == nil
	}) {
		t.Fatalf("bucket unusable with a node down: %v", last)
	}
	if string(e.Value()) != "v2" {
		t.Fatalf("got %q, want v2", e.Value())
	}
	c.StartNode(0)
}

package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Bucket is the NATS KV bucket of claimed due times.
const Bucket = "arizuko_schedule_claims"

// claimTTL keeps a claim longer than any control plane's clock skew or
// downtime could make it fire the same due time again.
const claimTTL = 48 * time.Hour

// KVClaimer claims due times in a JetStream KV bucket: Create of a key
// succeeds for its first writer only, so exactly one control plane of a
// fleet fires each (schedule, due time).
type KVClaimer struct {
	KV   jetstream.KeyValue
	Name string // written as the claim's value: who fired it
}

// OpenClaimer creates or opens the claims bucket.
func OpenClaimer(ctx context.Context, js jetstream.JetStream, replicas int, name string) (*KVClaimer, error) {
	if replicas <= 0 {
		replicas = 1
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: Bucket, TTL: claimTTL, Replicas: replicas,
		Description: "arizuko: which control plane fired a schedule's due time"})
	if err != nil {
		return nil, fmt.Errorf("schedule claims bucket %s: %w", Bucket, err)
	}
	return &KVClaimer{KV: kv, Name: name}, nil
}

// Claim is true for the first caller of (id, due) only.
func (c *KVClaimer) Claim(ctx context.Context, id int64, due time.Time) (bool, error) {
	_, err := c.KV.Create(ctx, claimKey(id, due), []byte(c.Name))
	if errors.Is(err, jetstream.ErrKeyExists) {
		return false, nil
	}
	return err == nil, err
}

func claimKey(id int64, due time.Time) string { return fmt.Sprintf("s%d.%d", id, due.UnixMilli()) }

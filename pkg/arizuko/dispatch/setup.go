package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/crackbox/crackbox/pkg/arizuko/home"
)

// Setup is the JetStream state of a fleet: the work stream, the runners'
// shared consumer and the two KV buckets.
type Setup struct {
	Stream   jetstream.Stream
	Consumer jetstream.Consumer
	Leases   jetstream.KeyValue
	Runners  jetstream.KeyValue
	// Homes holds folder homes; the control plane's alone (runners reach
	// homes through its API), nil in a runner's Setup.
	Homes *home.Store
}

// Ensure creates or updates the fleet's stream, consumer and buckets (the
// control plane does this). replicas ≤ 0 is DefaultReplicas; a NATS without
// that many nodes (a single dev server) falls back to one replica, loudly.
func Ensure(ctx context.Context, js jetstream.JetStream, leaseTTL time.Duration, replicas int, log *slog.Logger) (Setup, error) {
	if leaseTTL <= 0 {
		leaseTTL = DefaultLeaseTTL
	}
	if replicas <= 0 {
		replicas = DefaultReplicas
	}
	s, err := ensure(ctx, js, leaseTTL, replicas, log)
	if err != nil && replicas > 1 {
		log.Warn("fleet streams with one replica: the nats cluster refused more", "replicas", replicas, "err", err)
		s, err = ensure(ctx, js, leaseTTL, 1, log)
	}
	return s, err
}

func ensure(ctx context.Context, js jetstream.JetStream, ttl time.Duration, replicas int, log *slog.Logger) (Setup, error) {
	var s Setup
	var err error
	s.Stream, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: Stream, Subjects: []string{Subject}, Retention: jetstream.WorkQueuePolicy,
		Storage: jetstream.FileStorage, Replicas: replicas, Duplicates: time.Minute,
	})
	if err != nil {
		return s, fmt.Errorf("stream %s: %w", Stream, err)
	}
	// AckWait is the lease TTL: a runner that dies stops sending progress, and
	// its item goes to another runner about when its lease lapses.
	s.Consumer, err = s.Stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: Consumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: ttl, MaxDeliver: -1,
		Replicas: replicas,
	})
	if err != nil {
		return s, fmt.Errorf("consumer %s: %w", Consumer, err)
	}
	s.Leases, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: LeaseBucket, TTL: ttl, History: 1,
		Storage: jetstream.FileStorage, Replicas: replicas})
	if err != nil {
		return s, fmt.Errorf("bucket %s: %w", LeaseBucket, err)
	}
	s.Runners, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: RunnerBucket, TTL: 3 * ttl, History: 1,
		Storage: jetstream.FileStorage, Replicas: replicas})
	if err != nil {
		return s, fmt.Errorf("bucket %s: %w", RunnerBucket, err)
	}
	s.Homes, err = home.Ensure(ctx, js, replicas, log)
	return s, err
}

// Await waits for a control plane to have run Ensure (a runner may start first).
func Await(ctx context.Context, js jetstream.JetStream, log *slog.Logger) (Setup, error) {
	for warned := false; ; {
		s, err := lookup(ctx, js)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, jetstream.ErrStreamNotFound) && !errors.Is(err, jetstream.ErrConsumerNotFound) &&
			!errors.Is(err, jetstream.ErrBucketNotFound) && !warned {
			log.Warn("fleet streams not reachable yet", "err", err)
			warned = true
		} else if !warned {
			log.Info("waiting for the control plane to create the fleet streams")
			warned = true
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func lookup(ctx context.Context, js jetstream.JetStream) (Setup, error) {
	var s Setup
	var err error
	if s.Stream, err = js.Stream(ctx, Stream); err != nil {
		return s, err
	}
	if s.Consumer, err = s.Stream.Consumer(ctx, Consumer); err != nil {
		return s, err
	}
	if s.Leases, err = js.KeyValue(ctx, LeaseBucket); err != nil {
		return s, err
	}
	s.Runners, err = js.KeyValue(ctx, RunnerBucket)
	return s, err
}

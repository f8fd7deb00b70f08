package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/crackbox/crackbox/pkg/proxy"
)

// probeEvery is how often a following replica asks the bucket for its status,
// so a cluster that lost quorum behind a live connection shows as degraded.
const probeEvery = 5 * time.Second

// run follows the bucket until ctx ends, starting over from a full read after
// every failure or reconnect.
func (f *Fleet) run(ctx context.Context) {
	defer close(f.done)
	wait := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := f.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			wait = 100 * time.Millisecond
			continue
		}
		f.degrade(err)
		select {
		case <-ctx.Done():
			return
		case <-f.resync:
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// follow reads the whole bucket, adopts it as the registry, then applies each
// change as it comes. It returns nil to start over (after a reconnect) and an
// error when the bucket cannot be followed.
func (f *Fleet) follow(ctx context.Context) error {
	w, err := f.kv.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("watch bucket %s: %w", f.opts.Bucket, err)
	}
	defer w.Stop()
	snapshot := map[string]jetstream.KeyValueEntry{}
	synced := false
	probe := time.NewTicker(probeEvery)
	defer probe.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-f.resync:
			return nil
		case <-probe.C:
			pctx, cancel := context.WithTimeout(ctx, probeEvery)
			_, err := f.kv.Status(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("bucket %s status: %w", f.opts.Bucket, err)
			}
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return errors.New("bucket watch ended")
			case synced:
				f.apply(e)
			case e == nil:
				f.adopt(snapshot)
				synced = true
				f.caughtUp()
			default:
				snapshot[e.Key()] = e
			}
		}
	}
}

// adopt replaces the registry with a full read of the bucket.
func (f *Fleet) adopt(entries map[string]jetstream.KeyValueEntry) {
	var cs []proxy.Client
	revs := make(map[string]uint64, len(entries))
	for key, e := range entries {
		revs[key] = e.Revision()
		if e.Operation() != jetstream.KeyValuePut {
			continue
		}
		c, err := f.decode(key, e.Value())
		if err != nil {
			f.skip(key, e.Revision(), err)
			continue
		}
		cs = append(cs, c)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revs = revs
	f.reg.Replace(cs)
}

// apply mirrors one change; older revisions than the one applied (by this
// replica's own edit, say) are ignored.
func (f *Fleet) apply(e jetstream.KeyValueEntry) {
	key := e.Key()
	ip, err := ipOf(key)
	if err != nil {
		f.skip(key, e.Revision(), err)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if e.Revision() <= f.revs[key] {
		return
	}
	f.revs[key] = e.Revision()
	if e.Operation() != jetstream.KeyValuePut {
		f.reg.Unregister(ip)
		return
	}
	c, err := f.decode(key, e.Value())
	if err != nil {
		// The entry's last good version is stale now: refuse the address
		// rather than keep enforcing what the bucket no longer says.
		f.reg.Unregister(ip)
		f.skip(key, e.Revision(), err)
		return
	}
	_ = f.reg.Put(c)
}

func (f *Fleet) skip(key string, rev uint64, err error) {
	f.m.skipped.Inc()
	f.log.Warn("registry entry malformed, skipped", "bucket", f.opts.Bucket, "key", key, "revision", rev, "err", err)
}

package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/crackbox/crackbox/pkg/admin"
	"github.com/crackbox/crackbox/pkg/proxy"
)

// editTries bounds the compare-and-set retries of one Update under contention.
// A read may come from a bucket replica that lags the leader, so a retry waits
// a little longer each time for it to catch up.
const editTries = 8

// Register stores c for every replica; it fails with proxy.ErrClientExists
// when any replica already registered the address.
func (f *Fleet) Register(c proxy.Client) error {
	if !c.IP.IsValid() {
		return fmt.Errorf("register client %q: no IP address: %w", c.ID, proxy.ErrInvalidClient)
	}
	c.IP = c.IP.Unmap()
	key := keyOf(c.IP)
	val, err := f.encode(key, c)
	if errors.Is(err, ErrNoSigner) {
		return err
	}
	if err != nil {
		return fmt.Errorf("register client %q: %w: %w", c.ID, proxy.ErrInvalidClient, err)
	}
	ctx, cancel := f.editCtx()
	defer cancel()
	rev, err := f.kv.Create(ctx, key, val)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("register client %q at %s: %w", c.ID, c.IP, proxy.ErrClientExists)
	}
	if err != nil {
		return unavailable("register", c.IP, err)
	}
	f.putLocal(key, rev, c)
	return nil
}

// Unregister removes the client at ip for every replica.
func (f *Fleet) Unregister(ip netip.Addr) (bool, error) {
	if f.opts.Signer == nil {
		// A deletion carries no signature, but only the admin API's replicas edit.
		return false, fmt.Errorf("unregister client at %s: %w: %w", ip, admin.ErrUnavailable, ErrNoSigner)
	}
	ctx, cancel := f.editCtx()
	defer cancel()
	key := keyOf(ip)
	e, err := f.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, unavailable("unregister", ip, err)
	}
	if err := f.kv.Delete(ctx, key, jetstream.LastRevision(e.Revision())); err != nil {
		return false, unavailable("unregister", ip, err)
	}
	f.mu.Lock()
	f.reg.Unregister(ip)
	f.mu.Unlock()
	return true, nil
}

// Update edits the allowlist of the client at ip for every replica, retrying
// when another replica changed it in between.
func (f *Fleet) Update(ip netip.Addr, add, remove []string) (proxy.Client, error) {
	ctx, cancel := f.editCtx()
	defer cancel()
	key := keyOf(ip)
	for try := range editTries {
		if try > 0 {
			time.Sleep(time.Duration(try*try) * 5 * time.Millisecond)
		}
		e, err := f.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return proxy.Client{}, fmt.Errorf("update client at %s: %w", ip, proxy.ErrUnknownClient)
		}
		if err != nil {
			return proxy.Client{}, unavailable("update", ip, err)
		}
		c, err := f.decode(key, e.Value())
		if err != nil {
			return proxy.Client{}, fmt.Errorf("update client at %s: stored entry malformed: %w", ip, err)
		}
		if c.Allow, err = c.Allow.With(add, remove); err != nil {
			return proxy.Client{}, fmt.Errorf("update client %q: %w", c.ID, err)
		}
		val, err := f.encode(key, c)
		if err != nil {
			return proxy.Client{}, err
		}
		rev, err := f.kv.Update(ctx, key, val, e.Revision())
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			continue // changed meanwhile: read it again
		}
		if err != nil {
			return proxy.Client{}, unavailable("update", ip, err)
		}
		f.putLocal(key, rev, c)
		return c, nil
	}
	return proxy.Client{}, unavailable("update", ip, errors.New("changed concurrently too often"))
}

// putLocal applies an edit this replica stored, ahead of its echo from the watch.
func (f *Fleet) putLocal(key string, rev uint64, c proxy.Client) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if rev > f.revs[key] {
		f.revs[key] = rev
		_ = f.reg.Put(c)
	}
}

// editTimeout bounds one admin edit, so a request made while NATS is away is
// answered 503 soon instead of hanging in the client's reconnect buffer.
const editTimeout = 5 * time.Second

func (f *Fleet) editCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), min(editTimeout, f.opts.Timeout))
}

func unavailable(op string, ip netip.Addr, err error) error {
	return fmt.Errorf("%s client at %s: %w: %w", op, ip, admin.ErrUnavailable, err)
}

// Package fleet shares a proxy's client registry among replicas through a NATS
// JetStream key-value bucket. Every replica watches the bucket and mirrors it
// into its own proxy.Registry, so an edit made through any replica's admin API
// is enforced by all. When NATS is unreachable a replica keeps enforcing its
// last copy and reports itself degraded; it never opens up: a client that is
// not in its copy is refused.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/crackbox/crackbox/internal/natsauth"
	"github.com/crackbox/crackbox/pkg/admin"
	"github.com/crackbox/crackbox/pkg/proxy"
)

// Errors Open returns for the input an operator must fix.
var (
	ErrUnreachable = errors.New("no NATS server reachable")
	ErrAuth        = errors.New("NATS refused the credentials")
	ErrNoJetStream = errors.New("NATS has JetStream disabled")
)

// DefaultBucket is the KV bucket that holds the registry.
const DefaultBucket = "crackbox-registry"

// Options configures a Fleet member.
type Options struct {
	URL   string // comma-separated NATS URLs; user:password@ is allowed
	Creds string // JWT credentials file; "" = none
	NKey  string // nkey seed file; "" = none
	CA    string // PEM CAs for the servers' TLS; "" = system roots
	// Insecure connects without requiring TLS (--insecure-nats).
	Insecure bool
	// Signer signs the values this replica's admin API writes; nil leaves
	// the replica unable to edit the registry.
	Signer nkeys.KeyPair
	// Signers are the public nkeys whose values the replica enforces,
	// besides Signer's own.
	Signers  []string
	Bucket   string // "" = DefaultBucket
	Replica  string // names the NATS connection
	Registry *proxy.Registry
	// Timeout bounds opening the bucket and reading it once at the start;
	// 0 = 30s. Dialing one server is bounded by 5s, an edit by 5s.
	Timeout    time.Duration
	Registerer prometheus.Registerer // nil = no metrics
	Log        *slog.Logger          // nil discards
}

// Fleet keeps a local proxy.Registry equal to the shared bucket. It is the
// admin.Shared of a replica.
type Fleet struct {
	opts   Options
	log    *slog.Logger
	nc     *nats.Conn
	kv     jetstream.KeyValue
	reg    *proxy.Registry
	resync chan struct{}
	synced chan struct{} // closed after the first full read
	cancel context.CancelFunc
	done   chan struct{}
	m      metrics
	// trusted are the public keys a value's signature must verify under.
	trusted []string

	mu    sync.Mutex
	revs  map[string]uint64 // last revision applied per key, deletions included
	since time.Time         // when the replica stopped following the bucket
	why   error             // nil while it follows
	once  sync.Once
}

var _ admin.Shared = (*Fleet)(nil)

// Open connects, opens (or creates) the bucket, reads it into opts.Registry
// and keeps following it until Close. It fails rather than start a replica
// that has never seen the registry.
func Open(ctx context.Context, opts Options) (*Fleet, error) {
	if opts.Registry == nil {
		return nil, errors.New("fleet: no registry")
	}
	if opts.Bucket == "" {
		opts.Bucket = DefaultBucket
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	trusted, err := trustedKeys(opts)
	if err != nil {
		return nil, err
	}
	f := &Fleet{trusted: trusted,
		opts: opts, log: opts.Log, reg: opts.Registry,
		resync: make(chan struct{}, 1), synced: make(chan struct{}), done: make(chan struct{}),
		revs: map[string]uint64{}, m: newMetrics(opts.Registerer),
	}
	f.degrade(errors.New("not read yet"))
	if err := f.connect(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	if err := f.openBucket(ctx); err != nil {
		f.nc.Close()
		return nil, err
	}
	runCtx, stop := context.WithCancel(context.Background())
	f.cancel = stop
	go f.run(runCtx)
	select {
	case <-f.synced:
		return f, nil
	case <-ctx.Done():
		_, why := f.Status()
		f.Close()
		return nil, fmt.Errorf("read bucket %s within %s: %w: %v", opts.Bucket, opts.Timeout, ErrUnreachable, why)
	}
}

// connect dials NATS once; later losses are retried for ever in the background.
func (f *Fleet) connect() error {
	o := []nats.Option{
		nats.Name("crackbox proxy " + f.opts.Replica),
		nats.Timeout(5 * time.Second),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err == nil {
				err = errors.New("connection closed")
			}
			f.degrade(fmt.Errorf("nats disconnected: %w", err))
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			f.log.Info("registry reconnected", "server", nc.ConnectedUrlRedacted())
			f.requestResync()
		}),
	}
	auth, err := natsauth.Auth{Creds: f.opts.Creds, NKey: f.opts.NKey, CA: f.opts.CA, Insecure: f.opts.Insecure}.Options()
	if err != nil {
		return err
	}
	nc, err := nats.Connect(f.opts.URL, append(o, auth...)...)
	switch {
	case err == nil:
		f.nc = nc
		return nil
	case errors.Is(err, nats.ErrAuthorization), strings.Contains(strings.ToLower(err.Error()), "authorization violation"),
		strings.Contains(strings.ToLower(err.Error()), "authentication"):
		return fmt.Errorf("%w: %v", ErrAuth, err)
	case errors.Is(err, nats.ErrNoServers):
		return fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	return natsauth.Explain(err)
}

// trustedKeys are Signers and Signer's public key; a replica must trust one.
func trustedKeys(o Options) ([]string, error) {
	if err := CheckSigners(o.Signers); err != nil {
		return nil, fmt.Errorf("fleet: registry signer: %w", err)
	}
	keys := append([]string(nil), o.Signers...)
	if o.Signer != nil {
		pub, err := o.Signer.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("fleet: registry signing key: %w", err)
		}
		keys = append(keys, pub)
	}
	if len(keys) == 0 {
		return nil, errors.New("fleet: no registry signing key and no trusted signer: a replica enforces only signed values")
	}
	return keys, nil
}

// openBucket binds the bucket, creating it with three replicas, or one when
// the cluster is smaller.
func (f *Fleet) openBucket(ctx context.Context) error {
	js, err := jetstream.New(f.nc)
	if err != nil {
		return err
	}
	f.kv, err = js.KeyValue(ctx, f.opts.Bucket)
	if err == nil {
		return nil
	}
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return fmt.Errorf("%w: enable jetstream on every node", ErrNoJetStream)
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return fmt.Errorf("open bucket %s: %w", f.opts.Bucket, err)
	}
	cfg := jetstream.KeyValueConfig{Bucket: f.opts.Bucket, Storage: jetstream.FileStorage, Replicas: 3,
		Description: "crackbox proxy client registry"}
	if f.kv, err = js.CreateKeyValue(ctx, cfg); err == nil || !tooFewPeers(err) {
		if err != nil {
			return fmt.Errorf("create bucket %s: %w", f.opts.Bucket, err)
		}
		return nil
	}
	three := err
	cfg.Replicas = 1
	if f.kv, err = js.CreateKeyValue(ctx, cfg); err != nil {
		return fmt.Errorf("create bucket %s: %w", f.opts.Bucket, errors.Join(three, err))
	}
	f.log.Warn("registry bucket has one replica: the cluster could not place three", "bucket", f.opts.Bucket, "err", three)
	return nil
}

// tooFewPeers tells a server's refusal to place three replicas (a single node,
// or a cluster short of nodes) from a timeout or any other failure.
func tooFewPeers(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == 10074 || apiErr.ErrorCode == 10023 || strings.Contains(apiErr.Description, "peers")
}

// Status is nil while the replica follows the bucket, else why not and since when.
func (f *Fleet) Status() (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.since, f.why
}

// Transport says whether NATS credentials and TLS were required.
func (f *Fleet) Transport() string {
	return natsauth.Auth{Insecure: f.opts.Insecure}.Describe()
}

// degrade records that the replica stopped following; the first cause and
// time stay until it catches up.
func (f *Fleet) degrade(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.why != nil {
		return
	}
	f.since, f.why = time.Now(), err
	f.m.degraded.Set(1)
	select {
	case <-f.synced:
		f.log.Warn("registry degraded: enforcing the last copy", "err", err)
	default:
	}
}

// caughtUp records that the local copy equals the bucket again.
func (f *Fleet) caughtUp() {
	f.mu.Lock()
	was := f.why
	f.since, f.why = time.Time{}, nil
	f.mu.Unlock()
	f.m.degraded.Set(0)
	f.once.Do(func() { close(f.synced) })
	if was != nil {
		f.log.Info("registry following the bucket", "bucket", f.opts.Bucket, "clients", len(f.reg.List()))
	}
}

func (f *Fleet) requestResync() {
	select {
	case f.resync <- struct{}{}:
	default:
	}
}

// Close stops following and closes the connection; the registry keeps its
// last contents.
func (f *Fleet) Close() {
	if f.cancel != nil {
		f.cancel()
		<-f.done
		f.cancel = nil
	}
	f.nc.Close()
}

// Package natstest runs a real NATS JetStream cluster in-process on loopback for tests:
// every node is a nats-server with file storage in a temp dir, so a node can be stopped
// and started again with its data, as an operator would restart one.
package natstest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/nettest"
)

// Cluster is a running set of JetStream nodes sharing one cluster name.
type Cluster struct {
	t       testing.TB
	Name    string
	host    string // where clients connect
	opts    []*server.Options
	servers []*server.Server
	scheme  string // of client URLs; "" = nats
	// clientOpts authenticate Connect and WaitReady (a Shipped node's control plane).
	clientOpts []nats.Option
}

// Start runs an n-node JetStream cluster (n ≥ 1) and waits until it has a meta leader,
// so streams and KV buckets can be created at once. The nodes stop when the test ends.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	return StartOn(t, n, "127.0.0.1")
}

// StartOn is Start with the client ports on host (routes stay on loopback),
// for clients in other network namespaces. The nodes do not advertise other
// client addresses, so a client only ever dials host.
func StartOn(t testing.TB, n int, host string) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("natstest: %d nodes; need at least 1", n)
	}
	c := &Cluster{t: t, Name: "natstest", host: host}
	clientPorts := freePorts(t, host, n, nil)
	routePorts := freePorts(t, "127.0.0.1", n, clientPorts)
	var routes []string
	for _, p := range routePorts {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	for i := 0; i < n; i++ {
		o := &server.Options{
			ServerName: fmt.Sprintf("n%d", i+1),
			Host:       host,
			Port:       clientPorts[i],
			JetStream:  true,
			StoreDir:   t.TempDir(),
			NoSigs:     true,
			NoLog:      true,
		}
		if n > 1 {
			o.Cluster = server.ClusterOpts{Name: c.Name, Host: "127.0.0.1", Port: routePorts[i], NoAdvertise: true}
			o.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		}
		c.opts = append(c.opts, o)
		c.servers = append(c.servers, nil)
	}
	t.Cleanup(c.Shutdown)
	for i := range c.opts {
		c.startNode(i)
	}
	c.WaitReady()
	return c
}

func (c *Cluster) startNode(i int) {
	c.t.Helper()
	s, err := server.NewServer(c.opts[i])
	if err != nil {
		c.t.Fatalf("natstest: node %d: %v", i+1, err)
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		c.t.Fatalf("natstest: node %d not ready for connections", i+1)
	}
	c.servers[i] = s
}

// WaitReady waits until the cluster answers JetStream requests (it has a meta leader),
// asked the way a client would: an account-info request through a connection.
func (c *Cluster) WaitReady() {
	c.t.Helper()
	nc, err := nats.Connect(c.URL(), c.clientOpts...)
	if err != nil {
		c.t.Fatalf("natstest: connect: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		c.t.Fatalf("natstest: jetstream: %v", err)
	}
	var last error
	if !eventually.Within(60*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, last = js.AccountInfo(ctx)
		return last == nil
	}) {
		c.t.Fatalf("natstest: cluster %s not serving JetStream after 60s: %v", c.Name, last)
	}
}

// URL is a client URL listing every node, for nats.Connect: a client fails over to the
// next node when one stops.
func (c *Cluster) URL() string {
	var urls []string
	for _, o := range c.opts {
		urls = append(urls, fmt.Sprintf("%s://%s:%d", c.urlScheme(), c.host, o.Port))
	}
	return strings.Join(urls, ",")
}

// NodeURL is the client URL of node i alone.
func (c *Cluster) NodeURL(i int) string {
	return fmt.Sprintf("%s://%s:%d", c.urlScheme(), c.host, c.opts[i].Port)
}

func (c *Cluster) urlScheme() string {
	if c.scheme == "" {
		return "nats"
	}
	return c.scheme
}

// Connect opens a client connection to the whole cluster, closed when the test ends.
func (c *Cluster) Connect(opts ...nats.Option) *nats.Conn {
	c.t.Helper()
	opts = append(append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond)}, c.clientOpts...), opts...)
	nc, err := nats.Connect(c.URL(), opts...)
	if err != nil {
		c.t.Fatalf("natstest: connect: %v", err)
	}
	c.t.Cleanup(nc.Close)
	return nc
}

// StopNode shuts node i down, keeping its store for StartNode.
func (c *Cluster) StopNode(i int) {
	if s := c.servers[i]; s != nil {
		s.Shutdown()
		s.WaitForShutdown()
		c.servers[i] = nil
	}
}

// StartNode starts a stopped node i again on its old ports and store.
func (c *Cluster) StartNode(i int) {
	c.t.Helper()
	if c.servers[i] == nil {
		c.startNode(i)
	}
}

// Shutdown stops every node.
func (c *Cluster) Shutdown() {
	for i := range c.servers {
		c.StopNode(i)
	}
}

// freePorts picks n ports free on host and not in taken: the cluster needs
// every route port before any node starts, and a node restarts on its old ports.
func freePorts(t testing.TB, host string, n int, taken []int) []int {
	t.Helper()
	var ports []int
	for len(ports) < n {
		if p := nettest.FreePort(t, host); !slices.Contains(ports, p) && !slices.Contains(taken, p) {
			ports = append(ports, p)
		}
	}
	return ports
}

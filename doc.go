// Package crackbox is the module's map: two binaries and the packages each is built
// from. It holds no code; `go doc github.com/crackbox/crackbox` shows this page, and
// TestLayoutMap keeps it and README.md's layout table naming every package.
//
// The engine, shared by both binaries (crackbox runs one command in a guest, arizuko
// one agent turn):
//
//	pkg/jail            jail.Run(ctx, Spec): one throwaway QEMU guest for one command
//	internal/jailtest   the one helper tests boot guests through (two at a time)
//	pkg/jail/netjail         the run's network: tap, nftables table, address pool, proxy and DNS
//	pkg/proxy           the egress proxy: forward and transparent modes, destination guard
//	pkg/proxy/allow           the one host matcher every allow decision goes through
//	pkg/proxy/dns             the per-run DNS responder (allowlisted names only)
//	pkg/proxy/dest            the destination refusals the proxy returns and the DNS responder maps
//	pkg/proxy/inject          secret placeholders, request rewriting, response scrubbing
//	pkg/jail/sharefs         the 9p server for workdir, volumes and /etc
//	pkg/jail/initramfs       the guest's initramfs, built in Go
//	pkg/jail/control         the host to guest-init protocol
//	pkg/config          crackbox.toml and the CRACKBOX_* names: flags > env > file > defaults
//	internal/proc            process start times from /proc
//	internal/buildinfo       the version behind --version and /health
//	internal/lograte    rate-limited warnings for what a guest or client can trigger at will
//	internal/hostfile   opens operator-named files without following planted symlinks
//
// crackbox alone (cmd/crackbox):
//
//	pkg/admin           the proxy daemon's admin API and state file
//	pkg/admin/fleet           the registry proxy replicas share through a JetStream KV bucket
//	internal/natsauth        NATS credentials and TLS, refused unless given or --insecure-nats
//	pkg/jail/runrec          run records (crackbox runs)
//	internal/logfile         append-only, size-capped log files
//
// arizuko alone (cmd/arizuko):
//
//	pkg/arizuko/service         arizuko's operations (local and remote behind one interface)
//	internal/servicetest  the test fixture: a fresh data dir with a bootstrapped service
//	pkg/arizuko/api             its HTTP API and scoped tokens
//	pkg/arizuko/store           the store, SQLite or PostgreSQL (the only package with SQL)
//	pkg/arizuko/folder          folders (tenants)
//	pkg/router          routes: which folder gets an inbound message
//	pkg/arizuko/acl             grants: the decision on every tool call
//	pkg/secrets         sealed secrets
//	pkg/arizuko/turn            turns: one guest per agent turn, through pkg/jail/netjail and pkg/jail
//	pkg/arizuko/dispatch        turns as JetStream work items for runner hosts, folder leases
//	pkg/arizuko/home            folder homes as content-addressed chunks: scan, sync, history in JetStream
//	pkg/arizuko/gated           the per-folder MCP server
//	pkg/arizuko/delivery        outbound delivery
//	pkg/arizuko/adapter         the adapter contract: wire types, signature, handler, conformance kit
//	pkg/arizuko/slackadapter    the Slack adapter (Events API in, chat.postMessage out)
//	internal/slacktest  a loopback stand-in for the Slack Web API it uses
//	pkg/arizuko/webchat         the web chat page
//	pkg/arizuko/hook            webhooks: a POST to /hook/<token> becomes a message
//	pkg/arizuko/schedule        scheduled turns: cron firing, once per due time
//	pkg/arizuko/email           the email channel: IMAP in, SMTP replies, verified senders
//	internal/webdriver       the WebDriver client the web chat's browser test drives
//
// Inside the guest (guestfs/init, PID 1 of every guest):
//
//	pkg/jail/guest           guest-init
//	guestfs/init        its main package
//	guestfs/probe       the syscall probe a guest test runs
//
// Tests and benchmarks:
//
//	internal/nettest    loopback listeners, echo, TLS and DNS upstreams, busy ports, a safe buffer
//	internal/natstest   an in-process JetStream cluster
//	internal/pgtest     a throwaway PostgreSQL cluster
//	internal/mailtest   throwaway postfix and dovecot on loopback ports
//	internal/proctest   a test's own child processes (the share servers a run starts)
//	internal/testreq    skip or fail on a missing prerequisite
//	internal/testsum    make test's summary line
//	bench/proxybench    the proxy benchmark against squid and tinyproxy
//	bench/hostilebench  the hostile-client RSS benchmark
//
// Documents: README.md (usage, threat model, layout), docs/README.md (an index),
// BENCHMARKS.md (figures), crackbox.toml.example and arizuko.toml.example.
package crackbox

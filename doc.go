// Package crackbox is the module's map: two binaries and the packages each is built
// from. It holds no code; `go doc github.com/crackbox/crackbox` shows this page. The
// tree, nested by product and concern:
//
//	cmd/crackbox/       crackbox: one command in a throwaway guest, and the egress proxy daemon
//	cmd/arizuko/        arizuko: agent tenancy on the same engine
//	guestfs/            inside the guest: guest-init's main, the syscall probe, the kernel build
//	pkg/jail/           the engine both binaries run: one throwaway guest per command
//	    control/ guest/ host/ initramfs/ install/ netjail/ rundir/ runrec/ sharefs/
//	pkg/proxy/          the egress proxy and what its decisions are made of
//	    allow/ dest/ dns/ inject/
//	pkg/admin/          the proxy daemon's admin API and state
//	    fleet/
//	pkg/config/         configuration of both binaries
//	pkg/secrets/        sealed secrets
//	pkg/router/         arizuko's routes
//	pkg/arizuko/        the rest of arizuko
//	    acl/ adapter/ api/ delivery/ dispatch/ email/ folder/ gated/ home/ hook/
//	    schedule/ service/ slackadapter/ store/ turn/ webchat/
//	internal/           plumbing the binaries share
//	    buildinfo/ envvar/ hostfile/ httpjson/ logfile/ lograte/ logsetup/ natsauth/ proc/ relay/
//	                    and what only tests import
//	    eventually/ jailtest/ mailtest/ natstest/ nettest/ pgtest/ proctest/ readmetest/
//	    servicetest/ slacktest/ testreq/ testsum/ webdriver/
//	bench/              the benchmarks
//
// README.md's Layout section has this drawing and a row per package saying which binary
// it is built into; TestLayoutMap derives that from `go list -deps` and keeps both
// drawings and the rows in step with the tree.
//
// Documents: README.md (usage, threat model, layout), docs/README.md (an index),
// BENCHMARKS.md (figures), crackbox.toml.example and arizuko.toml.example.
package crackbox

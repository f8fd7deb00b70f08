#!/usr/bin/env bash
# The first-run paths of a machine that has never seen crackbox, whatever this
# machine has seen: a run dir base that does not exist yet (as after a reboot),
# an empty cache (no initramfs, no snapshot) and other programs on the ports a
# tap guest dials. The tests hold those ports themselves; this script gives
# them directories no earlier run has touched.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
fresh=$(mktemp -d /tmp/crackbox-fresh-XXXXXX)
trap 'rm -rf "$fresh"' EXIT
chmod 0711 "$fresh" # QEMU runs as nobody and must traverse the parent of the base
# The kernel comes from the real cache (a build is minutes); only what a run itself
# creates (initramfs, snapshots, run dirs) starts empty.
: "${CRACKBOX_KERNEL:=$(guestfs/kernel/build.sh 2>/dev/null | tail -1)}"
export CRACKBOX_RUN_DIR=$fresh/run CRACKBOX_CACHE=$fresh/cache
: "${CRACKBOX_GUEST_INIT:=$PWD/bin/guest-init}"
export CRACKBOX_KERNEL CRACKBOX_GUEST_INIT
CGO_ENABLED=1 $GO test -race -count=1 -timeout 20m \
  -run 'TestFreshHost|TestPrepareTapWithBusyHostPorts|TestJailedGuestThroughServices|TestEnsureRunDirBase' \
  ./cmd/crackbox ./pkg/jail/netjail ./pkg/jail/rundir

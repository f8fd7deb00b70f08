#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages crackbox needs. With no argument (make deps,
# make demo): what running crackbox needs, QEMU, the guest kernel's build tools and
# nftables. With "test" (make test-deps, make test): that plus what the test suite
# drives, Chromium, PostgreSQL, postfix and dovecot, Node and Claude Code. --list prints the packages the
# mode wants and installs nothing. Skips apt entirely when everything is already there.
set -euo pipefail
mode=run list=
for a in "$@"; do
  case "$a" in
    run|test) mode=$a ;;
    --list) list=1 ;;
    *) echo "deps: unknown argument $a; use [run|test] [--list]" >&2; exit 2 ;;
  esac
done
# crackbox run: QEMU, the kernel build (guestfs/kernel/build.sh), the tap's nftables
# and routes, and the TLS roots and curl the demo's guest uses from the host's /usr.
pkgs=(qemu-system-x86 linux-source-6.1 build-essential patch flex bison bc libelf-dev libssl-dev
  cpio xz-utils kmod nftables iproute2 curl ca-certificates)
npm_pkgs=()
if [ "$mode" = test ]; then
  # qemu-img and busybox build test guests; lz4 unpacks the Debian kernel (make
  # debian-kernel); systemd-analyze checks the units; chromium drives the browser tests;
  # internal/pgtest starts throwaway PostgreSQL clusters for the store tests; the
  # workdir tests make a venv and a git repository in a guest; internal/mailtest
  # starts throwaway postfix and dovecot for the email channel's tests.
  pkgs+=(qemu-utils busybox-static wget git python3 python3-pip python3-venv lz4 openssl systemd
    chromium chromium-driver nodejs npm postgresql postfix dovecot-imapd)
  # Claude Code, the agent the guest tests start (cmd/crackbox, pkg/arizuko/turn), from the npm
  # registry like any user's install.
  npm_pkgs=(@anthropic-ai/claude-code)
fi
if [ -n "$list" ]; then
  printf '%s\n' "${pkgs[@]}" "${npm_pkgs[@]/#/npm:}"
  exit 0
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# A node from elsewhere (NodeSource's nodejs ships its own npm) satisfies both.
if [ "$mode" = test ] && command -v node >/dev/null && command -v npm >/dev/null; then
  missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
  read -r -a missing <<<"${missing[*]}"
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ ${#npm_pkgs[@]} -gt 0 ] && ! command -v claude >/dev/null; then
  echo "deps: installing Claude Code (npm install -g ${npm_pkgs[*]})" >&2
  npm install -g --no-audit --no-fund "${npm_pkgs[@]}" >/dev/null
fi

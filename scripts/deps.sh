#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages crackbox needs to build, run guests and test.
# Skips apt entirely when everything is already there.
set -euo pipefail
pkgs=(qemu-system-x86 qemu-utils linux-source-6.1 build-essential flex bison bc libelf-dev
  libssl-dev cpio xz-utils nftables iproute2 busybox-static curl wget git ca-certificates
  python3 python3-pip lz4 kmod chromium chromium-driver systemd nodejs npm openssl)
# internal/pgtest starts throwaway PostgreSQL clusters for the store tests.
pkgs+=(postgresql)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# A node from elsewhere (NodeSource's nodejs ships its own npm) satisfies both.
if command -v node >/dev/null && command -v npm >/dev/null; then
  missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
  read -r -a missing <<<"${missing[*]}"
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
# Claude Code, the agent the guest tests start (cmd/crackbox, pkg/turn), from the npm
# registry like any user's install.
if ! command -v claude >/dev/null; then
  echo "deps: installing Claude Code (npm install -g @anthropic-ai/claude-code)" >&2
  npm install -g --no-audit --no-fund @anthropic-ai/claude-code >/dev/null
fi

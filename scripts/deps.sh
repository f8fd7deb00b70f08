#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages crackbox needs to build, run guests and test.
# Skips apt entirely when everything is already there.
set -euo pipefail
pkgs=(qemu-system-x86 qemu-utils linux-source-6.1 build-essential flex bison bc libelf-dev
  libssl-dev cpio xz-utils nftables iproute2 busybox-static curl wget git ca-certificates
  python3 python3-pip lz4 kmod chromium chromium-driver systemd)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null

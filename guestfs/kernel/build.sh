#!/usr/bin/env bash
# Builds the guest kernel (an uncompressed vmlinux, booted through its PVH entry) from
# Debian's linux-source-6.1 and the fragment beside this script. The output is cached
# outside the clone, keyed by the fragment, this script, the patches beside it and the
# source package version, so a machine builds it once. Prints the path of vmlinux on its
# last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${CRACKBOX_CACHE:-${XDG_CACHE_HOME:-${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}/.cache}/crackbox}
tarball=/usr/src/linux-source-6.1.tar.xz
if [ ! -f "$tarball" ]; then
  echo "kernel: $tarball missing; install it with: apt-get install linux-source-6.1" >&2
  exit 1
fi
srcver=$(dpkg-query -W -f='${Version}' linux-source-6.1)
key=$( { cat "$here/config.fragment" "$here/build.sh" "$here"/*.patch; echo "$srcver"; } | sha256sum | cut -c1-16)
out="$cache/kernel-$key"
# One build per key at a time: a second caller waits for the first and takes its result.
mkdir -p "$cache"
exec 9>"$cache/kernel-$key.lock"
if ! flock -n 9; then
  echo "kernel: another build of this kernel is running; waiting for it" >&2
  flock 9
fi
if [ -f "$out/vmlinux" ]; then
  echo "kernel: cached" >&2
  echo "$out/vmlinux"
  exit 0
fi
work="$cache/build-$key"
mkdir -p "$work"
if [ ! -f "$work/src/Makefile" ]; then
  echo "kernel: unpacking $tarball" >&2
  rm -rf "$work/src"
  mkdir -p "$work/src"
  tar -xJf "$tarball" -C "$work/src" --strip-components=1
  # Our changes to the source, each explained in its own header.
  for p in "$here"/*.patch; do
    patch -s -p1 -d "$work/src" < "$p"
  done
fi
cd "$work/src"
make -s ARCH=x86_64 tinyconfig >/dev/null
scripts/kconfig/merge_config.sh -m -O . .config "$here/config.fragment" >/dev/null
make -s ARCH=x86_64 olddefconfig >/dev/null
# Dependencies can silently drop an option; fail loudly instead of booting a kernel
# that lacks a filesystem or driver the guest relies on.
missing=""
while IFS= read -r line; do
  case "$line" in CONFIG_*=y) grep -qx "$line" .config || missing+=" ${line%=y}" ;; esac
done < "$here/config.fragment"
if [ -n "$missing" ]; then
  echo "kernel: options not set after olddefconfig:$missing" >&2
  exit 1
fi
jobs=$(( $(nproc) + 1 ))
total=$(grep -c '=y' .config)
echo "kernel: building vmlinux with make -j$jobs ($total options on; progress every 100 objects)" >&2
start=$(date +%s)
make ARCH=x86_64 -j"$jobs" vmlinux 2>&1 | tee "$work/build.log" |
  awk -v start="$start" '/^  CC /{n++; if (n%100==0) {printf "kernel: %d objects compiled, %ds\n", n, systime()-start > "/dev/stderr"; fflush()}}'
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "kernel: build failed, see $work/build.log" >&2; exit 1; }
mkdir -p "$out.tmp"
cp vmlinux "$out.tmp/vmlinux"
cp .config "$out.tmp/config"
echo "$(( $(date +%s) - start ))" > "$out.tmp/build-seconds"
rm -rf "$out"; mv "$out.tmp" "$out"
rm -rf "$work"
echo "kernel: built in $(cat "$out/build-seconds")s" >&2
echo "$out/vmlinux"

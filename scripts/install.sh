#!/usr/bin/env bash
# make install: lays out an installed crackbox under $DESTDIR$PREFIX from the
# binaries in bin/ (make build). crackbox finds guest-init and the kernel in
# <prefix>/lib/crackbox relative to itself, so the tree also works relocated
# (make dist tars it up).
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
root=$DESTDIR$PREFIX
# Where the units expect the binaries: the prefix, unless the tree is relocatable (make dist).
UNIT_BINDIR=${UNIT_BINDIR:-$PREFIX/bin}
for b in crackbox arizuko guest-init; do
  [ -x "bin/$b" ] || { echo "install: bin/$b missing; run make build first" >&2; exit 1; }
done
install -d "$root/bin" "$root/lib/crackbox" "$root/share/crackbox/examples" \
  "$root/share/crackbox/kernel" "$root/lib/systemd/system" "$root/share/man/man1" \
  "$root/share/bash-completion/completions" "$root/share/zsh/site-functions" \
  "$root/share/fish/vendor_completions.d"
install -m 0755 bin/crackbox bin/arizuko "$root/bin/"
install -m 0755 bin/guest-init "$root/lib/crackbox/guest-init"

# The kernel this checkout builds, if it has been built ($CRACKBOX_KERNEL wins).
kernel=${CRACKBOX_KERNEL:-}
if [ -z "$kernel" ]; then
  cache=${CRACKBOX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/crackbox}
  kernel=$(ls -t "$cache"/kernel-*/vmlinux 2>/dev/null | head -1 || true)
fi
if [ -n "$kernel" ] && [ -f "$kernel" ]; then
  install -m 0644 "$kernel" "$root/lib/crackbox/vmlinux"
  # A modular kernel (the Debian fallback) needs its modules beside it.
  if [ -d "$(dirname "$kernel")/crackbox-modules" ]; then
    cp -r "$(dirname "$kernel")/crackbox-modules" "$root/lib/crackbox/"
  fi
else
  echo "install: no guest kernel built; crackbox setup builds one on the target" >&2
fi
install -m 0755 guestfs/kernel/build.sh "$root/share/crackbox/kernel/build.sh"
install -m 0644 guestfs/kernel/config.fragment "$root/share/crackbox/kernel/config.fragment"
install -m 0644 crackbox.toml.example arizuko.toml.example "$root/share/crackbox/examples/"

for u in contrib/systemd/*.service; do
  sed "s|@BINDIR@|$UNIT_BINDIR|g" "$u" > "$root/lib/systemd/system/$(basename "$u")"
  chmod 0644 "$root/lib/systemd/system/$(basename "$u")"
done

for b in crackbox arizuko; do
  "bin/$b" completion bash > "$root/share/bash-completion/completions/$b"
  "bin/$b" completion zsh > "$root/share/zsh/site-functions/_$b"
  "bin/$b" completion fish > "$root/share/fish/vendor_completions.d/$b.fish"
  "bin/$b" man-pages "$root/share/man/man1"
done
echo "installed into $root" >&2

#!/usr/bin/env bash
# Install into a temporary prefix and use it as a machine without a checkout
# would: PATH is the prefix's bin plus system dirs (no Go toolchain), HOME is
# empty, and nothing points back into this tree. crackbox must find guest-init
# and the kernel in the prefix, run a guest, and arizuko serve must come up.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d /tmp/crackbox-install-XXXXXX)
azpid=
cleanup() {
  rc=$?
  set +e
  [ -n "$azpid" ] && kill "$azpid" 2>/dev/null
  wait 2>/dev/null
  # A failed guest's console is the only record of why; show it before the dir goes.
  if [ "$rc" -ne 0 ]; then
    for f in "$tmp"/run/*/console.log; do [ -f "$f" ] && { echo "test-install: $f:" >&2; tail -n 60 "$f" >&2; }; done
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
chmod 0711 "$tmp"
prefix=$tmp/prefix
PREFIX=$prefix DESTDIR= scripts/install.sh
for f in bin/crackbox bin/arizuko lib/crackbox/guest-init lib/crackbox/vmlinux \
  share/crackbox/kernel/build.sh share/crackbox/kernel/config.fragment \
  share/crackbox/examples/crackbox.toml.example share/crackbox/examples/arizuko.toml.example \
  lib/systemd/system/crackbox-proxy.service \
  lib/systemd/system/arizuko.service share/man/man1/crackbox-run.1 share/man/man1/arizuko-serve.1 \
  share/bash-completion/completions/crackbox share/zsh/site-functions/_arizuko; do
  [ -e "$prefix/$f" ] || { echo "test-install: $f not installed" >&2; exit 1; }
done
grep -q "ExecStart=$prefix/bin/crackbox proxy serve" "$prefix/lib/systemd/system/crackbox-proxy.service"

mkdir -m 0700 "$tmp/home"
clean=(env -i PATH="$prefix/bin:/usr/sbin:/usr/bin:/sbin:/bin" HOME="$tmp/home" \
  CRACKBOX_RUN_DIR="$tmp/run" CRACKBOX_RUNS_DIR="$tmp/runs")
if "${clean[@]}" sh -c 'command -v go' >/dev/null; then
  echo "test-install: a Go toolchain is on the system PATH; the test cannot show it is not needed" >&2
  exit 1
fi
"${clean[@]}" crackbox --version
"${clean[@]}" crackbox setup --dry-run | grep -q "kernel: $prefix/lib/crackbox/vmlinux"
# One guest checks three things a script author relies on: the installed copy runs a
# guest; -q leaves stderr to the command alone (no tcg or confinement notes, no
# warnings); the guest's PATH is the caller's with the entries it cannot see dropped
# (the prefix and a missing dir are outside the guest's view, the workdir's tools are in it).
work=$tmp/work
mkdir -p "$work/tools/bin"
printf '#!/bin/sh\necho tool-ok\n' > "$work/tools/bin/cbtool"
chmod 0755 "$work/tools/bin/cbtool"
cd "$work"
# Hold a guest slot of internal/jailtest, so this guest counts against the machine's cap.
slot=${TMPDIR:-/tmp}/crackbox-guest-slot-0.lock
callpath="$prefix/bin:$work/tools/bin:$tmp/not-there:/usr/sbin:/usr/bin:/sbin:/bin"
out=$(flock "$slot" env -i PATH="$callpath" HOME="$tmp/home" CRACKBOX_RUN_DIR="$tmp/run" CRACKBOX_RUNS_DIR="$tmp/runs" \
  crackbox run -q --net none -- sh -c 'echo installed-ok; echo "PATH=$PATH"; cbtool' 2>"$tmp/run.err") ||
  { echo "test-install: crackbox run failed:" >&2; cat "$tmp/run.err" >&2; exit 1; }
want="installed-ok
PATH=$work/tools/bin:/usr/sbin:/usr/bin:/sbin:/bin
tool-ok"
[ "$out" = "$want" ] || { printf 'test-install: crackbox run printed:\n%s\nwant:\n%s\n' "$out" "$want" >&2; exit 1; }
if [ -s "$tmp/run.err" ]; then
  echo "test-install: crackbox run -q wrote to stderr:" >&2
  cat "$tmp/run.err" >&2
  exit 1
fi

# Arguments that cannot work are refused before boot: status 125 and one line naming
# the fix, from the installed copy (no guest slot: nothing boots).
mask=/etc/ssl/private
[ -e "$mask" ] || mask=/etc/shadow
refuse() {
  want=$1; shift
  rc=0
  "${clean[@]}" crackbox run -q --net none "$@" -- true 2>"$tmp/refuse.err" || rc=$?
  if [ "$rc" -ne 125 ] || [ "$(wc -l <"$tmp/refuse.err")" -ne 1 ] || ! grep -qF -- "$want" "$tmp/refuse.err"; then
    echo "test-install: crackbox run $* ended $rc, want 125 and one line naming \"$want\":" >&2
    cat "$tmp/refuse.err" >&2
    exit 1
  fi
}
refuse "mount it elsewhere" -v "$work:$mask/x"
refuse "drop one of them" --no-workdir -w "$work"
refuse "use -w $work" -v "$work:/src" -w /src
refuse "(--cpus)" --cpus "$(( $(nproc) + 1 ))"
refuse "(--memory)" --memory 1000G
cd "$tmp"

# Without an installed kernel, setup names the installed build script.
mv "$prefix/lib/crackbox/vmlinux" "$tmp/vmlinux"
"${clean[@]}" crackbox setup --dry-run | grep -q "would build the kernel with $prefix/share/crackbox/kernel/build.sh"
mv "$tmp/vmlinux" "$prefix/lib/crackbox/vmlinux"

data=$tmp/arizuko
"${clean[@]}" arizuko init --data "$data" >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"${clean[@]}" arizuko serve --data "$data" --listen "127.0.0.1:$port" > "$tmp/serve.log" 2>&1 &
azpid=$!
for _ in $(seq 1 300); do
  if curl -fsS "http://127.0.0.1:$port/health" 2>/dev/null | grep -q '"status":"ok"'; then
    echo "test-install: ok" >&2
    exit 0
  fi
  kill -0 "$azpid" 2>/dev/null || break
  sleep 0.2
done
echo "test-install: arizuko serve did not come up:" >&2
cat "$tmp/serve.log" >&2
exit 1

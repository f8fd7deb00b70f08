#!/usr/bin/env bash
# make bench: loopback benchmarks. The egress proxy part runs `crackbox proxy
# serve`, squid and tinyproxy side by side in one run against a direct
# connection (bench/proxybench), with the same one-name allowlist for all,
# and writes the report to $BENCH_OUT/proxy.md (default bin/bench).
#
# Knobs (environment): BENCH_OUT, BENCH_REPEAT, BENCH_BYTES, BENCH_TUNNELS, BENCH_CONCURRENCY,
# BENCH_LATENCY_TUNNELS, BENCH_IDLE_TUNNELS, BENCH_PORT_BASE, and BENCH_BASELINE: the
# path of an earlier crackbox binary to measure in the same run as "crackbox-before".
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
OUT=${BENCH_OUT:-bin/bench}
HOST=bench.upstream.test
BASE=${BENCH_PORT_BASE:-18080}
UPSTREAM_PORT=$BASE
CRACKBOX_PORT=$((BASE + 1))
SQUID_PORT=$((BASE + 2))
TINYPROXY_PORT=$((BASE + 3))
BASELINE_PORT=$((BASE + 4))
BASELINE=${BENCH_BASELINE:-}
IDLE=${BENCH_IDLE_TUNNELS:-10000}
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)

log() { echo "bench: $*" >&2; }

# Install squid and tinyproxy without letting their packages start system
# services: invoke-rc.d and deb-systemd-invoke obey policy-rc.d exit 101.
install_proxies() {
  local missing=()
  command -v squid >/dev/null || [ -x /usr/sbin/squid ] || missing+=(squid)
  command -v tinyproxy >/dev/null || missing+=(tinyproxy-bin)
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing ${missing[*]}"
  if [ -e /usr/sbin/policy-rc.d ]; then
    log "/usr/sbin/policy-rc.d already exists; refusing to replace it. Install ${missing[*]} by hand."
    exit 1
  fi
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod 755 /usr/sbin/policy-rc.d
  local rc=0
  {
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null &&
      $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
  } || rc=$?
  $SUDO rm -f /usr/sbin/policy-rc.d
  return $rc
}

PIDS=()
TMP=""
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [ -n "$TMP" ]; then rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_port PID PORT NAME: until PORT accepts on loopback, or fail when PID dies.
wait_port() {
  for _ in $(seq 100); do
    if ! kill -0 "$1" 2>/dev/null; then
      log "$3 exited during start; its log:"
      cat "$TMP/$3.log" >&2 || true
      exit 1
    fi
    if (: <"/dev/tcp/127.0.0.1/$2") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  log "$3 did not listen on 127.0.0.1:$2 within 10s"
  exit 1
}

port_free() {
  if (: <"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
    log "127.0.0.1:$1 is already in use; set BENCH_PORT_BASE to a free range of 4 ports"
    exit 1
  fi
}

# fill TEMPLATE OUT: replace the @...@ placeholders of a bench/conf template.
fill() {
  sed -e "s|@HOST@|$HOST|g" -e "s|@DIR@|$DIR|g" -e "s|@PORT@|$PORT|g" \
    -e "s|@UPSTREAM_PORT@|$UPSTREAM_PORT|g" -e "s|@NOFILE@|$NOFILE|g" \
    -e "s|@MAXCLIENTS@|$((IDLE + 256))|g" "bench/conf/$1" >"$2"
}

bench_proxy() {
  install_proxies
  log "building crackbox and proxybench"
  CGO_ENABLED=0 $GO build -o bin/crackbox ./cmd/crackbox
  CGO_ENABLED=0 $GO build -o bin/proxybench ./bench/proxybench
  mkdir -p "$OUT"

  # An idle tunnel costs the bench two descriptors (its client socket and
  # its upstream socket) and each proxy two.
  ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
  NOFILE=$(ulimit -n)
  local notes=() max=$(((NOFILE - 1024) / 2))
  if [ "$IDLE" -gt "$max" ]; then
    notes+=("RLIMIT_NOFILE could not be raised past $NOFILE here, so the idle phase holds $max tunnels per proxy; the 10,000-tunnel RSS is extrapolated linearly from it")
    IDLE=$max
  fi
  if [ -n "$BASELINE" ] && [ ! -x "$BASELINE" ]; then
    log "BENCH_BASELINE=$BASELINE is not an executable crackbox binary"
    exit 1
  fi
  for p in $UPSTREAM_PORT $CRACKBOX_PORT $SQUID_PORT $TINYPROXY_PORT ${BASELINE:+$BASELINE_PORT}; do port_free "$p"; done

  TMP=$(mktemp -d /tmp/crackbox-bench.XXXXXX)
  chmod 755 "$TMP"
  printf '127.0.0.1\t%s\n' "$HOST" >"$TMP/hosts"
  chmod 644 "$TMP/hosts"

  # crackbox: hosts override and loopback CIDR from the config file, the rest as flags.
  DIR=$TMP PORT=$CRACKBOX_PORT
  fill crackbox.toml.in "$TMP/crackbox.toml"
  env $(compgen -e | grep '^CRACKBOX_' | sed 's/^/-u /') \
    bin/crackbox proxy serve --config "$TMP/crackbox.toml" \
    --listen "127.0.0.1:$CRACKBOX_PORT" --transparent "" --admin "" \
    --client 127.0.0.1 --allow "$HOST:$UPSTREAM_PORT" >"$TMP/crackbox.log" 2>&1 &
  local cb=$!
  PIDS+=("$cb")
  local before=() bl=""
  if [ -n "$BASELINE" ]; then
    env $(compgen -e | grep '^CRACKBOX_' | sed 's/^/-u /') \
      "$BASELINE" proxy serve --config "$TMP/crackbox.toml" \
      --listen "127.0.0.1:$BASELINE_PORT" --transparent "" --admin "" \
      --client 127.0.0.1 --allow "$HOST:$UPSTREAM_PORT" >"$TMP/crackbox-before.log" 2>&1 &
    bl=$!
    PIDS+=("$bl")
    before=(-target "crackbox-before=127.0.0.1:$BASELINE_PORT,pid=$bl,host=$HOST,baseline")
  fi

  # squid drops to the proxy user, which must own its log directory.
  DIR=$TMP/squid PORT=$SQUID_PORT
  mkdir -p "$DIR"
  cp "$TMP/hosts" "$DIR/hosts"
  fill squid.conf.in "$DIR/squid.conf"
  chown -R proxy: "$DIR" 2>/dev/null || chmod 777 "$DIR"
  squid -N -f "$DIR/squid.conf" >"$TMP/squid.log" 2>&1 &
  local sq=$!
  PIDS+=("$sq")

  # tinyproxy resolves with the system resolver, so it gets a private mount
  # namespace whose /etc/hosts names the upstream; without one it is sent to
  # the IP literal instead.
  DIR=$TMP/tinyproxy PORT=$TINYPROXY_PORT
  mkdir -p "$DIR"
  local tphost=$HOST
  if ! unshare -m sh -c "mount --bind '$TMP/hosts' /etc/hosts" 2>/dev/null; then
    tphost=127.0.0.1
    notes+=("tinyproxy CONNECTs to 127.0.0.1:$UPSTREAM_PORT (no mount namespace here to give it a private /etc/hosts)")
  fi
  echo "$tphost" >"$DIR/filter"
  fill tinyproxy.conf.in "$DIR/tinyproxy.conf"
  touch "$DIR/tinyproxy.log"
  chown -R nobody:nogroup "$DIR" 2>/dev/null || chmod 777 "$DIR"
  if [ "$tphost" = "$HOST" ]; then
    unshare -m sh -c 'mount --bind "$1" /etc/hosts && exec tinyproxy -d -c "$2"' sh \
      "$TMP/hosts" "$DIR/tinyproxy.conf" >"$TMP/tinyproxy.log" 2>&1 &
  else
    tinyproxy -d -c "$DIR/tinyproxy.conf" >"$TMP/tinyproxy.log" 2>&1 &
  fi
  local tp=$!
  PIDS+=("$tp")

  wait_port "$cb" "$CRACKBOX_PORT" crackbox
  [ -n "$bl" ] && wait_port "$bl" "$BASELINE_PORT" crackbox-before
  wait_port "$sq" "$SQUID_PORT" squid
  wait_port "$tp" "$TINYPROXY_PORT" tinyproxy

  local rev
  rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  git diff --quiet HEAD -- cmd/crackbox pkg 2>/dev/null || rev="$rev+dirty"
  notes+=("Versions: crackbox $rev, $(squid -v | head -1 | sed 's/ Cache: Version//'), $(tinyproxy -v 2>&1 | head -1)")
  [ -n "$BASELINE" ] && notes+=("crackbox-before: $BASELINE (BENCH_BASELINE), an earlier build measured in the same run for a before/after comparison; it is not one of the proxies crackbox is ranked against")
  notes+=("Load average at start: $(cut -d' ' -f1-3 /proc/loadavg)")
  local args=()
  for n in "${notes[@]}"; do args+=(-note "$n"); done

  log "running proxybench (squid $sq, tinyproxy $tp, crackbox $cb)"
  timeout 900 bin/proxybench \
    -upstream "127.0.0.1:$UPSTREAM_PORT" \
    -target direct \
    -target "crackbox=127.0.0.1:$CRACKBOX_PORT,pid=$cb,host=$HOST" \
    -target "squid=127.0.0.1:$SQUID_PORT,pid=$sq,host=$HOST" \
    -target "tinyproxy=127.0.0.1:$TINYPROXY_PORT,pid=$tp,host=$tphost" \
    "${before[@]}" \
    -subject crackbox \
    -repeat "${BENCH_REPEAT:-5}" -bytes "${BENCH_BYTES:-1073741824}" \
    -tunnels "${BENCH_TUNNELS:-5000}" -rate-rounds 10 \
    -concurrency "${BENCH_CONCURRENCY:-64}" \
    -latency-tunnels "${BENCH_LATENCY_TUNNELS:-1000}" \
    -idle "$IDLE" -idle-goal "${BENCH_IDLE_TUNNELS:-10000}" \
    -command "make bench" \
    -md "$OUT/proxy.md" -json "$OUT/proxy.json" "${args[@]}"
  log "report written to $OUT/proxy.md and $OUT/proxy.json"
}

# bench_jail: guest boot against its floor, idle RSS and work-directory I/O
# (pkg/jail/bench_test.go) through the crackbox binary, as a user runs it, and
# the guest-init phases of an in-process run. Needs
# root, qemu-system-x86_64 and a built kernel (make kernel); skipped otherwise.
# Writes $OUT/jail.txt. BENCH_JAIL_N samples each (5).
bench_jail() {
  if [ "$(id -u)" != 0 ]; then
    log "guest benchmarks need root; skipped"
    return 0
  fi
  log "building crackbox and guest-init for the guest benchmarks"
  mkdir -p "$OUT" bin
  CGO_ENABLED=0 $GO build -o bin/crackbox ./cmd/crackbox
  CGO_ENABLED=0 $GO build -trimpath -ldflags='-s -w' -o bin/guest-init ./guestfs/init
  local n=${BENCH_JAIL_N:-5}
  log "running guest benchmarks, $n samples each (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  {
    echo "# crackbox guest benchmarks, $(date -u '+%Y-%m-%d %H:%M UTC'), load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') x $(nproc), $(qemu-system-x86_64 --version | head -1)"
    CRACKBOX_BENCH_BIN=$PWD/bin/crackbox CRACKBOX_GUEST_INIT=$PWD/bin/guest-init \
      timeout 1800 $GO test -run '^$' -bench 'RunVsFloor|GuestPhases|IdleRSS|WorkdirIO|Snapshot' \
      -benchtime "${n}x" -timeout 30m -v ./pkg/jail
  } 2>&1 | tee "$OUT/jail.txt"
  log "report written to $OUT/jail.txt"
}

# Network jail (root, boots guests): `crackbox run -- true` per network mode, and a
# 32 MiB download by curl in a tap-mode guest through the jail's proxy as a ratio
# to the same proxy on the host alone. Figures go to $OUT/netjail.txt; BENCHMARKS.md
# "## Network jail" quotes them.
bench_netjail() {
  mkdir -p "$OUT"
  log "network jail benchmarks (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  timeout 1800 $GO test -run '^$' -bench 'RunNet|TunnelGuestVsHost' \
    -benchtime "${BENCH_NETJAIL_N:-5}x" -timeout 30m ./cmd/crackbox 2>&1 | tee "$OUT/netjail.txt"
  log "report written to $OUT/netjail.txt"
}

# arizuko: resolve + authorize throughput and inbound messages persisted per second
# (no guests), the guest-slot hand-off gap with a scripted runner, then message -> agent start as a ratio to a bare jail.Run and turns per
# minute sustained over 5 folders (real guests). Figures go to $OUT/arizuko.txt.
bench_arizuko() {
  mkdir -p "$OUT"
  log "arizuko benchmarks (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  {
    $GO test -run '^$' -bench . -benchtime 2s ./pkg/arizuko/service ./pkg/arizuko/store ./pkg/arizuko/api
    $GO test -run '^$' -bench SlotHandoff -benchtime 200x ./pkg/arizuko/turn
    CRACKBOX_GUEST_INIT=$PWD/bin/guest-init timeout 1800 $GO test -run '^$' \
      -bench 'MessageToAgentStart|TurnsPerMinute' -benchtime "${BENCH_ARIZUKO_N:-5}x" -timeout 30m ./pkg/arizuko/turn
  } 2>&1 | tee "$OUT/arizuko.txt"
  log "report written to $OUT/arizuko.txt"
}

# Shares: file-heavy steps and real jobs in a read-write workdir against the guest's
# /tmp, one guest per group (bench/share). The table goes to $OUT/share.md.
bench_share() {
  mkdir -p "$OUT"
  log "share benchmark (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  bench/share/run.sh bin/crackbox --memory 1G | tee "$OUT/share.md"
  log "report written to $OUT/share.md"
}

case "${BENCH_ONLY:-all}" in
  proxy) bench_proxy ;;
  share) bench_share ;;
  jail) bench_jail ;;
  netjail) bench_netjail ;;
  arizuko) bench_arizuko ;;
  *) bench_proxy; bench_jail; bench_netjail; bench_arizuko; bench_share ;;
esac

#!/usr/bin/env bash
# The systemd units must load cleanly (systemd-analyze verify prints nothing) and
# keep their sandboxing (systemd-analyze security stays under a threshold, so a
# weakened unit fails here).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x bin/crackbox ] && [ -x bin/arizuko ] || { echo "test-units: run make build first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for u in contrib/systemd/*.service; do
  sed "s|@BINDIR@|$PWD/bin|g" "$u" > "$tmp/$(basename "$u")"
done
out=$(systemd-analyze verify --man=no "$tmp"/*.service 2>&1) || { echo "$out" >&2; exit 1; }
[ -z "$out" ] || { echo "systemd-analyze verify:"; echo "$out"; exit 1; } >&2
# Exposure is 0..100 here (systemd prints it as 0.0..10.0).
systemd-analyze security --offline=yes --threshold=20 "$tmp/crackbox-proxy.service" >/dev/null
systemd-analyze security --offline=yes --threshold=60 "$tmp/arizuko.service" >/dev/null
echo "test-units: ok" >&2

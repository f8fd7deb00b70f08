#!/usr/bin/env bash
# Workdir share benchmark: file-heavy steps in a read-write workdir against the same
# steps in the guest's /tmp, in one guest per group and sync mode (bench/share/guest.sh),
# and reads of the host view's /usr against a copy in /tmp. Prints a markdown table of
# seconds and ratios, live and exit sync side by side. Usage: run.sh CRACKBOX [extra
# crackbox run flags...]; BENCH_GROUPS and BENCH_SYNC pick groups and modes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
crackbox=$(realpath "$1"); shift
wd=$(mktemp -d /tmp/crackbox-bench-share.XXXXXX)
trap 'rm -rf "$wd"' EXIT
chmod 755 "$wd"
cp "$here/guest.sh" "$wd/guest.sh"
# 2,000 small files, as a source tree has them.
(cd /usr/include && find . -type f -size -64k > "$wd/all" || true; head -2000 "$wd/all" > "$wd/list"; tar cf "$wd/files.tar" -T "$wd/list")
mkdir -p "$wd/hello"
echo "GREETING = 'hi'" > "$wd/hello/hello.py"
printf "from setuptools import setup\nsetup(name='hello', version='1.0', py_modules=['hello'])\n" > "$wd/hello/setup.py"
big=$(find /usr/lib -type f -size +24M -size -27M 2>/dev/null | sort | sed -n 1p)
gomod=$(go env GOMODCACHE)
prep() { # the build group's inputs: this repo's source, a build cache, an npm project
  mkdir -p "$wd/src" "$wd/npm"
  (cd "$repo" && git archive HEAD) | tar x -C "$wd/src"
  # A build cache holding every dependency of ./pkg/... but none of this repo's packages:
  # it is filled from a copy whose every .go file ends in one more comment, so the guest
  # compiles the repo's packages and takes the rest from the cache (-trimpath keeps the
  # directories out of the cache keys: the guest's module cache is at /gomod).
  rm -rf "$wd/prep"; cp -r "$wd/src" "$wd/prep"
  find "$wd/prep" -name '*.go' -exec sh -c 'for f; do echo "// prep" >> "$f"; done' sh {} +
  (cd "$wd/prep" && GOCACHE=$wd/gocache GOFLAGS="-mod=mod -trimpath" go build ./pkg/...)
  rm -rf "$wd/prep"
  echo '{"name": "bench", "version": "1.0.0", "private": true, "dependencies": {"express": "4.21.2", "lodash": "4.17.21"}}' > "$wd/npm/package.json"
  # The lockfile names no tarball URLs, so npm ci looks up each package: one online
  # npm ci puts those answers in the cache the guest's offline one reads.
  (cd "$wd/npm" && npm install --no-audit --no-fund --cache "$wd/npmcache" >/dev/null &&
    npm ci --no-audit --no-fund --cache "$wd/npmcache" >/dev/null && rm -rf node_modules)
  chmod -R a+rX "$wd"
}
out=$wd/out
: > "$out"
for group in ${BENCH_GROUPS:-files keep jobs build reads}; do
  [ "$group" = build ] && prep
  modes=${BENCH_SYNC:-live exit}
  [ "$group" = reads ] && modes=live # no workdir step
  for mode in $modes; do
    echo "bench: $group $mode" >&2
    rm -rf "$wd/b" "$wd/j" "$wd/k" "$wd/npm/node_modules"
    extra=()
    # The build caches are copied into the guest's memory.
    [ "$group" = build ] && extra=(-v "$gomod:/gomod:ro" --memory 2G)
    (cd "$wd" && "$crackbox" run -q --net none -w "$wd" --workdir-sync "$mode" "$@" "${extra[@]}" -- sh "$wd/guest.sh" "$wd" "$group" "$big") > "$wd/group.out"
    hostend=$(date +%s.%N)
    # The time from the command's end to the run's: the sync back, in exit mode.
    awk -v m="$mode" -v g="$group" -v h="$hostend" '$1 == "end" { printf "%s after-exit(%s) work %.3f\n", m, g, h - $3; next } { print m, $0 }' "$wd/group.out" >> "$out"
  done
done
echo "| step | live: workdir | live: /tmp | live ÷ /tmp | exit: workdir | exit: /tmp | exit ÷ /tmp |"
echo "|---|---|---|---|---|---|---|"
awk '{ k = $2; t[$1" "k" "$3] = $4; if (!(k in seen)) { seen[k] = 1; order[n++] = k } }
  function cell(m, s, p) { return ((m" "s" "p) in t) ? sprintf("%.2f s", t[m" "s" "p]) : "–" }
  function ratio(m, s,   w, x) { w = (m" "s" work") in t ? t[m" "s" work"] : t[m" "s" usr"]; x = t[m" "s" tmp"];
    return (x > 0 && w != "") ? sprintf("%.1f×", w / x) : "–" }
  END { for (i = 0; i < n; i++) { s = order[i]; lw = (("live "s" usr") in t) ? "usr" : "work"
    printf "| %s | %s | %s | %s | %s | %s | %s |\n", s, cell("live", s, lw), cell("live", s, "tmp"), ratio("live", s),
      cell("exit", s, "work"), cell("exit", s, "tmp"), ratio("exit", s) } }' "$out"

#!/usr/bin/env bash
# Workdir share benchmark: file-heavy steps in a read-write workdir against the same
# steps in the guest's /tmp, in one guest per group (bench/share/guest.sh), and reads
# of the host view's /usr against a copy in /tmp. Prints a markdown table of seconds and
# ratios. Usage: run.sh CRACKBOX [extra crackbox run flags...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
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
out=$wd/out
: > "$out"
for group in ${BENCH_GROUPS:-files jobs reads}; do
  echo "bench: $group" >&2
  (cd "$wd" && "$crackbox" run -q --net none -w "$wd" "$@" -- sh "$wd/guest.sh" "$wd" "$group" "$big") >> "$out"
done
echo "| step | shared | guest /tmp | shared ÷ /tmp |"
echo "|---|---|---|---|"
awk '{ t[$1" "$2] = $3; if (!($1 in seen)) { seen[$1] = 1; order[n++] = $1 } }
  END { for (i = 0; i < n; i++) { s = order[i]; sh = (s" work" in t) ? t[s" work"] : t[s" usr"]; tm = t[s" tmp"];
    printf "| %s | %.2f s | %.2f s | %.1f× |\n", s, sh, tm, (tm > 0 ? sh / tm : 0) } }' "$out"

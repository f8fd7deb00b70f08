#!/bin/sh
# Runs inside one guest (bench/share/run.sh starts it): each step in the workdir and in
# the guest's /tmp, interleaved, printing "step place seconds" lines. $1 is the workdir,
# $2 the group of steps: files, keep, jobs, build or reads. Last it prints "end place <epoch>",
# the guest's clock (set from the host's at start) when the command ended.
set -eu
wd=$1 group=$2
now() { date +%s.%N; }
t() { # t STEP PLACE CMD...: times one command; a failure is reported, not hidden
  step=$1 place=$2; shift 2
  s=$(now)
  if ! "$@" >/tmp/step.out 2>&1; then echo "step $step in $place failed: $(tail -3 /tmp/step.out)" >&2; fi
  e=$(now)
  awk -v o="$step" -v p="$place" -v s="$s" -v e="$e" 'BEGIN{printf "%s %s %.3f\n", o, p, e-s}'
}
# The guest's memory is touched first here, untimed: QEMU faults each page in on first
# use, which costs whichever place comes first several times the step itself (a 256 MiB
# dd took 3.5 s first and 1.5 s after, in either place).
dd if=/dev/zero of=/tmp/warm bs=1M count=384 2>/dev/null; rm -f /tmp/warm
case $group in
files)
  cp "$wd/files.tar" /tmp/files.tar
  for place in work tmp; do
    case $place in work) d=$wd/b ;; tmp) d=/tmp/b ;; esac
    mkdir -p "$d"; cd "$d"
    t untar $place tar xf /tmp/files.tar
    t find $place sh -c 'find . | wc -l'
    t du $place du -s .
    t stat $place sh -c 'find . -type f | xargs stat -c %s'
    t gitadd $place sh -c 'git init -q . && git add -A'
    t gitstatus $place git status --porcelain
    t append $place sh -c 'i=0; while [ $i -lt 500 ]; do echo x >> log; i=$((i+1)); done'
    t ddwrite $place dd if=/dev/zero of=big bs=1M count=256 conv=fsync
    t ddread $place sh -c 'echo 3 > /proc/sys/vm/drop_caches; dd if=big of=/dev/null bs=1M'
    cd /; t rmrf $place rm -rf "$d"
  done ;;
keep)
  # 2,000 files left in the workdir: in exit mode the sync back carries them all, which
  # the after-exit row times.
  cp "$wd/files.tar" /tmp/files.tar
  mkdir -p "$wd/k" /tmp/k
  cd "$wd/k"; t untarkept work tar xf /tmp/files.tar
  cd /tmp/k; t untarkept tmp tar xf /tmp/files.tar
  cd / ;;
jobs)
  for place in work tmp; do
    case $place in work) d=$wd/j ;; tmp) d=/tmp/j ;; esac
    mkdir -p "$d"; cp -r "$wd/hello" "$d/"; cd "$d"
    t venv $place sh -c 'python3 -m venv venv && venv/bin/pip install -q --no-cache-dir --no-index --no-build-isolation ./hello'
    cd /
  done ;;
build)
  # npm ci from a warm npm cache, and go build ./pkg/... with a warm module cache (the
  # host's, read-only at /gomod) and a build cache holding every dependency but none of
  # this repo's packages (run.sh), so each place compiles the repo's 46 packages. Each
  # place starts from its own copy of the caches in /tmp (untimed).
  cp -r "$wd/npmcache" /tmp/npmcache; cp -r "$wd/src" /tmp/src; cp -r "$wd/npm" /tmp/npm
  export HOME=/tmp GOMODCACHE=/gomod GOFLAGS="-mod=mod -trimpath" GOPROXY=off GOTOOLCHAIN=local GOTELEMETRY=off
  # Warm what both places share (the go tool, the sources of the dependencies) untimed,
  # so the first place timed does not pay for it.
  (cd /tmp/src && /usr/local/go/bin/go list -deps -f '{{.Dir}}' ./pkg/... | while read -r d; do cat "$d"/*.go; done; /usr/local/go/bin/go tool compile -V; /usr/local/go/bin/go tool link -V) >/dev/null 2>&1 || true
  for place in work tmp; do
    case $place in work) d=$wd ;; tmp) d=/tmp ;; esac
    cd "$d/npm"; t npmci $place npm ci --offline --no-audit --no-fund --cache /tmp/npmcache
    rm -rf /tmp/gocache; cp -r "$wd/gocache" /tmp/gocache; export GOCACHE=/tmp/gocache
    cd "$d/src"; t gobuild $place /usr/local/go/bin/go build ./pkg/...
    cd /
  done ;;
reads)
  # The first pass over /usr also looks every directory up; later ones only list them.
  t findcold usr sh -c 'find /usr/include | wc -l'
  mkdir -p /tmp/inc; cp -a /usr/include/. /tmp/inc/; cp "$3" /tmp/big
  t findcold tmp sh -c 'find /tmp/inc | wc -l'
  t findusr usr sh -c 'find /usr/include | wc -l'
  t findusr tmp sh -c 'find /tmp/inc | wc -l'
  # The file's pages are dropped, not cat's, date's and the C library's: those are read
  # back untimed, so the step times the file.
  echo 3 > /proc/sys/vm/drop_caches; cat /dev/null; date >/dev/null
  t read25 usr cat "$3"
  t read25 tmp cat /tmp/big ;;
esac
echo "end x $(now)"

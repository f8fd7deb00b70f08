#!/usr/bin/env bash
# make demo: one jailed command that makes an allowed and a blocked request.
# deb.debian.org is allowed (the same archive apt just used); example.com is not.
set -euo pipefail
cd "$(dirname "$0")/.."
kernel=$(guestfs/kernel/build.sh 2>/dev/null | tail -1)
export CRACKBOX_KERNEL=$kernel CRACKBOX_GUEST_INIT=$PWD/bin/guest-init
script='
echo "allowed: curl https://deb.debian.org/debian/ -> HTTP $(curl -s -o /dev/null -w "%{http_code}" https://deb.debian.org/debian/)"
echo "blocked: curl http://example.com/ ->"
curl -s -i http://example.com/ | sed "s/^/    /"
echo "blocked: curl https://example.com/ ->"
curl -sS https://example.com/ 2>&1 | sed "s/^/    /"
exit 0'
# The proxy refuses names that resolve into private, documentation or on-link ranges. Some
# sandboxed build machines reach the archive through a mirror at such an address; there the
# operator must say so, exactly as the demo does here for that one address.
extra=()
addr=$(getent ahostsv4 deb.debian.org 2>/dev/null | awk 'NR==1{print $1}')
case "$addr" in
  10.*|172.1[6-9].*|172.2[0-9].*|172.3[01].*|192.168.*|192.0.2.*|198.51.100.*|203.0.113.*|198.1[89].*|100.6[4-9].*|100.[7-9][0-9].*|100.1[01][0-9].*|100.12[0-7].*)
    echo "note: deb.debian.org resolves to $addr here (a mirror in a reserved range); allowing exactly that address with --allow-cidr $addr/32"
    extra=(--allow-cidr "$addr/32") ;;
esac
echo "+ crackbox run --allow deb.debian.org ${extra[*]} -- sh -c '...curl...'"
bin/crackbox run --allow deb.debian.org "${extra[@]}" -- sh -c "$script"

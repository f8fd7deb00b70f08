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
echo "+ crackbox run --allow deb.debian.org -- sh -c '...curl...'"
bin/crackbox run --allow deb.debian.org -- sh -c "$script"

package main

import (
	"bufio"
	"strings"
)

// probePy runs inside a tap-mode guest: it publishes the guest's addresses in the
// shared directory, serves TCP and UDP :8080 for the peer guest to try, waits for the
// peer's addresses, runs every escape probe in parallel and prints one
// "CHECK name result" line each. It keeps serving until the peer is done too.
//
// argv: role peer host_v4 host_v6 bait_tcp bait_udp admin_port
const probePy = `
import os, random, socket, struct, subprocess, sys, threading, time
role, peer, hostip, hostip6 = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
bait_tcp, bait_udp, admin = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
wd = os.path.dirname(os.path.abspath(__file__))
gw = [l.split()[1] for l in open('/etc/resolv.conf') if l.startswith('nameserver')][0]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect((gw, 53)); me = s.getsockname()[0]; s.close()

def serve_tcp():
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); l.bind(('0.0.0.0', 8080)); l.listen(8)
    while True:
        c, _ = l.accept(); c.sendall(b'peer\n'); c.close()
def serve_udp():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(('0.0.0.0', 8080))
    while True:
        d, a = u.recvfrom(2048); u.sendto(d, a)
threading.Thread(target=serve_tcp, daemon=True).start()
threading.Thread(target=serve_udp, daemon=True).start()

def publish(name, text):
    tmp = os.path.join(wd, name + '.tmp'); open(tmp, 'w').write(text); os.rename(tmp, os.path.join(wd, name))
def wait_for(name, secs):
    p = os.path.join(wd, name); end = time.time() + secs
    while time.time() < end:
        if os.path.exists(p): return open(p).read()
        time.sleep(0.2)
    return ''

publish('addr-' + role, gw + ' ' + me)
pa = wait_for('addr-' + peer, 150).split()
peer_gw, peer_guest = (pa + ['0.0.0.0', '0.0.0.0'])[:2]

out, lock = [], threading.Lock()
out.append('CHECK peer_addr %s' % ('found' if pa else 'missing'))
def check(name, fn, *a):
    try: r = fn(*a)
    except Exception as e: r = 'exception-' + type(e).__name__
    with lock: out.append('CHECK %s %s' % (name, r))

def tcp(addr, port, fam=socket.AF_INET, scope=0, t=4):
    s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(t)
    try:
        s.connect((addr, port, 0, scope) if fam == socket.AF_INET6 else (addr, port))
        return 'connected'
    except socket.timeout: return 'timeout'
    except ConnectionRefusedError: return 'refused'
    except OSError as e: return 'errno%d' % e.errno
    finally: s.close()

def udp(addr, port, payload=b'ping', t=3):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(t)
    try:
        s.sendto(payload, (addr, port)); s.recvfrom(4096); return 'reply'
    except socket.timeout: return 'noreply'
    except OSError as e: return 'errno%d' % e.errno
    finally: s.close()

def dnsq(name, qtype, server, t=3):
    qid = random.randint(0, 65535)
    q = struct.pack('>HHHHHH', qid, 0x0100, 1, 0, 0, 0)
    q += b''.join(bytes([len(p)]) + p.encode() for p in name.split('.')) + b'\0' + struct.pack('>HH', qtype, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(t)
    try:
        s.sendto(q, (server, 53)); d, _ = s.recvfrom(4096)
    except socket.timeout: return 'noreply'
    except OSError as e: return 'errno%d' % e.errno
    finally: s.close()
    rcode, an = d[3] & 0xf, struct.unpack('>H', d[6:8])[0]
    i = 12
    while d[i]: i += d[i] + 1
    i += 5
    ips = []
    for _ in range(an):
        if d[i] & 0xc0 == 0xc0: i += 2
        else:
            while d[i]: i += d[i] + 1
            i += 1
        typ, _, _, ln = struct.unpack('>HHIH', d[i:i+10]); i += 10
        if typ == 1: ips.append(socket.inet_ntoa(d[i:i+4]))
        i += ln
    return ' '.join(['rcode%d' % rcode] + ips)

def gai(name):
    try: return 'ok ' + socket.getaddrinfo(name, 80, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    except socket.gaierror as e: return 'gaierror%d' % e.errno

def ping(addr):
    r = subprocess.run(['busybox', 'ping', '-c', '1', '-W', '3', addr], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return 'reply' if r.returncode == 0 else 'noreply'

probes = [
    ('tcp_own_proxy', tcp, gw, 3128),
    ('tcp_own_dns', tcp, gw, 53),
    ('tcp_gw_bait', tcp, gw, bait_tcp),
    ('tcp_gw_admin', tcp, gw, admin),
    ('tcp_gw_ssh', tcp, gw, 22),
    ('tcp_host_bait', tcp, hostip, bait_tcp),
    ('tcp_host_admin', tcp, hostip, admin),
    ('udp_gw_bait', udp, gw, bait_udp),
    ('udp_host_bait', udp, hostip, bait_udp),
    ('udp_gw_nondns', udp, gw, 123),
    ('dns_allowed', dnsq, 'good.test', 1, gw),
    ('dns_unlisted', dnsq, 'evil.test', 1, gw),
    ('dns_any', dnsq, 'good.test', 255, gw),
    ('dns_via_host', dnsq, 'good.test', 1, hostip),
    ('dns_via_public', dnsq, 'good.test', 1, '8.8.8.8'),
    ('gai_allowed', gai, 'good.test'),
    ('gai_unlisted', gai, 'evil.test'),
    ('tcp6_host', tcp, hostip6, bait_tcp, socket.AF_INET6),
    ('tcp6_gw_linklocal', tcp, 'fe80::1', 3128, socket.AF_INET6, socket.if_nametoindex('eth0')),
    ('ping_gw', ping, gw),
    ('ping_host', ping, hostip),
    ('ping_peer_gw', ping, peer_gw),
    ('ping_peer_guest', ping, peer_guest),
    ('tcp_peer_proxy', tcp, peer_gw, 3128),
    ('tcp_peer_guest', tcp, peer_guest, 8080),
    ('udp_peer_guest', udp, peer_guest, 8080),
    ('dns_peer_gw', dnsq, 'good.test', 1, peer_gw),
]
ts = [threading.Thread(target=check, args=p) for p in probes]
for t in ts: t.start()
for t in ts: t.join()
print('\n'.join(sorted(out)), flush=True)
publish('done-' + role, 'done')
wait_for('done-' + peer, 150)
`

// clientsSh runs the real clients in the tap-mode guest and prints CHECK lines.
// argv: ca host_v4 admin_port
const clientsSh = `
CA=$1 HOSTIP=$2 ADMIN=$3
T=203.0.113.10
chk() { echo "CHECK $1 $2"; }
code() { curl -sS -m 30 -o /dev/null -w '%{http_code}' "$@" 2>/dev/null; }
connect() { curl -sS -m 30 -o /dev/null -w '%{http_connect}' "$@" 2>/dev/null; }
chk fwd_http "$(code http://good.test/)"
chk fwd_https "$(code --cacert $CA https://good.test/)"
chk fwd_body "$(curl -sS -m 30 http://good.test/)"
h=$(curl -sS -m 30 -D - -o /dev/null http://other.test/ 2>/dev/null | tr -d '\r')
chk fwd_unlisted "$(echo "$h" | head -1 | cut -d' ' -f2) hdr=$(echo "$h" | grep -ci '^x-crackbox-error:')"
chk fwd_unlisted_tls "$(connect --cacert $CA https://other.test/)"
chk fwd_bad_port "$(connect -p http://good.test:8443/)"
chk fwd_ip_literal "$(code http://$HOSTIP:$ADMIN/)"
chk fwd_admin_loopback "$(env -u NO_PROXY -u no_proxy curl -sS -m 30 -o /dev/null -w '%{http_code}' http://127.0.0.1:$ADMIN/ 2>/dev/null)"
chk trans_http "$(code --noproxy '*' --resolve good.test:80:$T http://good.test/)"
chk trans_https "$(code --noproxy '*' --cacert $CA --resolve good.test:443:$T https://good.test/)"
chk trans_unlisted_http "$(code --noproxy '*' --resolve other.test:80:$T http://other.test/)"
chk trans_unlisted_tls "$(code --noproxy '*' --cacert $CA --resolve other.test:443:$T https://other.test/)"
chk trans_forged_host "$(code --noproxy '*' --resolve good.test:80:$T -H 'Host: other.test' http://good.test/)"
chk trans_forged_ip "$(curl -sS -m 30 --noproxy '*' --cacert $CA --resolve good.test:443:$HOSTIP https://good.test/)"
chk trans_bad_port "$(code -m 8 --noproxy '*' --resolve good.test:8443:$T http://good.test:8443/)"
chk wget_http "$(timeout 40 wget -q -O - http://good.test/ 2>/dev/null)"
chk wget_https "$(timeout 40 wget -q --ca-certificate=$CA -O - https://good.test/ 2>/dev/null)"
timeout 40 wget -q -O /dev/null http://other.test/ 2>/dev/null; chk wget_unlisted "rc=$?"
GIT_SSL_CAINFO=$CA timeout 150 git clone -q https://git.test/repo.git /tmp/repo >/tmp/git.log 2>&1
chk git_clone "$(cat /tmp/repo/README 2>/dev/null || tail -1 /tmp/git.log)"
timeout 200 python3 -m pip download --no-deps --no-cache-dir --disable-pip-version-check --cert $CA \
  --index-url https://pypi.test/simple/ -d /tmp/dl tinypkg >/tmp/pip.log 2>&1
chk pip_download "$(ls /tmp/dl 2>/dev/null || tail -1 /tmp/pip.log)"
`

// parseChecks returns the CHECK lines of out as name -> result.
func parseChecks(out string) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "CHECK ")
		if !ok {
			continue
		}
		name, result, _ := strings.Cut(rest, " ")
		m[name] = strings.TrimSpace(result)
	}
	return m
}

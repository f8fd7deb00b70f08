package nettest

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// DNS starts a UDP DNS server on loopback standing in for the host's resolver and
// returns its ip:port. It answers A (IPv4 addresses) and AAAA (IPv6 ones) for the names
// in answers (written without the trailing dot), an empty NOERROR answer for a listed
// name with no address of the asked type, and NXDOMAIN for every other name. It is shut
// down at cleanup.
func DNS(t testing.TB, answers map[string][]netip.Addr) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if len(r.Question) == 1 {
			q := r.Question[0]
			addrs, ok := answers[strings.TrimSuffix(strings.ToLower(q.Name), ".")]
			if !ok {
				m.Rcode = dns.RcodeNameError
			}
			for _, a := range addrs {
				m.Answer = append(m.Answer, answer(q, a)...)
			}
		}
		w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	return pc.LocalAddr().String()
}

// answer is the record for a when q asks for its type, else none.
func answer(q dns.Question, a netip.Addr) []dns.RR {
	hdr := dns.RR_Header{Name: q.Name, Rrtype: q.Qtype, Class: dns.ClassINET, Ttl: 60}
	switch {
	case q.Qtype == dns.TypeA && a.Is4():
		return []dns.RR{&dns.A{Hdr: hdr, A: a.AsSlice()}}
	case q.Qtype == dns.TypeAAAA && a.Is6():
		return []dns.RR{&dns.AAAA{Hdr: hdr, AAAA: a.AsSlice()}}
	}
	return nil
}

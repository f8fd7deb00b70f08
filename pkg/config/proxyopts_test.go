package config

import (
	"strings"
	"testing"
)

func TestRunProxyOptions(t *testing.T) {
	cfg := Default()
	cfg.Proxy.AllowCIDRs = []string{"10.1.0.0/16"}
	cfg.Proxy.Hosts = map[string][]string{"a.test": {"127.0.0.5"}}
	cfg.Proxy.Resolver = "127.0.0.53:53"
	o, err := cfg.Proxy.RunOptions([]string{"192.168.7.0/24,172.16.0.9"})
	if err != nil {
		t.Fatal(err)
	}
	var cidrs []string
	for _, p := range o.AllowCIDRs {
		cidrs = append(cidrs, p.String())
	}
	if got := strings.Join(cidrs, " "); got != "10.1.0.0/16 192.168.7.0/24 172.16.0.9/32" {
		t.Errorf("cidrs %q", got)
	}
	if o.Resolver != "127.0.0.53:53" || len(o.Hosts["a.test"]) != 1 || o.Hosts["a.test"][0].String() != "127.0.0.5" {
		t.Errorf("resolver %q hosts %v", o.Resolver, o.Hosts)
	}
	if _, err := cfg.Proxy.RunOptions([]string{"not-a-range"}); err == nil || !strings.Contains(err.Error(), "--allow-cidr") {
		t.Errorf("bad --allow-cidr: %v", err)
	}
}

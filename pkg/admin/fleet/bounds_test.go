package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/crackbox/crackbox/internal/natstest"
	"github.com/crackbox/crackbox/pkg/proxy"
)

// A registry value past MaxValue is skipped as malformed by every replica,
// however valid its JSON, and Register refuses to write one.
func TestOversizedEntryIsSkipped(t *testing.T) {
	c := natstest.Start(t, 1)
	hosts := make([]string, 0, 8000)
	for i := range 8000 {
		hosts = append(hosts, fmt.Sprintf("h%05d.wide.test", i))
	}
	big := `{"ip":"10.0.0.3","id":"wide","allowlist":["` + strings.Join(hosts, `","`) + `"]}`
	if len(big) <= MaxValue {
		t.Fatalf("test value is %d bytes, want more than %d", len(big), MaxValue)
	}
	first := open(t, c.URL(), Options{})
	kv := bucket(t, c)
	if _, err := kv.Put(context.Background(), "c.10.0.0.3", []byte(big)); err != nil {
		t.Fatal(err)
	}
	reg := proxy.NewRegistry()
	prom := prometheus.NewRegistry()
	open(t, c.URL(), Options{Registry: reg, Registerer: prom})
	if _, ok := reg.Lookup(netip.MustParseAddr("10.0.0.3")); ok {
		t.Errorf("a %d-byte entry was enforced; the cap is %d", len(big), MaxValue)
	}
	if n := counter(t, prom, "crackbox_registry_entries_skipped_total"); n != 1 {
		t.Errorf("skipped %v entries, want 1", n)
	}
	if err := first.Register(client(t, "10.0.0.4", hosts...)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("register of a client past the cap: %v, want %v", err, ErrTooLarge)
	}
}

package dispatch

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/nettest"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
)

// A runner that sends claim after bogus claim cannot write the operator's log
// at will: the refusals' warnings are rate limited, and the line that gets
// through says how many it stands for.
func TestRefusedRequestsWarnRateLimited(t *testing.T) {
	p := newPlane(t, true, 3*time.Second, nil, nil, "a")
	buf := &nettest.Buffer{}
	p.d.o.Log = slog.New(slog.NewTextHandler(buf, nil))
	nt, err := p.l.AddToken(service.WithPrincipal(p.ctx, service.AdminPrincipal), service.TokenIn{Name: "noisy", Kind: service.KindRunner})
	if err != nil {
		t.Fatal(err)
	}
	noisy := &Client{URL: p.url, Token: nt.Secret}
	for i := range 400 {
		c := Claim{Turn: int64(i + 1), Attempt: 1, Dispatch: fmt.Sprintf("bogus-%d", i), Folder: "a"}
		if _, err := noisy.Claim(p.ctx, c); !errors.Is(err, ErrStale) {
			t.Fatalf("bogus claim %d: %v, want refused as stale", i, err)
		}
	}
	if n := strings.Count(buf.String(), "fleet request refused"); n < 1 || n > 5 {
		t.Fatalf("400 refused claims wrote %d warnings, want 1 to 5:\n%s", n, buf)
	}
}

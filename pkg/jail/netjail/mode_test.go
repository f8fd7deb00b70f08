package netjail

import (
	"testing"

	"github.com/crackbox/crackbox/pkg/jail"
)

// The modes that need no capability resolve the same for root and non-root;
// the older config name of proxy-only is the same mode, and anything else is
// an error naming the input.
func TestResolveMode(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      bool
	}{
		{jail.NetProxyOnly, jail.NetProxyOnly, false},
		{jail.NetProxyOnlyAlias, jail.NetProxyOnly, false},
		{jail.NetNone, jail.NetNone, false},
		{"slirp", "", true},
		{"User", "", true},
	} {
		got, err := resolveMode(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("resolveMode(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

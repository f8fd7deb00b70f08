package dispatch

import (
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/turn"
	"github.com/crackbox/crackbox/pkg/proxy/inject"
)

func TestSecretInChunk(t *testing.T) {
	f := &flight{job: turn.Job{Secrets: []inject.Secret{{Name: "API_KEY", Value: "sk-live-0123456789"}, {Name: "SHORT", Value: "abc"}}}}
	for _, c := range []struct {
		chunk, want string
	}{
		{"notes: nothing here", ""},
		{"token=sk-live-0123456789\n", "API_KEY"},
		{"abc is too short to tell from text", ""},
		{"sk-live-012345678", ""},
	} {
		if got := secretIn(f, []byte(c.chunk)); got != c.want {
			t.Errorf("%q: %q, want %q", c.chunk, got, c.want)
		}
	}
}

package jail

import (
	"slices"
	"testing"
)

func TestGuestEnv(t *testing.T) {
	got, err := guestEnv([]string{"FOO=bar", "PATH=/custom", "HOME=/elsewhere"}, "/home/u", "xterm-256color", "C.UTF-8", false)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PATH=/custom", "HOME=/elsewhere", "TERM=xterm-256color", "LANG=C.UTF-8", "FOO=bar"}
	if !slices.Equal(got, want) {
		t.Fatalf("guestEnv = %q, want %q", got, want)
	}
	got, _ = guestEnv(nil, "/root", "", "", true)
	want = []string{"PATH=" + DefaultPath, "HOME=/root", "TERM=xterm"}
	if !slices.Equal(got, want) {
		t.Fatalf("guestEnv with tty = %q, want %q", got, want)
	}
	if _, err := guestEnv([]string{"NOVALUE"}, "/", "", "", false); err == nil {
		t.Fatal("entry without = accepted")
	}
}

// TestPathFrom: the caller's PATH travels as candidates, empty entries dropped, unless
// the caller set PATH for the guest: that wins as given.
func TestPathFrom(t *testing.T) {
	tests := []struct {
		name, path string
		env        []string
		want       []string
	}{
		{"split", "/usr/local/go/bin::/home/u/bin:/usr/bin:", nil, []string{"/usr/local/go/bin", "/home/u/bin", "/usr/bin"}},
		{"explicit PATH wins", "/usr/local/go/bin", []string{"A=1", "PATH=/opt/x"}, nil},
		{"no PATH", "", nil, nil},
	}
	for _, tc := range tests {
		if got := pathFrom(tc.path, tc.env); !slices.Equal(got, tc.want) {
			t.Errorf("%s: pathFrom(%q, %q) = %q, want %q", tc.name, tc.path, tc.env, got, tc.want)
		}
	}
}

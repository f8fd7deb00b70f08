package jail

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestResolveEnv(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "env")
	os.WriteFile(file, []byte("# comment\n\nFROM_FILE=1\nSHARED=file\nHOSTVAR\n"), 0o600)
	host := map[string]string{"HOSTVAR": "from-host", "TOKEN": "t0k"}
	lookup := func(k string) (string, bool) { v, ok := host[k]; return v, ok }

	got, err := ResolveEnv([]string{"A=1", "SHARED=flag", "TOKEN", "UNSET_ON_HOST", "EMPTY="}, []string{file}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"FROM_FILE=1", "SHARED=file", "HOSTVAR=from-host", "A=1", "SHARED=flag", "TOKEN=t0k", "EMPTY="}
	if !slices.Equal(got, want) {
		t.Fatalf("ResolveEnv = %q, want %q", got, want)
	}

	for _, bad := range [][]string{{"=x"}, {"A B=1"}} {
		if _, err := ResolveEnv(bad, nil, lookup); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("ResolveEnv(%q) err = %v, want an error naming it", bad, err)
		}
	}
	if _, err := ResolveEnv(nil, []string{filepath.Join(dir, "missing")}, lookup); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing env file: err = %v", err)
	}
}

// An earlier guest that could write the directory of --env-file may have
// replaced the file, or a directory on its path, with a symlink to a host
// file, or with a fifo: none is read, and the error says why.
func TestEnvFileRefusesPlantedFiles(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "shadow")
	os.WriteFile(victim, []byte("PASSWORD=host-only-secret\n"), 0o600)
	os.Symlink(victim, filepath.Join(dir, ".env"))
	os.Mkdir(filepath.Join(dir, "real"), 0o700)
	os.WriteFile(filepath.Join(dir, "real", ".env"), []byte("PASSWORD=host-only-secret\n"), 0o600)
	os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "sub"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{".env", "sub/.env", "fifo"} {
		got, err := ResolveEnv(nil, []string{filepath.Join(dir, name)}, os.LookupEnv)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("--env-file %s: got %q, err %v; want an error naming it", name, got, err)
		}
		if err != nil && strings.Contains(err.Error(), "host-only-secret") {
			t.Errorf("--env-file %s: the error quotes the file: %v", name, err)
		}
	}
	got, err := ResolveEnv(nil, []string{filepath.Join(dir, "real", ".env")}, os.LookupEnv)
	if err != nil || !slices.Equal(got, []string{"PASSWORD=host-only-secret"}) {
		t.Fatalf("plain file: %q, %v", got, err)
	}
}

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

package jail

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckHostShare(t *testing.T) {
	home := t.TempDir()
	for _, d := range []string{"project/src", ".ssh/keys", ".aws", ".gnupg", ".config/gcloud"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(home, "file"), []byte("x"), 0o600)
	os.Symlink(filepath.Join(home, ".ssh"), filepath.Join(home, "project", "sshlink"))
	cases := []struct {
		name  string
		path  string
		force bool
		ok    bool
		names string // part of the error
	}{
		{"project dir", filepath.Join(home, "project"), false, true, ""},
		{"subdir", filepath.Join(home, "project/src"), false, true, ""},
		{"root", "/", false, false, "refusing to share /"},
		{"root even with force", "/", true, false, "refusing to share /"},
		{"home itself", home, false, false, "home directory"},
		{"home with force", home, true, true, ""},
		{"an ancestor of home", filepath.Dir(home), false, false, "home directory"},
		{"/home", "/home", false, false, "home directory"},
		{"/root", "/root", false, false, "home directory"},
		{"~/.ssh", filepath.Join(home, ".ssh"), false, false, ".ssh"},
		{"under ~/.ssh", filepath.Join(home, ".ssh/keys"), false, false, ".ssh"},
		{"symlink into ~/.ssh", filepath.Join(home, "project/sshlink"), false, false, ".ssh"},
		{"~/.aws", filepath.Join(home, ".aws"), false, false, ".aws"},
		{"~/.gnupg", filepath.Join(home, ".gnupg"), false, false, ".gnupg"},
		{"~/.config/gcloud", filepath.Join(home, ".config/gcloud"), false, false, "gcloud"},
		{"~/.ssh with force", filepath.Join(home, ".ssh"), true, true, ""},
		{"/proc", "/proc/self", true, false, "/proc"},
		{"missing", filepath.Join(home, "nope"), false, false, "does not exist"},
		{"a file", filepath.Join(home, "file"), false, false, "not a directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := checkHostShare(c.path, home, shareCheck{force: c.force})
			if (err == nil) != c.ok {
				t.Fatalf("checkHostShare(%s) err = %v, want ok=%v", c.path, err, c.ok)
			}
			if err != nil {
				if !errors.Is(err, ErrBadSpec) {
					t.Errorf("error %v is not ErrBadSpec", err)
				}
				if !strings.Contains(err.Error(), c.names) {
					t.Errorf("error %q does not mention %q", err, c.names)
				}
			}
		})
	}
}

func TestCheckGuestTarget(t *testing.T) {
	for p, ok := range map[string]bool{
		"/data": true, "/work/x": true, "data": false, "/": false, "/a/../b": false,
		"/proc/x": false, "/sys": false, "/dev/shm": false,
	} {
		if err := checkGuestTarget(p); (err == nil) != ok {
			t.Errorf("checkGuestTarget(%q) = %v, want ok=%v", p, err, ok)
		}
	}
}

func TestHostMasks(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"etc/shadow", "etc/ssh/ssh_host_ed25519_key", "etc/ssh/ssh_host_ed25519_key.pub", "etc/passwd"} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(root, f), []byte("x"), 0o600)
	}
	os.MkdirAll(filepath.Join(root, "etc/ssl/private"), 0o700)
	got := strings.Join(hostMasks(root), " ")
	want := "/etc/shadow /etc/ssh/ssh_host_ed25519_key /etc/ssl/private"
	if got != want {
		t.Fatalf("hostMasks = %q, want %q (public key and passwd stay visible)", got, want)
	}
}

// A share that must not pass through a symlink is refused whether the link is
// the last component or any directory above it; the same paths pass without
// the flag, and the refusal reaches makePlan through Volume and Workdir.
func TestCheckHostShareNoSymlinks(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "real", "home")
	if err := os.MkdirAll(target, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(base, "leaf")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "real"), filepath.Join(base, "mid")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		path string
		ok   bool
	}{
		{"real directory", target, true},
		{"real directory, unclean", target + "/./", true},
		{"symlink as the last component", filepath.Join(base, "leaf"), false},
		{"symlink above", filepath.Join(base, "mid", "home"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := checkHostShare(c.path, "", shareCheck{noSymlinks: true})
			if (err == nil) != c.ok {
				t.Fatalf("checkHostShare(%s) = %q, %v; want ok=%v", c.path, got, err, c.ok)
			}
			if err != nil && (!errors.Is(err, ErrShareSymlink) || !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), target)) {
				t.Fatalf("error %v: want ErrShareSymlink and ErrBadSpec naming %s", err, target)
			}
			if got, err := checkHostShare(c.path, "", shareCheck{}); err != nil || got != target {
				t.Fatalf("without the flag: %q, %v; want %s", got, err, target)
			}
		})
	}
	link := filepath.Join(base, "leaf")
	for name, s := range map[string]Spec{
		"volume":  {Argv: []string{"x"}, Volumes: []Volume{{Host: link, Guest: "/d", NoSymlinks: true}}},
		"workdir": {Argv: []string{"x"}, Workdir: link, WorkdirNoSymlinks: true},
	} {
		if _, err := makePlan(s, FS9P); !errors.Is(err, ErrShareSymlink) {
			t.Errorf("%s: makePlan = %v, want ErrShareSymlink", name, err)
		}
	}
	if _, err := makePlan(Spec{Argv: []string{"x"}, Volumes: []Volume{{Host: target, Guest: "/d", NoSymlinks: true}}}, FS9P); err != nil {
		t.Errorf("real directory volume: %v", err)
	}
}

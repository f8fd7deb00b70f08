package hostfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Planted symlinks (on the last component or on a directory on the way)
// and fifos are refused for reading and appending; plain files are not.
func TestRefusesPlantedFiles(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Symlink(victim, filepath.Join(dir, "link"))
	os.Mkdir(filepath.Join(dir, "real"), 0o700)
	os.WriteFile(filepath.Join(dir, "real", "f"), []byte("x\n"), 0o600)
	os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "sub"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(dir, "adir"), 0o700)
	for _, tc := range []struct {
		name string
		want error
	}{
		{"link", ErrSymlink},
		{"sub/f", ErrSymlink},
		{"fifo", ErrNotRegular},
		{"adir", ErrNotRegular},
	} {
		p := filepath.Join(dir, tc.name)
		if f, err := Open(p); !errors.Is(err, tc.want) {
			t.Errorf("Open(%s) err = %v, want %v", tc.name, err, tc.want)
			if f != nil {
				f.Close()
			}
		}
		if f, err := OpenAppend(p, 0o600); !errors.Is(err, tc.want) {
			t.Errorf("OpenAppend(%s) err = %v, want %v", tc.name, err, tc.want)
			if f != nil {
				f.WriteString("written\n")
				f.Close()
			}
		}
		if f, err := Create(p, 0o600); !errors.Is(err, tc.want) {
			t.Errorf("Create(%s) err = %v, want %v", tc.name, err, tc.want)
			if f != nil {
				f.WriteString("written\n")
				f.Close()
			}
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep\n" {
		t.Errorf("symlink target written: %q", b)
	}
	if b, err := ReadFile(filepath.Join(dir, "real", "f"), 2); string(b) != "x\n" || err != nil {
		t.Errorf("ReadFile = %q, %v", b, err)
	}
	if _, err := ReadFile(filepath.Join(dir, "real", "f"), 1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadFile past its limit: err = %v", err)
	}
	created := filepath.Join(dir, "real", "new")
	if f, err := Create(created, 0o600); err != nil {
		t.Errorf("Create of a new file: %v", err)
	} else {
		f.WriteString("new\n")
		f.Close()
	}
	if f, err := Create(created, 0o600); err != nil {
		t.Errorf("Create of an existing file: %v", err)
	} else {
		f.Close()
	}
	if st, err := os.Stat(created); err != nil || st.Size() != 0 || st.Mode().Perm() != 0o600 {
		t.Errorf("Create did not leave an empty 0600 file: %v %v", st, err)
	}
	if _, err := Open(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: err = %v", err)
	}
}

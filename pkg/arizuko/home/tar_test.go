package home

import (
	"archive/tar"
	"bytes"
	"errors"
	"strings"
	"testing"
)

// A directory tarred and read back is the manifest Scan makes of it.
func TestTarRoundTrip(t *testing.T) {
	d := sample(t)
	want, _, _, err := Scan(d, nil, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := TarDir(&buf, d); err != nil {
		t.Fatal(err)
	}
	store := chunkMap{}
	got, err := FromTar(&buf, Limits{}, store.put)
	if err != nil {
		t.Fatal(err)
	}
	if got.Hash() != want.Hash() {
		t.Fatalf("tar round trip differs: %v", Diff(want, got))
	}
	var out bytes.Buffer
	if err := WriteTar(&out, got, store.get); err != nil {
		t.Fatal(err)
	}
	again, err := FromTar(&out, Limits{}, store.put)
	if err != nil || again.Hash() != want.Hash() {
		t.Fatalf("WriteTar round trip: %v", err)
	}
}

func TestFromTarRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		hdr  tar.Header
		lim  Limits
		want string
	}{
		{"parent", tar.Header{Name: "../evil", Typeflag: tar.TypeReg, Mode: 0o644}, Limits{}, "not clean"},
		{"absolute", tar.Header{Name: "/etc/cron.d/x", Typeflag: tar.TypeReg, Mode: 0o644}, Limits{}, "path"},
		{"hard link", tar.Header{Name: "l", Typeflag: tar.TypeLink, Linkname: "/etc/shadow"}, Limits{}, "files, directories and symlinks"},
		{"device", tar.Header{Name: "d", Typeflag: tar.TypeChar}, Limits{}, "files, directories and symlinks"},
		{"too big", tar.Header{Name: "f", Typeflag: tar.TypeReg, Size: 10, Mode: 0o644}, Limits{MaxBytes: 5}, "fleet.home.max_bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			if err := tw.WriteHeader(&c.hdr); err != nil {
				t.Fatal(err)
			}
			tw.Write(make([]byte, c.hdr.Size))
			tw.Close()
			_, err := FromTar(&buf, c.lim, func(string, []byte) error { return nil })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one naming %q", err, c.want)
			}
			if c.want == "fleet.home.max_bytes" && !errors.Is(err, ErrTooLarge) {
				t.Errorf("err = %v, want ErrTooLarge", err)
			}
		})
	}
}

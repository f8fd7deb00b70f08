package secrets

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func ring(t *testing.T, keys ...string) *Ring {
	t.Helper()
	var raw [][]byte
	for _, k := range keys {
		b, err := ParseKeys(k)
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, b...)
	}
	r, err := NewRing(raw...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSealOpen(t *testing.T) {
	k1, k2 := GenerateKey(), GenerateKey()
	r := ring(t, k1)
	aad := AAD("folder", "corp/eng", "TOKEN")
	blob, err := r.Seal(aad, []byte("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(blob, []byte("s3cret")) {
		t.Fatal("plaintext visible in blob")
	}
	if pt, err := r.Open(aad, blob); err != nil || string(pt) != "s3cret" {
		t.Fatalf("open = %q, %v", pt, err)
	}
	again, _ := r.Seal(aad, []byte("s3cret"))
	if bytes.Equal(again, blob) {
		t.Fatal("two seals share a nonce")
	}

	t.Run("tamper", func(t *testing.T) {
		for i := range blob {
			bad := bytes.Clone(blob)
			bad[i] ^= 0x01
			if _, err := r.Open(aad, bad); err == nil {
				t.Fatalf("flipping byte %d still opens", i)
			}
		}
		if _, err := r.Open(aad, blob[:len(blob)-1]); !errors.Is(err, ErrOpen) {
			t.Fatalf("truncated: %v", err)
		}
	})
	t.Run("row swap", func(t *testing.T) {
		for _, other := range [][]byte{
			AAD("folder", "corp/eng", "OTHER"),
			AAD("folder", "corp/sales", "TOKEN"),
			AAD("user", "corp/eng", "TOKEN"),
			AAD("folder", "corp/engT", "OKEN"), // same concatenation, different split
		} {
			if _, err := r.Open(other, blob); !errors.Is(err, ErrOpen) {
				t.Fatalf("opened under another row's AAD: %v", err)
			}
		}
	})
	t.Run("wrong key", func(t *testing.T) {
		if _, err := ring(t, k2).Open(aad, blob); !errors.Is(err, ErrOpen) {
			t.Fatalf("wrong key: %v", err)
		}
	})
	t.Run("rotation", func(t *testing.T) {
		rot := ring(t, k2, k1)
		if rot.Primary(blob) {
			t.Fatal("old blob reported as primary")
		}
		if pt, err := rot.Open(aad, blob); err != nil || string(pt) != "s3cret" {
			t.Fatalf("old key no longer opens: %v", err)
		}
		re, _ := rot.Seal(aad, []byte("s3cret"))
		if !rot.Primary(re) {
			t.Fatal("resealed blob not primary")
		}
		if _, err := r.Open(aad, re); !errors.Is(err, ErrOpen) {
			t.Fatal("resealed blob opens with the retired key alone")
		}
	})
}

func TestLoad(t *testing.T) {
	if _, err := Load("", "", nil); !errors.Is(err, ErrNoKey) {
		t.Fatalf("no key: %v", err)
	}
	if _, err := Load("tooshort", "", nil); !errors.Is(err, ErrBadKey) {
		t.Fatalf("bad key: %v", err)
	}
	k := GenerateKey()
	p := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(p, []byte("# primary\n"+k+"\n"+GenerateKey()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Load("", p, nil)
	if err != nil || len(r.keys) != 2 {
		t.Fatalf("file: %v", err)
	}
	// A key given by value wins over the file, and the environment plays no part.
	t.Setenv(EnvKey, "tooshort")
	hexKey := "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	if r, err := Load(hexKey, p, nil); err != nil || len(r.keys) != 1 {
		t.Fatalf("value: %v", err)
	}
	if _, err := Load("", filepath.Join(t.TempDir(), "none"), nil); !errors.Is(err, ErrNoKey) {
		t.Fatalf("missing file: %v", err)
	}
}

// A key file others may read still loads, with a warning in the logger Load was given.
func TestLoadWarnsOfAReadableKeyFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(p, []byte(GenerateKey()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := Load("", p, slog.New(slog.NewTextHandler(&buf, nil))); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `level=WARN msg="secrets key file is readable by others"`) {
		t.Errorf("log %q, want the readable key file warned of", buf.String())
	}
}

package admin

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// ErrNoToken means no token file exists for an admin address: no daemon made one, or
// it was started with admin.secret set.
var ErrNoToken = errors.New("no admin token file")

// A daemon started without admin.secret still guards its API with a token: loopback is
// open to every local user, and whoever reaches the API can widen any sandbox's egress.
// It makes a fresh token at each start and leaves it, readable by its own user only, in
// the run dir base, where `crackbox state` run by that user (or root) finds it.

// TokenFile is where the daemon with its admin API on listen (host:port) keeps its
// token, under base, the run dir base. The port names it: one daemon holds a port.
func TokenFile(base, listen string) (string, error) {
	_, port, err := net.SplitHostPort(listen)
	if err == nil && (port == "" || port == "0") {
		err = errors.New("no bound port")
	}
	if err != nil {
		return "", fmt.Errorf("admin token for %q: want the bound host:port: %w", listen, err)
	}
	return filepath.Join(base, "admin-"+port+".token"), nil
}

// WriteToken makes a fresh random token and stores it at path, mode 0600. It is written
// to a new file in the same directory and renamed over path, so a file or link someone
// left at path is replaced, never written through.
func WriteToken(path string) (string, error) {
	b := make([]byte, 32)
	rand.Read(b)
	tok := hex.EncodeToString(b)
	f, err := os.CreateTemp(filepath.Dir(path), ".admin-token-*")
	if err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(tok + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	return tok, nil
}

// ReadToken reads the token at path.
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("%w at %s", ErrNoToken, path)
	case errors.Is(err, fs.ErrPermission):
		return "", fmt.Errorf("admin token %s: %w: run as the daemon's user or root, or pass --secret", path, err)
	case err != nil:
		return "", fmt.Errorf("admin token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("admin token %s is empty", path)
	}
	return tok, nil
}

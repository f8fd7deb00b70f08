package jail

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Filesystem types for shares.
const (
	FS9P       = "9p"
	FSVirtiofs = "virtiofs"
	// FSStream is a share served by crackbox's 9p server (pkg/jail/sharefs) over a control
	// stream rather than by a QEMU device.
	FSStream = "9p-stream"
)

// share is one host directory the guest sees.
type share struct {
	Tag      string
	Host     string
	Target   string
	ReadOnly bool
	FS       string
	// Hide lists paths under Host a FSStream share never shows the guest.
	Hide []string
	// SyncExit: the guest writes to a layer of its own and hands the changes back
	// when the command ends; the share itself is served read-only.
	SyncExit bool
}

// hostViewDirs are shared read-only (with a tmpfs overlay in the guest) in host-view mode.
// Never /, /root or /home.
var hostViewDirs = []string{"/usr", "/etc", "/opt"}

// secretPaths are hidden in host-view mode when they exist on the host. Globs are expanded.
var secretPaths = []string{
	"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-",
	"/etc/ssh/ssh_host_*_key", "/etc/ssl/private",
	"/etc/sudoers", "/etc/sudoers.d", "/etc/security/opasswd",
	"/etc/machine-id", "/etc/credstore", "/etc/credstore.encrypted",
	"/etc/NetworkManager/system-connections", "/etc/wireguard", "/etc/libvirt/secrets",
	"/etc/krb5.keytab", "/etc/ipsec.secrets", "/etc/ppp/chap-secrets", "/etc/ppp/pap-secrets",
	"/etc/letsencrypt", "/etc/crackbox", "/etc/arizuko",
}

// sensitiveHomeDirs are credential stores under a home directory that are never shared
// without Force.
var sensitiveHomeDirs = []string{".ssh", ".gnupg", ".aws", ".kube", ".docker", ".azure", ".config/gcloud", ".password-store"}

// hostMasks lists the existing secret paths on this host.
func hostMasks(root string) []string {
	var out []string
	for _, p := range secretPaths {
		matches, _ := filepath.Glob(filepath.Join(root, p))
		for _, m := range matches {
			out = append(out, "/"+strings.TrimPrefix(strings.TrimPrefix(m, root), "/"))
		}
	}
	return out
}

// streamLowerDir is the host-view lower served by sharefs rather than QEMU: the one
// that holds the secrets, which the server leaves out (a mask applied in the guest
// is undone by guest root, or ignored by a hostile guest kernel).
const streamLowerDir = "/etc"

// hostViewShares returns the read-only lowers of the host view.
func hostViewShares() []share {
	var out []share
	for _, d := range hostViewDirs {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			s := share{Tag: strings.TrimPrefix(d, "/"), Host: d, Target: d, ReadOnly: true, FS: FS9P}
			if d == streamLowerDir {
				s.FS = FSStream
				for _, m := range hostMasks("/") {
					if rel, ok := strings.CutPrefix(m, d+"/"); ok {
						s.Hide = append(s.Hide, rel)
					}
				}
			}
			out = append(out, s)
		}
	}
	return out
}

// hostSymlinks mirrors the host's merged-/usr links (bin -> usr/bin, ...).
func hostSymlinks() map[string]string {
	out := map[string]string{}
	for _, n := range []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"} {
		if t, err := os.Readlink("/" + n); err == nil {
			out["/"+n] = t
		}
	}
	return out
}

// ErrShareSymlink is wrapped (with ErrBadSpec) when a share that must not pass
// through a symlink does.
var ErrShareSymlink = errors.New("share path contains a symlink")

// shareCheck carries what a caller allows for one share.
type shareCheck struct {
	force      bool // share home directories and credential stores anyway
	noSymlinks bool // refuse a path with a symlink in any component
}

// checkHostShare resolves a host directory to share and refuses the dangerous ones: /, the
// home directory and its ancestors, /root, /home, kernel filesystems, and credential stores
// under a home (the last three kinds only without force). It returns the resolved path.
//
// With noSymlinks the path is resolved once and refused unless it resolves to itself, so
// a symlink planted anywhere on it is caught. QEMU's 9p fsdev (on the command line, or
// bound per run into a restored snapshot) and virtiofsd's source= still open the path by
// name after this check, so whoever can write an ancestor directory can swap a component
// in between. Handing them a pre-opened /proc/self/fd/N instead would need the fd in QEMU
// for snapshot restores too; until then callers close that window by layout, keeping
// shares out of directories anyone else (another guest) can write.
func checkHostShare(path, home string, c shareCheck) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%w: share %s: %v", ErrBadSpec, path, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("%w: share %s does not exist: create it or fix the path", ErrBadSpec, path)
	}
	if c.noSymlinks && real != abs {
		return "", fmt.Errorf("%w: %w: %s resolves to %s; share the real directory", ErrBadSpec, ErrShareSymlink, path, real)
	}
	st, err := os.Stat(real)
	if err != nil || !st.IsDir() {
		return "", fmt.Errorf("%w: share %s is not a directory: only directories can be shared", ErrBadSpec, path)
	}
	if real == "/" {
		return "", fmt.Errorf("%w: refusing to share / (%s): share a project directory instead", ErrBadSpec, path)
	}
	for _, sys := range []string{"/proc", "/sys", "/dev", "/run", "/boot"} {
		if within(real, sys) {
			return "", fmt.Errorf("%w: refusing to share %s: it is under %s", ErrBadSpec, path, sys)
		}
	}
	if c.force {
		return real, nil
	}
	homes := []string{"/root", "/home"}
	if home != "" {
		if h, err := filepath.EvalSymlinks(home); err == nil {
			homes = append(homes, h)
		}
		homes = append(homes, filepath.Clean(home))
	}
	for _, h := range homes {
		if real == h || within(h, real) {
			return "", fmt.Errorf("%w: refusing to share %s: it is or contains the home directory %s; share a project directory instead (or --force)", ErrBadSpec, path, h)
		}
		for _, s := range sensitiveHomeDirs {
			if within(real, filepath.Join(h, s)) {
				return "", fmt.Errorf("%w: refusing to share %s: it is under %s, which holds credentials (use --force to share it anyway)", ErrBadSpec, path, filepath.Join(h, s))
			}
		}
	}
	return real, nil
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// checkGuestTarget validates a mount point in the guest.
func checkGuestTarget(p string) error {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return fmt.Errorf("%w: guest path %q must be absolute and clean, like /data", ErrBadSpec, p)
	}
	if p == "/" {
		return fmt.Errorf("%w: guest path / cannot be a volume target; use RootFS", ErrBadSpec)
	}
	for _, sys := range []string{"/proc", "/sys", "/dev"} {
		if within(p, sys) {
			return fmt.Errorf("%w: guest path %s is under %s", ErrBadSpec, p, sys)
		}
	}
	return nil
}

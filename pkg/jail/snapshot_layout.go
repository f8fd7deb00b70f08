package jail

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Which runs fit the snapshot layout, what that layout is, and what a snapshot is keyed by.

// snapshotMode resolves Spec.Snapshot to a mode.
func snapshotMode(s string) (string, error) {
	switch s {
	case "", SnapshotAuto:
		return SnapshotAuto, nil
	case SnapshotOn, SnapshotOff:
		return s, nil
	}
	return "", fmt.Errorf("%w: snapshot %q: use auto, on or off", ErrBadSpec, s)
}

// snapInput is what decides whether a run fits the snapshot layout.
type snapInput struct {
	Mode     string
	Machine  string
	Modular  bool
	RootMode string
	Shares   []share // workdir and volumes
	NetMode  string
}

// snapshotCompatible reports whether the run can be restored from a snapshot, or why not.
// Memory, cpus, accelerator, kernel and QEMU need not be checked here: they are part of
// the snapshot's key, so a different value just has its own snapshot.
func snapshotCompatible(in snapInput) (bool, string) {
	switch {
	case in.Mode == SnapshotOff:
		return false, "snapshots are off"
	case in.Machine != MachineMicrovm:
		return false, "machine " + in.Machine + " (only microvm)"
	case in.Modular:
		// Its shares are virtio-fs, and vhost-user-fs blocks migration.
		return false, "a modular kernel"
	case in.RootMode != "hostview":
		return false, "root mode " + in.RootMode + " (only the host view)"
	}
	devices := 0
	for _, s := range in.Shares {
		switch s.FS {
		case FSStream: // no device: mounted over the control session after the restore
		case FS9P:
			devices++
		default:
			// Plain root serves rw shares with virtiofsd; vhost-user-fs blocks migration.
			return false, "share " + s.Target + " is " + s.FS
		}
	}
	if devices > snapSlots {
		return false, fmt.Sprintf("%d 9p shares (the snapshot has %d slots)", devices, snapSlots)
	}
	return true, ""
}

// snapLayout is the fixed share list of a snapshot guest: the host-view lowers (a missing
// one serves empty) and snapSlots slots tagged v0..vN, filled with the run's shares in
// order, the rest serving empty read-only. With shares nil every slot is empty.
func snapLayout(shares []share, empty string) []vmShare {
	var out []vmShare
	for _, d := range hostViewDirs {
		if d == streamLowerDir {
			continue // served over the control session
		}
		host := d
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			host = empty
		}
		out = append(out, vmShare{share: share{Tag: strings.TrimPrefix(d, "/"), Host: host, Target: d, ReadOnly: true, FS: FS9P}})
	}
	var devs []share
	for _, s := range shares {
		if s.FS != FSStream {
			devs = append(devs, s)
		}
	}
	for i := 0; i < snapSlots; i++ {
		s := share{Tag: "v" + strconv.Itoa(i), Host: empty, ReadOnly: true, FS: FS9P}
		if i < len(devs) {
			s = devs[i]
		}
		out = append(out, vmShare{share: s})
	}
	return out
}

// snapKey hashes everything a restore must match: the QEMU binary and kernel (by path,
// size, mtime and inode, so an upgrade or rebuild makes a new key), the initramfs (by its
// content-addressed path), the host's part (snapHost: the CPU model, and under KVM the
// host CPU and kernel) and the QEMU arguments with the per-run paths left out (machine,
// accelerator, CPU model, memory, cpus, kernel command line, device layout).
func snapKey(qemu, kernel, initrd, host string, cfg vmConfig) (string, error) {
	h := sha256.New()
	fmt.Fprintln(h, snapFormat)
	fmt.Fprintln(h, host)
	for _, p := range []string{qemu, kernel, initrd} {
		st, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		if p == initrd {
			// The initramfs is named by its content hash; two runs that build it at
			// once rename identical files over each other, so its inode says nothing.
			fmt.Fprintf(h, "%s %d\n", p, st.Size())
			continue
		}
		var ino uint64
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			ino = sys.Ino
		}
		fmt.Fprintf(h, "%s %d %d %d\n", p, st.Size(), st.ModTime().UnixNano(), ino)
	}
	// The NIC's backend (a tap or a lone hub port) is not guest state.
	cfg.CtlSock, cfg.QMPSock, cfg.Incoming, cfg.TapFD, cfg.TapName = "ctl", "qmp", "", 0, ""
	cfg.SharePorts = append([]string(nil), cfg.SharePorts...)
	for i := range cfg.SharePorts {
		cfg.SharePorts[i] = sharePortName(i)
	}
	cfg.Shares = append([]vmShare(nil), cfg.Shares...)
	for i := range cfg.Shares {
		cfg.Shares[i].Host, cfg.Shares[i].ReadOnly, cfg.Shares[i].Target = "-", false, ""
	}
	fmt.Fprintln(h, strings.Join(cfg.args(), "\x00"))
	return hex.EncodeToString(h.Sum(nil))[:20], nil
}

// snapInputOf is the compatibility input of a plan.
func snapInputOf(p *plan, mode string) snapInput {
	return snapInput{Mode: mode, Machine: p.machine, Modular: p.modular, RootMode: p.rs.Root.Mode,
		Shares: p.userShare, NetMode: p.rs.Net.Mode}
}

package host

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"syscall"
)

// KVMDevice is the device QEMU opens for -accel kvm.
const KVMDevice = "/dev/kvm"

// The per-run QEMU identities. As root, each run that drops privileges claims one uid (and
// the gid of the same number) from this block for itself (pkg/jail): no account in
// /etc/passwd or /etc/group, no range in /etc/subuid or /etc/subgid, and no process has
// it. The block starts above systemd's container range (0x80000-0x6FFFFFFF), so nspawn
// and podman never hand these ids out either.
const (
	VMMUIDBase  = 0x70000000 // 1879048192
	VMMUIDCount = 65536
)

// DevStat is what access to a device node depends on: its owner, group and mode.
type DevStat struct {
	UID, GID uint32
	Perm     uint32 // the low nine permission bits
	Group    string // the group's name, for advice ("" when it has none)
}

// KVMUser is the identity whose access to /dev/kvm decides the accelerator: QEMU's.
type KVMUser struct {
	UID, GID uint32
	Groups   []uint32
	// Privileged: crackbox runs as root and adds the device's own group to QEMU's groups.
	Privileged bool
	// Listed is the groups the account database gives UID: what a new login session has.
	Listed []uint32
}

// KVMVerdict is whether QEMU may open /dev/kvm, why not, and the fix to tell the user.
type KVMVerdict struct {
	OK  bool
	Why string
	Fix string
}

// Fixes doctor and the accelerator choice give, by cause.
const (
	kvmFixModule = "load kvm_intel or kvm_amd (modprobe kvm_intel) on a host with hardware virtualisation"
	kvmFixMode   = `give /dev/kvm a group and mode 0660, e.g. a udev rule KERNEL=="kvm", GROUP="kvm", MODE="0660"`
)

// CheckKVM decides from the device's owner, group and mode whether u may open it
// read-write, as the kernel would: the owner bits when u owns it, else the group bits
// when u is in its group, else the other bits. When crackbox is root, QEMU gets the
// device's group added, except group 0 (root's group opens far more than /dev/kvm).
func CheckKVM(dev *DevStat, u KVMUser) KVMVerdict {
	if dev == nil {
		return KVMVerdict{Why: "the device does not exist (no kvm module loaded)", Fix: kvmFixModule}
	}
	if u.UID == 0 {
		return KVMVerdict{OK: true}
	}
	groups := u.Groups
	if u.Privileged && dev.GID != 0 && u.GID != dev.GID && !slices.Contains(groups, dev.GID) {
		groups = append(slices.Clone(groups), dev.GID)
	}
	inGroup := u.GID == dev.GID || slices.Contains(groups, dev.GID)
	var bits uint32
	switch {
	case u.UID == dev.UID:
		bits = dev.Perm >> 6 & 7
	case inGroup:
		bits = dev.Perm >> 3 & 7
	default:
		bits = dev.Perm & 7
	}
	if bits&6 == 6 {
		return KVMVerdict{OK: true}
	}
	why := fmt.Sprintf("QEMU's user (uid %d) cannot open %s (%s)", u.UID, KVMDevice, dev.describe())
	groupRW := dev.Perm>>3&6 == 6
	switch {
	case u.Privileged || !groupRW || dev.GID == 0 || u.UID == dev.UID:
		return KVMVerdict{Why: why, Fix: kvmFixMode}
	case slices.Contains(u.Listed, dev.GID):
		return KVMVerdict{Why: why + "; you are in group " + dev.groupName() + " but this session started before you joined it",
			Fix: "log out and in again (or run `newgrp " + dev.groupName() + "`)"}
	default:
		return KVMVerdict{Why: why + "; you are not in group " + dev.groupName(),
			Fix: "usermod -aG " + dev.groupName() + " $USER, then log out and in again"}
	}
}

func (d *DevStat) groupName() string {
	if d.Group != "" {
		return d.Group
	}
	return strconv.FormatUint(uint64(d.GID), 10)
}

func (d *DevStat) describe() string {
	owner := strconv.FormatUint(uint64(d.UID), 10)
	if u, err := user.LookupId(owner); err == nil {
		owner = u.Username
	}
	return fmt.Sprintf("%04o %s:%s", d.Perm, owner, d.groupName())
}

// statDevice reads a device node's owner, group and mode; nil when it does not exist.
func statDevice(path string) (*DevStat, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return nil, nil
		}
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	d := &DevStat{UID: st.Uid, GID: st.Gid, Perm: st.Mode & 0o777}
	if g, err := user.LookupGroupId(strconv.FormatUint(uint64(st.Gid), 10)); err == nil {
		d.Group = g.Name
	}
	return d, nil
}

// KVMGroup is /dev/kvm's group, added to QEMU's groups when crackbox is root; -1
// when there is no device or its group is root's.
func KVMGroup() int { return deviceGID(KVMDevice) }

func deviceGID(path string) int {
	d, err := statDevice(path)
	if err != nil || d == nil || d.GID == 0 {
		return -1
	}
	return int(d.GID)
}

// qemuKVMUser is the identity QEMU would run as on this host, as Run picks it (pkg/jail
// pickVMM).
func qemuKVMUser() KVMUser {
	euid := os.Geteuid()
	if euid != 0 {
		u := KVMUser{UID: uint32(euid), GID: uint32(os.Getegid())}
		gs, _ := os.Getgroups()
		for _, g := range gs {
			u.Groups = append(u.Groups, uint32(g))
		}
		if pw, err := user.LookupId(strconv.Itoa(euid)); err == nil {
			ids, _ := pw.GroupIds()
			for _, s := range ids {
				if n, err := strconv.ParseUint(s, 10, 32); err == nil {
					u.Listed = append(u.Listed, uint32(n))
				}
			}
		}
		return u
	}
	// Root drops QEMU to a uid of the run's own block with /dev/kvm's group added; the
	// block's first uid stands for whichever the run claims.
	var groups []uint32
	if gid := KVMGroup(); gid > 0 {
		groups = []uint32{uint32(gid)}
	}
	return KVMUser{UID: VMMUIDBase, GID: VMMUIDBase, Groups: groups, Privileged: true}
}

// probeKVMAccess runs CheckKVM for QEMU's identity on this host. Unprivileged, QEMU is
// crackbox's own user, so an open that succeeds (an ACL can grant it) settles it too.
func probeKVMAccess() KVMVerdict {
	dev, err := statDevice(KVMDevice)
	if err != nil {
		return KVMVerdict{Why: err.Error(), Fix: kvmFixModule}
	}
	v := CheckKVM(dev, qemuKVMUser())
	if !v.OK && dev != nil && os.Geteuid() != 0 {
		if f, err := os.OpenFile(KVMDevice, os.O_RDWR, 0); err == nil {
			f.Close()
			return KVMVerdict{OK: true}
		}
	}
	return v
}

package jail

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/crackbox/crackbox/pkg/jail/control"
)

// plan is a validated Spec: every path resolved, every default filled.
type plan struct {
	rs        control.RunSpec
	userShare []share // workdir and volumes
	lowers    []share // host view or rootfs
	machine   string
	cpus      int
	memMiB    int
	modular   bool     // a modular kernel: modules in the initramfs, virtio-fs shares (debkernel.go)
	portTags  []string // the share each share port carries, by port index (shareport.go)
}

// makePlan validates s and builds the RunSpec. userFS is the filesystem type used for
// the caller's shares (virtiofs when QEMU runs unprivileged under root, else 9p).
func makePlan(s Spec, userFS string) (*plan, error) {
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return nil, fmt.Errorf("%w: no command given: crackbox run [flags] -- cmd args...", ErrBadSpec)
	}
	if _, err := workdirSync(s.WorkdirSync); err != nil {
		return nil, err
	}
	p, err := planMachine(s)
	if err != nil {
		return nil, err
	}
	inv := invokingUser()
	u := guestUser(s, inv)
	// Shares are checked against the invoking user's home: that is whose secrets they hold.
	if p.userShare, err = planShares(s, inv.Home, userFS); err != nil {
		return nil, err
	}
	root, err := p.planRoot(s.RootFS)
	if err != nil {
		return nil, err
	}
	if err := checkMaskedTargets(p.userShare, root.Mask, s.Workdir); err != nil {
		return nil, err
	}
	env, err := guestEnv(s.Env, u.Home, os.Getenv("TERM"), os.Getenv("LANG"), s.TTY)
	if err != nil {
		return nil, err
	}
	dir := s.Dir
	if dir == "" {
		if len(p.userShare) > 0 && s.Workdir != "" {
			dir = p.userShare[0].Target
		} else {
			dir = u.Home
		}
	}
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("%w: working directory %q must be absolute", ErrBadSpec, dir)
	}
	hostname := s.Hostname
	if hostname == "" {
		hostname = "crackbox"
	}
	netw, err := netSpec(s.Net)
	if err != nil {
		return nil, err
	}
	groups := u.Groups
	if len(groups) == 0 {
		groups = []int{u.GID}
	}
	p.rs = control.RunSpec{
		Argv: s.Argv, Env: env, Dir: dir, PathFrom: pathFrom(s.Path, s.Env),
		UID: u.UID, GID: u.GID, Groups: groups,
		TTY: s.TTY, Rows: s.Rows, Cols: s.Cols,
		Hostname:  hostname,
		Root:      root,
		Net:       netw,
		MCPSocket: s.MCPSocket,
	}
	for _, sh := range p.userShare {
		m := control.Mount{Tag: sh.Tag, Target: sh.Target, FSType: sh.FS, ReadOnly: sh.ReadOnly}
		if sh.SyncExit {
			m.Sync, m.SyncLimit = control.SyncExit, diskQuota(s.DiskQuota)
		}
		p.rs.Mounts = append(p.rs.Mounts, m)
	}
	p.rs.Swap = swapSize(p.rs)
	return p, nil
}

// planMachine checks the machine type, cpus and memory and fills their defaults.
func planMachine(s Spec) (*plan, error) {
	p := &plan{machine: s.Machine, cpus: s.CPUs, memMiB: s.MemoryMiB}
	switch p.machine {
	case "":
		p.machine = MachineMicrovm
	case MachineMicrovm, MachineQ35:
	default:
		return nil, fmt.Errorf("%w: machine %q: use microvm or q35", ErrBadSpec, s.Machine)
	}
	if p.cpus == 0 {
		p.cpus = 1
	}
	if p.cpus < 0 || p.cpus > MaxCPUs {
		return nil, fmt.Errorf("%w: cpus %d: use 1 to %d", ErrBadSpec, s.CPUs, MaxCPUs)
	}
	if p.memMiB == 0 {
		p.memMiB = DefaultMemoryMiB
	}
	if p.memMiB < 64 || p.memMiB > 1<<20 {
		return nil, fmt.Errorf("%w: memory %d MiB: use at least 64M (e.g. 256M, 1G)", ErrBadSpec, s.MemoryMiB)
	}
	if err := checkHostFit(p.cpus, p.memMiB); err != nil {
		return nil, err
	}
	return p, nil
}

// guestUser is who the command runs as: the invoking user unless the spec names one.
func guestUser(s Spec, inv User) User {
	u := inv
	if s.User != nil {
		u = *s.User
	}
	if s.Root {
		u = User{UID: 0, GID: 0, Home: "/root"}
	}
	if u.Home == "" {
		u.Home = "/"
	}
	return u
}

// planShares checks the workdir and volumes against home (whose secrets they would
// expose) and tags them v0..vN, each a distinct guest path.
func planShares(s Spec, home, userFS string) ([]share, error) {
	var out []share
	if s.Workdir != "" {
		host, err := checkHostShare(s.Workdir, home, shareCheck{force: s.Force, noSymlinks: s.WorkdirNoSymlinks})
		if err != nil {
			return nil, err
		}
		target, _ := filepath.Abs(s.Workdir)
		if err := checkGuestTarget(target); err != nil {
			return nil, err
		}
		if !s.WorkdirRO {
			if err := checkSystemShare(host, s); err != nil {
				return nil, fmt.Errorf("workdir: %w", err)
			}
		}
		sync, err := workdirSync(s.WorkdirSync)
		if err != nil {
			return nil, err
		}
		out = append(out, share{Host: host, Target: target, ReadOnly: s.WorkdirRO, SyncExit: sync == WorkdirSyncExit && !s.WorkdirRO})
	}
	for _, v := range s.Volumes {
		host, err := checkHostShare(v.Host, home, shareCheck{force: s.Force, noSymlinks: v.NoSymlinks})
		if err != nil {
			return nil, err
		}
		if err := checkGuestTarget(v.Guest); err != nil {
			return nil, fmt.Errorf("volume %s:%s: %w", v.Host, v.Guest, err)
		}
		if !v.ReadOnly {
			if err := checkSystemShare(host, s); err != nil {
				return nil, fmt.Errorf("volume %s:%s: %w", v.Host, v.Guest, err)
			}
		}
		out = append(out, share{Host: host, Target: v.Guest, ReadOnly: v.ReadOnly})
	}
	seen := map[string]bool{}
	for i := range out {
		sh := &out[i]
		if seen[sh.Target] {
			return nil, fmt.Errorf("%w: two shares target %s in the guest; give each its own path", ErrBadSpec, sh.Target)
		}
		seen[sh.Target] = true
		if err := qemuPathOK(sh.Host); err != nil {
			return nil, err
		}
		sh.Tag = "v" + strconv.Itoa(i)
		sh.FS = userFS
	}
	return out, nil
}

// planRoot sets the guest's read-only lowers: the host view, or rootfs when given.
func (p *plan) planRoot(rootfs string) (control.Root, error) {
	root := control.Root{Mode: "hostview"}
	if rootfs != "" {
		abs, err := filepath.Abs(rootfs)
		if err != nil {
			return root, fmt.Errorf("%w: rootfs %s: %v", ErrBadSpec, rootfs, err)
		}
		if st, err := os.Stat(abs); err != nil || !st.IsDir() {
			return root, fmt.Errorf("%w: rootfs %s is not a directory", ErrBadSpec, rootfs)
		}
		if abs == "/" {
			return root, fmt.Errorf("%w: rootfs / would share the whole host; leave rootfs empty for the host view", ErrBadSpec)
		}
		if err := qemuPathOK(abs); err != nil {
			return root, err
		}
		root.Mode = "rootfs"
		p.lowers = []share{{Tag: "rootfs", Host: abs, Target: "/", ReadOnly: true, FS: FS9P}}
	} else {
		p.lowers = hostViewShares()
		root.Symlinks = hostSymlinks()
		root.Mask = hostMasks("/")
	}
	for _, l := range p.lowers {
		root.Lower = append(root.Lower, control.Mount{Tag: l.Tag, Target: l.Target, FSType: l.FS, ReadOnly: true})
	}
	return root, nil
}

// netSpec checks the network settings and turns them into the guest's view.
func netSpec(n Net) (control.Net, error) {
	out := control.Net{Mode: n.Mode, ProxyURL: n.ProxyURL, TrustCA: string(n.TrustCA)}
	switch n.Mode {
	case "", NetNone:
		out.Mode = NetNone
	case NetTap:
		if n.Tap == nil || (n.Tap.Name == "" && n.Tap.File == nil) || n.Tap.GuestAddr == "" {
			return out, fmt.Errorf("%w: net tap needs a tap device and a guest address", ErrBadSpec)
		}
		out.Addr, out.Gateway, out.DNS = n.Tap.GuestAddr, n.Tap.Gateway, n.Tap.DNS
	case NetProxyOnly:
		out.ProxyListen = n.ProxyListen
		if out.ProxyListen == "" {
			out.ProxyListen = DefaultProxyListen
		}
	default:
		return out, fmt.Errorf("%w: net mode %q: use none, tap or proxy-only", ErrBadSpec, n.Mode)
	}
	return out, nil
}

// checkMaskedTargets refuses a share whose guest path lies in a path the guest masks
// (host secrets such as /etc/ssl/private): the mask goes on after the shares and would
// hide it, so the command would find the directory empty.
func checkMaskedTargets(shares []share, masks []string, workdir string) error {
	for i, sh := range shares {
		for _, m := range masks {
			if !within(sh.Target, m) {
				continue
			}
			if i == 0 && workdir != "" {
				return fmt.Errorf("%w: workdir %s is under %s, which the guest masks (host secrets); run from another directory, pass -w elsewhere, or --no-workdir", ErrBadSpec, sh.Target, m)
			}
			return fmt.Errorf("%w: volume target %s is under %s, which the guest masks (host secrets) and would hide the volume; mount it elsewhere, e.g. /mnt/%s", ErrBadSpec, sh.Target, m, filepath.Base(sh.Target))
		}
	}
	return nil
}

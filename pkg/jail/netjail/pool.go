package netjail

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/crackbox/crackbox/pkg/jail/rundir"
	"github.com/vishvananda/netlink"

	"golang.org/x/sys/unix"
)

// DefaultPool is the range per-run /30s are taken from when Config.Pool is unset.
var DefaultPool = netip.MustParsePrefix("10.213.0.0/16")

// ErrPoolExhausted means every /30 of the pool collides with the host or is
// held by a live run.
var ErrPoolExhausted = errors.New("netjail: no free /30 in the address pool")

// claimDirName is the directory under the runs dir holding one lock file per
// claimed /30.
const claimDirName = ".netjail"

// record is the content of a claim file: who holds the /30 and which objects
// to remove once that owner is gone.
type record struct {
	owner
	Subnet string `json:"subnet"`
	Tap    string `json:"tap"`
	Table  string `json:"table"`
}

// claim is a held /30: the lock file stays open and flock'ed for the run's
// life, so a crashed owner releases it without cooperation.
type claim struct {
	f      *os.File
	path   string
	subnet netip.Prefix
}

func validatePool(p netip.Prefix) (netip.Prefix, error) {
	if !p.IsValid() {
		return DefaultPool, nil
	}
	if !p.Addr().Is4() || p.Bits() > 30 {
		return netip.Prefix{}, fmt.Errorf("netjail: address pool %s: want an IPv4 range of /30 or larger, e.g. %s", p, DefaultPool)
	}
	return p.Masked(), nil
}

// hostPrefixes lists every IPv4 network the host already uses: its addresses'
// subnets and the destinations of its routes in every table except defaults.
func hostPrefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("netjail: list host addresses: %w", err)
	}
	for _, a := range addrs {
		if p, ok := ipnetPrefix(a.IPNet); ok {
			out = append(out, p.Masked(), netip.PrefixFrom(p.Addr(), 32))
		}
	}
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("netjail: list host routes: %w", err)
	}
	for _, r := range routes {
		if p, ok := ipnetPrefix(r.Dst); ok && p.Bits() > 0 {
			out = append(out, p.Masked())
		}
	}
	return out, nil
}

func ipnetPrefix(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones), true
}

// claimSubnet takes the first /30 of pool that overlaps nothing in busy and
// is not locked by a live run. A stale claim (owner dead) is taken over after
// removing the objects its record names.
func claimSubnet(runsDir string, pool netip.Prefix, busy []netip.Prefix, rec record) (*claim, error) {
	// The runs dir is the jail's run dir base; a networked run is often the first
	// to create it after a reboot, so it must get the mode QEMU needs.
	if err := rundir.EnsureBase(runsDir); err != nil {
		return nil, fmt.Errorf("netjail: %w", err)
	}
	dir := filepath.Join(runsDir, claimDirName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("netjail: claim dir: %w", err)
	}
	var collided []string
	for a := pool.Addr(); pool.Contains(a); a = advance(a, 4) {
		sub := netip.PrefixFrom(a, 30)
		if hit := overlapping(sub, busy); hit.IsValid() {
			if len(collided) < 3 && !containsStr(collided, hit.String()) {
				collided = append(collided, hit.String())
			}
			continue
		}
		c, err := tryClaim(dir, sub, rec)
		if err != nil {
			return nil, err
		}
		if c != nil {
			return c, nil
		}
	}
	hint := ""
	if len(collided) > 0 {
		hint = " (host networks in the way: " + strings.Join(collided, ", ") + ")"
	}
	return nil, fmt.Errorf("%w %s%s: pick another pool or end other runs", ErrPoolExhausted, pool, hint)
}

func advance(a netip.Addr, n int) netip.Addr {
	b := a.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(n)
	if v < uint32(n) { // wrapped past 255.255.255.255
		return netip.Addr{}
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func overlapping(p netip.Prefix, busy []netip.Prefix) netip.Prefix {
	for _, b := range busy {
		if b.Overlaps(p) {
			return b
		}
	}
	return netip.Prefix{}
}

func containsStr(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func claimPath(dir string, sub netip.Prefix) string {
	return filepath.Join(dir, sub.Addr().String()+".claim")
}

// tryClaim returns (nil, nil) when sub is held by someone else.
func tryClaim(dir string, sub netip.Prefix, rec record) (*claim, error) {
	path := claimPath(dir, sub)
	for attempt := 0; attempt < 3; attempt++ {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("netjail: open claim %s: %w", path, err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, nil
			}
			return nil, fmt.Errorf("netjail: lock claim %s: %w", path, err)
		}
		// Someone may have removed the file between open and lock; a lock on
		// an unlinked inode guards nothing.
		if !samePath(f, path) {
			f.Close()
			continue
		}
		prev, err := readRecord(f)
		if err != nil {
			f.Close()
			return nil, err
		}
		if prev.PID != 0 {
			if prev.alive() {
				// The owner is finishing its teardown or lost its objects'
				// cleanup; leave the /30 alone rather than guess.
				f.Close()
				return nil, nil
			}
			if err := removeObjects(prev.Tap, prev.Table); err != nil {
				f.Close()
				return nil, fmt.Errorf("netjail: reclaim %s from dead run %s: %w", sub, prev.RunID, err)
			}
		}
		rec.Subnet = sub.String()
		if err := writeRecord(f, rec); err != nil {
			f.Close()
			return nil, err
		}
		return &claim{f: f, path: path, subnet: sub}, nil
	}
	return nil, nil
}

func samePath(f *os.File, path string) bool {
	a, err1 := f.Stat()
	b, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

func readRecord(f *os.File) (record, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return record{}, fmt.Errorf("netjail: read claim %s: %w", f.Name(), err)
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<16))
	if err != nil {
		return record{}, fmt.Errorf("netjail: read claim %s: %w", f.Name(), err)
	}
	var r record
	if len(strings.TrimSpace(string(b))) == 0 {
		return r, nil
	}
	if err := json.Unmarshal(b, &r); err != nil {
		// Not ours to judge; treat as an unknown owner so nothing is removed.
		return record{owner: owner{PID: -1}}, nil
	}
	return r, nil
}

func writeRecord(f *os.File, r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("netjail: write claim %s: %w", f.Name(), err)
	}
	if _, err := f.WriteAt(append(b, '\n'), 0); err != nil {
		return fmt.Errorf("netjail: write claim %s: %w", f.Name(), err)
	}
	return nil
}

// release removes the claim file while still holding the lock, then unlocks.
func (c *claim) release() error {
	if c == nil || c.f == nil {
		return nil
	}
	err := os.Remove(c.path)
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	if cerr := c.f.Close(); err == nil && cerr != nil && !errors.Is(cerr, syscall.EBADF) {
		err = cerr
	}
	c.f = nil
	return err
}

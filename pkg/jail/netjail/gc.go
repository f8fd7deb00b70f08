package netjail

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// unclaimedGrace is how old an empty claim file must be before GC removes it;
// a younger one may belong to a run that is between creating and filling it.
const unclaimedGrace = time.Minute

// GC removes the network leftovers of runs whose owning process is gone:
// claims under runsDir ("" skips them), then cbx taps and tables anywhere on
// the host whose owner tag names a dead process. Objects of live runs, and
// objects without our tag, are never touched. It returns what it removed.
func GC(runsDir string) ([]string, error) {
	var removed []string
	var errs []error
	if runsDir != "" {
		r, err := gcClaims(filepath.Join(runsDir, claimDirName))
		removed = append(removed, r...)
		errs = append(errs, err)
	}
	r, err := gcTaps()
	removed = append(removed, r...)
	errs = append(errs, err)
	r, err = gcTables()
	removed = append(removed, r...)
	errs = append(errs, err)
	return removed, errors.Join(errs...)
}

func gcClaims(dir string) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.claim"))
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, p := range paths {
		ok, err := gcClaim(p)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			removed = append(removed, "claim "+filepath.Base(p))
		}
	}
	return removed, errors.Join(errs...)
}

// gcClaim removes one claim if its holder is dead, with the objects it names.
func gcClaim(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("netjail: gc open %s: %w", path, err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return false, nil // held by a live run
	}
	if !samePath(f, path) {
		return false, nil
	}
	rec, err := readRecord(f)
	if err != nil {
		return false, err
	}
	if rec.PID == 0 {
		st, err := f.Stat()
		if err != nil || time.Since(st.ModTime()) < unclaimedGrace {
			return false, nil
		}
	} else if rec.alive() {
		return false, nil
	}
	if err := removeObjects(rec.Tap, rec.Table); err != nil {
		return false, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("netjail: gc remove %s: %w", path, err)
	}
	return true, nil
}

func gcTaps() ([]string, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("netjail: gc list links: %w", err)
	}
	var removed []string
	var errs []error
	for _, l := range links {
		a := l.Attrs()
		if !strings.HasPrefix(a.Name, tapPrefix) {
			continue
		}
		o, ok := parseTag(a.Alias)
		if !ok || o.alive() {
			continue
		}
		if err := netlink.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("netjail: gc delete link %s: %w", a.Name, err))
			continue
		}
		removed = append(removed, "tap "+a.Name)
	}
	return removed, errors.Join(errs...)
}

func gcTables() ([]string, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, fmt.Errorf("netjail: nftables: %w", err)
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, fmt.Errorf("netjail: gc list nft tables: %w", err)
	}
	var removed []string
	var errs []error
	for _, t := range tables {
		if !strings.HasPrefix(t.Name, tablePrefix) {
			continue
		}
		o, ok := tableOwner(c, t)
		if !ok || o.alive() {
			continue
		}
		if err := RemoveTable(t.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, "table "+t.Name)
	}
	return removed, errors.Join(errs...)
}

// tableOwner reads the owner tag from the comment of the input chain's rules.
func tableOwner(c *nftables.Conn, t *nftables.Table) (owner, bool) {
	rules, err := c.GetRules(t, &nftables.Chain{Name: chainInput, Table: t})
	if err != nil {
		return owner{}, false
	}
	for _, r := range rules {
		if s, ok := userdata.GetString(r.UserData, userdata.TypeComment); ok {
			if o, ok := parseTag(s); ok {
				return o, true
			}
		}
	}
	return owner{}, false
}

package jail

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/crackbox/crackbox/internal/proc"
	"github.com/crackbox/crackbox/pkg/jail/host"
	"github.com/crackbox/crackbox/pkg/jail/rundir"
)

// Each run that drops privileges claims one uid (and the gid of the same number) from
// the block host.VMMUIDBase names, for itself.

// ErrNoVMMUID means every uid of the block is held by a live run or taken by the host.
var ErrNoVMMUID = errors.New("jail: no free vmm uid")

// uidClaimDir is the directory under the run-dir base holding one lock file per claimed uid.
const uidClaimDir = ".vmmuid"

// uidRecord is a claim file's content: which process holds the uid.
type uidRecord struct {
	UID   uint32 `json:"uid"`
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// uidClaim is a held uid; the lock stays held for the run's life, so a killed run frees
// it without cooperation and `crackbox gc` (or the next claim) reaps the file.
type uidClaim struct {
	UID  uint32
	f    *os.File
	path string
}

// claimVMMUID takes the first uid of the block that nothing else holds.
func claimVMMUID(base string) (*uidClaim, error) {
	// The base must stay traversable for QEMU's uid, as newRunDir makes it.
	if err := rundir.EnsureBase(base); err != nil {
		return nil, err
	}
	dir := filepath.Join(base, uidClaimDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("vmm uid claims %s: %w", dir, err)
	}
	taken := hostIDs()
	inUse := processUIDs()
	for i := uint32(0); i < host.VMMUIDCount; i++ {
		uid := host.VMMUIDBase + i
		if taken.has(uid) || inUse[uid] || !vmmIDFree(uid) {
			continue
		}
		c, err := tryClaimUID(dir, uid)
		if err != nil {
			return nil, err
		}
		if c != nil {
			return c, nil
		}
	}
	return nil, fmt.Errorf("%w in %d-%d (claims in %s): end other runs or run `crackbox gc`", ErrNoVMMUID, host.VMMUIDBase, host.VMMUIDBase+host.VMMUIDCount-1, dir)
}

// tryClaimUID returns (nil, nil) when a live run holds uid.
func tryClaimUID(dir string, uid uint32) (*uidClaim, error) {
	path := filepath.Join(dir, strconv.FormatUint(uint64(uid), 10)+".claim")
	for range 3 {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return nil, fmt.Errorf("vmm uid claim %s: %w", path, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, nil
			}
			return nil, fmt.Errorf("vmm uid claim %s: %w", path, err)
		}
		// A lock on a file someone unlinked between open and flock guards nothing.
		if !sameFile(f, path) {
			f.Close()
			continue
		}
		start, err := proc.Start(os.Getpid())
		if err != nil {
			f.Close()
			return nil, err
		}
		b, _ := json.Marshal(uidRecord{UID: uid, PID: os.Getpid(), Start: start})
		if err := f.Truncate(0); err == nil {
			_, err = f.WriteAt(append(b, '\n'), 0)
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("vmm uid claim %s: %w", path, err)
		}
		return &uidClaim{UID: uid, f: f, path: path}, nil
	}
	return nil, nil
}

func sameFile(f *os.File, path string) bool {
	a, err1 := f.Stat()
	b, err2 := os.Lstat(path)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// release removes the claim file while still holding its lock.
func (c *uidClaim) release() {
	if c == nil || c.f == nil {
		return
	}
	os.Remove(c.path)
	c.f.Close()
	c.f = nil
}

// gcVMMUIDs removes the uid claims under the run-dir base whose run is gone (nobody
// holds the lock) and kills any process still running as such a uid, which can only
// be a leftover of that run. It returns what it removed.
func gcVMMUIDs(base string) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(base, uidClaimDir, "*.claim"))
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, p := range paths {
		uid, ok := reapUIDClaim(p)
		if !ok {
			continue
		}
		if err := killUID(uid); err != nil {
			errs = append(errs, err)
		}
		removed = append(removed, "vmm uid "+strconv.FormatUint(uint64(uid), 10))
	}
	return removed, errors.Join(errs...)
}

// reapUIDClaim removes one claim if no live run holds it.
func reapUIDClaim(path string) (uint32, bool) {
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil || !sameFile(f, path) {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(path), ".claim"), 10, 32)
	if err != nil || n < host.VMMUIDBase || n >= host.VMMUIDBase+host.VMMUIDCount {
		return 0, false
	}
	if os.Remove(path) != nil {
		return 0, false
	}
	return uint32(n), true
}

// killUID sends SIGKILL to every process whose real uid is uid.
func killUID(uid uint32) error {
	var errs []error
	for pid, u := range processes() {
		if u == uid {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, fmt.Errorf("kill leftover pid %d of vmm uid %d: %w", pid, uid, err))
			}
		}
	}
	return errors.Join(errs...)
}

// processes maps every visible pid to its real uid.
func processes() map[int]uint32 {
	out := map[int]uint32{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if uid, ok := procUID(pid); ok {
			out[pid] = uid
		}
	}
	return out
}

func processUIDs() map[uint32]bool {
	out := map[uint32]bool{}
	for _, u := range processes() {
		out[u] = true
	}
	return out
}

// procUID reads the real uid from /proc/PID/status.
func procUID(pid int) (uint32, bool) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Uid:"); ok {
			fs := strings.Fields(rest)
			if len(fs) == 0 {
				return 0, false
			}
			n, err := strconv.ParseUint(fs[0], 10, 32)
			return uint32(n), err == nil
		}
	}
	return 0, false
}

// idSet is the ids the host already uses inside the block: accounts and subordinate ranges.
type idSet struct {
	ids    map[uint32]bool
	ranges [][2]uint64 // [start, end)
}

func (s idSet) has(id uint32) bool {
	if s.ids[id] {
		return true
	}
	for _, r := range s.ranges {
		if uint64(id) >= r[0] && uint64(id) < r[1] {
			return true
		}
	}
	return false
}

// hostIDs collects the uids and gids of /etc/passwd and /etc/group and the ranges of
// /etc/subuid and /etc/subgid that fall into the block; a uid is usable only when the
// gid of the same number is free too.
func hostIDs() idSet {
	s := idSet{ids: map[uint32]bool{}}
	for _, f := range []struct {
		path  string
		field int
	}{{"/etc/passwd", 2}, {"/etc/group", 2}} {
		eachLine(f.path, func(fs []string) {
			if len(fs) > f.field {
				if n, err := strconv.ParseUint(fs[f.field], 10, 32); err == nil {
					s.ids[uint32(n)] = true
				}
			}
		})
	}
	for _, path := range []string{"/etc/subuid", "/etc/subgid"} {
		eachLine(path, func(fs []string) {
			if len(fs) < 3 {
				return
			}
			start, e1 := strconv.ParseUint(fs[1], 10, 32)
			n, e2 := strconv.ParseUint(fs[2], 10, 32)
			if e1 == nil && e2 == nil {
				s.ranges = append(s.ranges, [2]uint64{start, start + n})
			}
		})
	}
	// Accounts from other NSS sources (LDAP, sssd) are asked about one candidate at a
	// time by vmmIDFree.
	return s
}

func eachLine(path string, fn func([]string)) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 64<<20))
	for sc.Scan() {
		fn(strings.Split(sc.Text(), ":"))
	}
}

// vmmIDFree asks NSS about one id, so directory accounts are never reused either.
func vmmIDFree(id uint32) bool {
	s := strconv.FormatUint(uint64(id), 10)
	if _, err := user.LookupId(s); err == nil {
		return false
	}
	if _, err := user.LookupGroupId(s); err == nil {
		return false
	}
	return true
}

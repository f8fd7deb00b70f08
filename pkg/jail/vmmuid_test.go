package jail

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/crackbox/crackbox/pkg/jail/host"
)

func TestClaimVMMUIDDistinctAndReleased(t *testing.T) {
	base := t.TempDir()
	a, err := claimVMMUID(base)
	if err != nil {
		t.Fatal(err)
	}
	b, err := claimVMMUID(base)
	if err != nil {
		t.Fatal(err)
	}
	if a.UID == b.UID {
		t.Fatalf("two live claims got the same uid %d", a.UID)
	}
	for _, c := range []*uidClaim{a, b} {
		if c.UID < host.VMMUIDBase || c.UID >= host.VMMUIDBase+host.VMMUIDCount {
			t.Fatalf("uid %d outside the documented block", c.UID)
		}
		if !vmmIDFree(c.UID) {
			t.Fatalf("uid %d is an account on this host", c.UID)
		}
	}
	a.release()
	if _, err := os.Stat(a.path); !os.IsNotExist(err) {
		t.Fatalf("released claim %s still exists: %v", a.path, err)
	}
	c, err := claimVMMUID(base)
	if err != nil {
		t.Fatal(err)
	}
	defer c.release()
	defer b.release()
	if c.UID != a.UID {
		t.Fatalf("a released uid %d was not reused (got %d)", a.UID, c.UID)
	}
	if removed, _ := gcVMMUIDs(base); len(removed) != 0 {
		t.Fatalf("gc removed live claims: %v", removed)
	}
}

func TestClaimVMMUIDSkipsHostIDs(t *testing.T) {
	s := idSet{ids: map[uint32]bool{host.VMMUIDBase: true}, ranges: [][2]uint64{{host.VMMUIDBase + 1, host.VMMUIDBase + 3}}}
	for id, want := range map[uint32]bool{host.VMMUIDBase: true, host.VMMUIDBase + 1: true, host.VMMUIDBase + 2: true, host.VMMUIDBase + 3: false} {
		if s.has(id) != want {
			t.Errorf("has(%d) = %v, want %v", id, !want, want)
		}
	}
}

// TestGCReapsKilledRunsUID: a run killed with SIGKILL leaves its claim file; gc removes
// it, and a process left running as that uid is killed.
func TestGCReapsKilledRunsUID(t *testing.T) {
	base := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, jailHelperArg, "claim", base)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	uid, err := strconv.ParseUint(strings.TrimSpace(line), 10, 32)
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("helper said %q", line)
	}
	claim := filepath.Join(base, uidClaimDir, strconv.FormatUint(uid, 10)+".claim")
	if removed, _ := gcVMMUIDs(base); len(removed) != 0 {
		t.Fatalf("gc removed a live run's claim: %v", removed)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if _, err := os.Stat(claim); err != nil {
		t.Fatalf("the killed run's claim should still be on disk before gc: %v", err)
	}
	var stray *exec.Cmd
	if os.Geteuid() == 0 {
		// What a QEMU that outlived its run would be.
		stray = exec.Command("sleep", "60")
		stray.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
		if err := stray.Start(); err != nil {
			t.Fatal(err)
		}
		defer stray.Process.Kill()
	}
	removed, err := gcVMMUIDs(base)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != "vmm uid "+strconv.FormatUint(uid, 10) {
		t.Fatalf("gc removed %v, want the killed run's uid %d", removed, uid)
	}
	if _, err := os.Stat(claim); !os.IsNotExist(err) {
		t.Fatalf("claim %s still there after gc: %v", claim, err)
	}
	if stray != nil {
		if err := stray.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("a process left running as the reaped uid ended with %v, want killed", err)
		}
	}
}

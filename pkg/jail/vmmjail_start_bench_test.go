package jail

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/proc"
)

// BenchmarkVMMJailStart times what the jail adds before QEMU's own start: a short-lived
// program started through the jail (its own uid, namespaces, mount view, cgroup leaf made
// and removed) and the same program started bare as QEMU's uid, alternately in one run.
func BenchmarkVMMJailStart(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the jail needs root")
	}
	c, err := claimVMMUID(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer c.release()
	id := &vmmIdentity{UID: c.UID, GID: c.UID, PerRun: true}
	bin, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	bin, _ = filepath.EvalSymlinks(bin)
	var jailed, bare []time.Duration
	n := 0
	for b.Loop() {
		n++
		start := time.Now()
		leaf, err := newCgroupLeaf("bench-"+strconv.Itoa(os.Getpid())+"-"+strconv.Itoa(n), vmmLimits(256, 1))
		if err != nil {
			b.Fatal(err)
		}
		j, err := newVMMJail(filepath.Join(b.TempDir(), "root"), id, leaf)
		if err != nil {
			b.Fatal(err)
		}
		if err := runJailed(j, bin); err != nil {
			b.Fatal(err)
		}
		leaf.remove()
		jailed = append(jailed, time.Since(start))

		start = time.Now()
		cmd := exec.Command(bin)
		cmd.Env = vmmEnv
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: id.UID, Gid: id.GID}}
		proc.Tie(cmd, syscall.SIGKILL)
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		bare = append(bare, time.Since(start))
	}
	mj, mb := medianDur(jailed), medianDur(bare)
	b.ReportMetric(float64(mj.Microseconds())/1000, "jailed-ms")
	b.ReportMetric(float64(mb.Microseconds())/1000, "bare-ms")
	b.ReportMetric(float64(mj-mb)/float64(time.Millisecond), "added-ms")
}

// runJailed runs bin through j to its exit, as QEMU is started.
func runJailed(j *vmmJail, bin string) error {
	cmd, err := j.command(bin)
	if err != nil {
		return err
	}
	release, err := j.start(cmd)
	if err != nil {
		return err
	}
	defer release()
	return cmd.Wait()
}

func medianDur(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

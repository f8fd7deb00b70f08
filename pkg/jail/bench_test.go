package jail_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/pkg/jail/initramfs"
	"github.com/crackbox/crackbox/pkg/jail/install"
	"github.com/crackbox/crackbox/pkg/jail/rundir"
)

// The CLI benchmarks below time the crackbox binary named by $CRACKBOX_BENCH_BIN
// (scripts/bench.sh builds it) as a user runs it. They hold every guest slot, so no other
// test guest competes with the measured one. Run with -benchtime Nx for N samples.

// BenchmarkRunTrue measures a whole run of `true`: QEMU start, boot, session, teardown.
func BenchmarkRunTrue(b *testing.B) {
	s := jailtest.Spec(b, "true")
	for b.Loop() {
		res, err := jailtest.Run(b, s)
		if err != nil || res.Exit != 0 {
			b.Fatalf("exit %d err %v", res.Exit, err)
		}
		b.ReportMetric(float64(res.Boot.Milliseconds()), "boot-ms")
	}
}

// benchMem is the guest memory of every CLI benchmark, the size the RSS target names.
const benchMem = "256M"

type cliBench struct {
	bin, kernel, guestInit, initrd string
	work                           string
}

func newCLIBench(b *testing.B) *cliBench {
	e := jailtest.Require(b)
	bin := os.Getenv("CRACKBOX_BENCH_BIN")
	if bin == "" {
		b.Skip("set CRACKBOX_BENCH_BIN to a crackbox binary (scripts/bench.sh does)")
	}
	initrd, err := initramfs.Ensure(e.GuestInit, e.Cache)
	if err != nil {
		b.Fatal(err)
	}
	// Not under b.TempDir, whose parent is 0700: QEMU running as nobody must reach it.
	work, err := os.MkdirTemp("", "crackbox-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(work) })
	if err := os.Chmod(work, 0o777); err != nil {
		b.Fatal(err)
	}
	jailtest.HoldAll(b)
	return &cliBench{bin: bin, kernel: e.Kernel, guestInit: e.GuestInit, initrd: initrd, work: work}
}

// cmd is `crackbox run --net none --memory 256M [flags] -- argv` in the work directory.
func (c *cliBench) cmd(flags []string, argv ...string) *exec.Cmd {
	a := append([]string{"run", "--net", "none", "--memory", benchMem, "-q",
		"--kernel", c.kernel, "--guest-init", c.guestInit}, flags...)
	a = append(append(a, "--"), argv...)
	cmd := exec.Command(c.bin, a...)
	cmd.Dir = c.work
	cmd.Env = os.Environ()
	return cmd
}

// BenchmarkRunVsFloor times `crackbox run --net none -- true` against the floor: the
// same QEMU command line (captured from a live run) whose guest-init powers off at once
// (crackbox.ctl=none). The two alternate, so background load falls on both alike.
func BenchmarkRunVsFloor(b *testing.B) {
	c := newCLIBench(b)
	idle := c.startIdle(b, nil)
	argv := idle.qemuArgv
	idle.stop(b)
	floor := c.floorArgv(b, argv)
	b.Logf("floor: %q", floor)

	var runs, floors, initGuest, initHost []time.Duration
	for b.Loop() {
		fl, ug, uh := c.runFloor(b, floor)
		floors, initGuest, initHost = append(floors, fl), append(initGuest, ug), append(initHost, uh)
		start := time.Now()
		cmd := c.cmd(nil, "true")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("crackbox run true: %v: %s", err, out)
		}
		runs = append(runs, time.Since(start))
		b.Logf("sample %d: run %s floor %s (guest-init start: guest uptime %s, host %s)", len(runs),
			ms(runs[len(runs)-1]), ms(fl), ms(ug), ms(uh))
	}
	report(b, "run", runs)
	report(b, "floor", floors)
	report(b, "init-uptime", initGuest)
	report(b, "init-host", initHost)
	b.ReportMetric(float64(median(runs))/float64(median(floors)), "ratio-median")
	b.ReportMetric(float64(slices.Min(runs))/float64(slices.Min(floors)), "ratio-min")
}

// floorArgv turns a live run's QEMU argv into the floor's: the kernel and initramfs by
// path, guest-init told to power off at once, the QMP socket in a temp dir, and no
// vhost-user share (it would need a virtiofsd; the floor mounts nothing).
func (c *cliBench) floorArgv(b *testing.B, argv []string) []string {
	dir := b.TempDir()
	vhost := map[string]bool{} // chardev ids of vhost-user-fs devices
	for i := 0; i+1 < len(argv); i++ {
		if argv[i] == "-device" && strings.HasPrefix(argv[i+1], "vhost-user-fs") {
			for _, kv := range strings.Split(argv[i+1], ",") {
				if id, ok := strings.CutPrefix(kv, "chardev="); ok {
					vhost[id] = true
				}
			}
		}
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		b.Fatal(err)
	}
	var out []string
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		// A restored run's QEMU waits for its state on -incoming; the floor boots cold.
		if i+1 < len(argv) && a == "-incoming" {
			i++
			continue
		}
		if i+1 < len(argv) && a == "-device" && strings.HasPrefix(argv[i+1], "vhost-user-fs") {
			i++
			continue
		}
		if i+1 < len(argv) && a == "-chardev" {
			id, _, _ := strings.Cut(strings.TrimPrefix(argv[i+1], "socket,id="), ",")
			if vhost[id] {
				i++
				continue
			}
		}
		switch {
		case a == "/dev/fd/3":
			a = c.kernel
		case a == "/dev/fd/4":
			a = c.initrd
		case strings.Contains(a, "crackbox.ctl="):
			a = regexp.MustCompile(`crackbox\.ctl=\S+`).ReplaceAllString(a, "crackbox.ctl=none")
		case strings.HasPrefix(a, "socket,id=qmp,"):
			a = "socket,id=qmp,path=" + filepath.Join(dir, "qmp.sock") + ",server=on,wait=off"
		case strings.HasPrefix(a, "socket,id=ctl,"):
			a = "socket,id=ctl,path=" + filepath.Join(dir, "ctl.sock")
		case strings.HasPrefix(a, "local,") && strings.Contains(a, "path="+rundir.DefaultBase()):
			// The run's placeholder shares went with its run dir.
			a = regexp.MustCompile(`path=[^,]+`).ReplaceAllString(a, "path="+empty)
		}
		out = append(out, a)
	}
	return out
}

var uptimeRe = regexp.MustCompile(`msg="guest-init start".*uptime=([0-9.]+)`)

// runFloor boots the floor once: its wall time, and when guest-init started by the guest's
// uptime and by the host's clock (the console line's arrival).
func (c *cliBench) runFloor(b *testing.B, argv []string) (wall, initGuest, initHost time.Duration) {
	var sock string
	for i, a := range argv {
		if strings.HasPrefix(a, "socket,id=ctl,path=") && i > 0 {
			sock = strings.TrimPrefix(a, "socket,id=ctl,path=")
		}
	}
	// QEMU connects the control port as a client: something must listen.
	os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, conn); conn.Close() }()
		}
	}()
	qemu, err := install.FindQEMU()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(qemu, argv...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	var console strings.Builder
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		console.WriteString(line + "\n")
		if m := uptimeRe.FindStringSubmatch(line); m != nil && initHost == 0 {
			initHost = time.Since(start)
			f, _ := strconv.ParseFloat(m[1], 64)
			initGuest = time.Duration(f * float64(time.Second))
		}
	}
	if err := cmd.Wait(); err != nil {
		b.Fatalf("floor qemu: %v: %s", err, console.String())
	}
	wall = time.Since(start)
	if initHost == 0 {
		b.Fatalf("floor: no guest-init start line on the console: %s", console.String())
	}
	return wall, initGuest, initHost
}

// idleGuest is a crackbox run whose command sleeps: the process tree to measure.
type idleGuest struct {
	cmd      *exec.Cmd
	qemuPID  int
	qemuArgv []string
	done     chan error
}

// startIdle starts `crackbox run ... -- sh -c 'echo ready; exec sleep 120'` and returns
// once the command runs.
func (c *cliBench) startIdle(b *testing.B, flags []string) *idleGuest {
	cmd := c.cmd(flags, "sh", "-c", "echo ready; exec sleep 120")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	g := &idleGuest{cmd: cmd, done: make(chan error, 1)}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ok := false
		for sc.Scan() {
			if sc.Text() == "ready" && !ok {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
		g.done <- cmd.Wait()
	}()
	select {
	case ok := <-ready:
		if !ok {
			b.Fatalf("idle guest ended before it was ready: %v", <-g.done)
		}
	case <-time.After(3 * time.Minute):
		g.stop(b)
		b.Fatal("idle guest not ready within 3 minutes")
	}
	for _, p := range descendants(cmd.Process.Pid) {
		if a := procArgv(p); len(a) > 0 && strings.Contains(filepath.Base(a[0]), "qemu-system") {
			g.qemuPID, g.qemuArgv = p, a[1:]
		}
	}
	if g.qemuPID == 0 {
		g.stop(b)
		b.Fatal("no qemu process under crackbox")
	}
	return g
}

func (g *idleGuest) stop(b *testing.B) {
	// SIGTERM reaches the command; crackbox then ends the run and cleans up.
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(30 * time.Second):
		_ = g.cmd.Process.Kill()
		b.Error("crackbox did not end within 30s of SIGTERM")
		<-g.done
	}
}

// BenchmarkIdleRSS reads the resident memory of one idle guest (crackbox, QEMU and any
// virtiofsd) 2 s after its command started, with and without the work directory share
// (as root a read-write share is virtiofs, which backs guest RAM with a shared memfd).
func BenchmarkIdleRSS(b *testing.B) {
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"workdir", nil},
		{"no-workdir", []string{"--no-workdir"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := newCLIBench(b)
			var total, qemu, anon, file, shmem []float64
			for b.Loop() {
				g := c.startIdle(b, tc.flags)
				time.Sleep(2 * time.Second) // the measurement: RSS is read at two seconds idle, not at an event
				var sum float64
				for _, p := range append([]int{g.cmd.Process.Pid}, descendants(g.cmd.Process.Pid)...) {
					st := procStatus(p)
					sum += st["VmRSS"]
					if p == g.qemuPID {
						qemu, anon = append(qemu, st["VmRSS"]), append(anon, st["RssAnon"])
						file, shmem = append(file, st["RssFile"]), append(shmem, st["RssShmem"])
						b.Logf("qemu %d: VmRSS %.1f MiB (anon %.1f, file %.1f, shmem %.1f)", p,
							st["VmRSS"], st["RssAnon"], st["RssFile"], st["RssShmem"])
					} else if a := procArgv(p); len(a) > 0 {
						b.Logf("%s %d: VmRSS %.1f MiB", filepath.Base(a[0]), p, st["VmRSS"])
					}
				}
				total = append(total, sum)
				g.stop(b)
			}
			for _, m := range []struct {
				unit string
				v    []float64
			}{{"total-MiB", total}, {"qemu-MiB", qemu}, {"qemu-anon-MiB", anon}, {"qemu-file-MiB", file}, {"qemu-shmem-MiB", shmem}} {
				b.ReportMetric(medianF(m.v), m.unit)
			}
		})
	}
}

var ddRe = regexp.MustCompile(`copied, ([0-9.]+) s`)

// BenchmarkWorkdirIO writes and reads 256 MiB in the work directory with dd inside the
// guest. As root the share is virtiofs; with SUDO_UID set to nobody QEMU runs as that
// user and the share is 9p. The guest drops its page cache between write and read.
func BenchmarkWorkdirIO(b *testing.B) {
	const mib = 256
	script := fmt.Sprintf("dd if=/dev/zero of=bench.dat bs=1M count=%d conv=fsync 2>&1 && "+
		"echo 3 >/proc/sys/vm/drop_caches && dd if=bench.dat of=/dev/null bs=1M 2>&1; rm -f bench.dat", mib)
	for _, tc := range []struct {
		name string
		env  []string
	}{
		{"virtiofs", nil},
		{"9p", []string{"SUDO_UID=65534", "SUDO_GID=65534"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := newCLIBench(b)
			var w, r []float64
			for b.Loop() {
				cmd := c.cmd([]string{"--root"}, "sh", "-c", script)
				cmd.Env = append(cmd.Env, tc.env...)
				out, err := cmd.CombinedOutput()
				if err != nil {
					b.Fatalf("dd in guest: %v: %s", err, out)
				}
				m := ddRe.FindAllStringSubmatch(string(out), -1)
				if len(m) != 2 {
					b.Fatalf("dd output: %s", out)
				}
				ws, _ := strconv.ParseFloat(m[0][1], 64)
				rs, _ := strconv.ParseFloat(m[1][1], 64)
				w, r = append(w, mib/ws), append(r, mib/rs)
				b.Logf("write %.1f MiB/s, read %.1f MiB/s", mib/ws, mib/rs)
			}
			b.ReportMetric(medianF(w), "write-MiB/s")
			b.ReportMetric(medianF(r), "read-MiB/s")
		})
	}
}

func report(b *testing.B, name string, d []time.Duration) {
	b.ReportMetric(float64(slices.Min(d))/1e6, name+"-min-ms")
	b.ReportMetric(float64(median(d))/1e6, name+"-median-ms")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func medianF(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }

// descendants lists every process below pid.
func descendants(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name may hold spaces; ppid is the 2nd field after the last ')'.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 {
			parent[p], _ = strconv.Atoi(f[1])
		}
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

func procArgv(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// procStatus returns the kB fields of /proc/PID/status in MiB.
func procStatus(pid int) map[string]float64 {
	out := map[string]float64{}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		f := strings.Fields(v)
		if ok && len(f) == 2 && f[1] == "kB" {
			n, _ := strconv.ParseFloat(f[0], 64)
			out[k] = n / 1024
		}
	}
	return out
}

var phaseRe = regexp.MustCompile(`msg="([^"]+)".*uptime=([0-9.]+)`)

// BenchmarkGuestPhases boots `true` in-process and reads guest-init's log lines, each
// stamped with the guest's uptime, from the console log while the run lasts: where the
// time between guest-init's start and the command goes.
// The static busybox next to the dynamic true shows what loading ld.so and libc costs.
func BenchmarkGuestPhases(b *testing.B) {
	b.Run("true", func(b *testing.B) { guestPhases(b, "true") })
	if _, err := os.Stat("/bin/busybox"); err == nil {
		b.Run("busybox-true", func(b *testing.B) { guestPhases(b, "/bin/busybox", "true") })
	}
}

func guestPhases(b *testing.B, argv ...string) {
	s := jailtest.Spec(b, argv...)
	// Not under b.TempDir, whose parent is 0700: QEMU runs as nobody.
	base, err := os.MkdirTemp("", "crackbox-bench-runs-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		b.Fatal(err)
	}
	s.RunDirBase = base
	phases := map[string][]float64{}
	var order []string
	for b.Loop() {
		stop := make(chan struct{})
		got := make(chan string, 1)
		go func() {
			last := ""
			defer func() { got <- last }()
			for {
				if m, _ := filepath.Glob(filepath.Join(s.RunDirBase, "*", "console.log")); len(m) > 0 {
					if c, err := os.ReadFile(m[0]); err == nil && len(c) > len(last) {
						last = string(c)
					}
				}
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
			}
		}()
		start := time.Now()
		res, err := jailtest.Run(b, s)
		wall := time.Since(start)
		close(stop)
		con := <-got
		if err != nil || res.Exit != 0 {
			b.Fatalf("exit %d err %v", res.Exit, err)
		}
		var line []string
		for _, m := range phaseRe.FindAllStringSubmatch(con, -1) {
			f, _ := strconv.ParseFloat(m[2], 64)
			if _, ok := phases[m[1]]; !ok {
				order = append(order, m[1])
			}
			phases[m[1]] = append(phases[m[1]], f*1000)
			line = append(line, fmt.Sprintf("%s %.2f", m[1], f))
		}
		b.Logf("wall %s, command started after %s; guest uptime: %s", ms(wall), ms(res.Boot), strings.Join(line, ", "))
	}
	for i, p := range order {
		b.ReportMetric(medianF(phases[p]), fmt.Sprintf("%d-%s-ms", i, strings.ReplaceAll(p, " ", "-")))
	}
}

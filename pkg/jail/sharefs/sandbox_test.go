package sharefs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/testreq"
	"github.com/hugelgupf/p9/p9"
	"golang.org/x/sys/unix"
)

// probeFile in a share makes the test binary's share server act as a compromised one
// once it is confined: it tries what an attacker would and reports on stderr.
const probeFile = ".sandbox-probe"

// probeTarget is what the test tells the probe through probeFile.
type probeTarget struct {
	Addr    string // a loopback listener of the test
	HostPID int    // the test's own pid
}

// probeResult is what the probe saw; an empty error means the call worked.
type probeResult struct {
	PID, PPID                            int
	InetSocket, UnixSocket, Dial         string
	Fork, Fsopen, Unshare, Exec, Chroot  string
	KillHost, ReadProc, ExecMap, Setxatt string
}

var _ = func() bool { afterConfine = sandboxProbe; return true }()

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func sandboxProbe() {
	fd, err := unix.Openat(dirFD, probeFile, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	buf := make([]byte, 512)
	n, _ := unix.Read(fd, buf)
	unix.Close(fd)
	var in probeTarget
	if json.Unmarshal(buf[:max(n, 0)], &in) != nil {
		return
	}
	r := probeResult{PID: os.Getpid(), PPID: os.Getppid()}
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err == nil {
		unix.Close(s)
	}
	r.InetSocket = errText(err)
	s, err = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err == nil {
		unix.Close(s)
	}
	r.UnixSocket = errText(err)
	c, err := net.DialTimeout("tcp", in.Addr, 2*time.Second)
	if err == nil {
		c.Close()
	}
	r.Dial = errText(err)
	// A new process (no CLONE_THREAD); the child, should there be one, leaves at once.
	pid, _, e := unix.RawSyscall(unix.SYS_CLONE, uintptr(unix.SIGCHLD), 0, 0)
	if e == 0 && pid == 0 {
		unix.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
	}
	if e != 0 {
		r.Fork = e.Error()
	}
	if fd, err := unix.Fsopen("tmpfs", 0); err == nil {
		unix.Close(fd)
	} else {
		r.Fsopen = err.Error()
	}
	r.Unshare = errText(unix.Unshare(unix.CLONE_NEWUSER))
	// Paths that do not exist: unfiltered, each call would fail with ENOENT instead.
	r.Exec = errText(unix.Exec("/no-such-program", []string{"x"}, nil))
	r.Chroot = errText(unix.Chroot("/no-such-dir"))
	r.Setxatt = errText(unix.Setxattr("/no-such-file", "user.x", []byte("1"), 0))
	r.KillHost = errText(unix.Kill(in.HostPID, 0))
	_, err = os.ReadFile("/proc/1/status")
	r.ReadProc = errText(err)
	_, err = unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	r.ExecMap = errText(err)
	b, _ := json.Marshal(r)
	os.Stderr.Write(append(append([]byte("sandbox-probe "), b...), '\n'))
}

// lockedBuffer is a bytes.Buffer the helper's stderr copier and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// sandboxCase is one way the run starts a share server.
type sandboxCase struct {
	name string
	cfg  Config
	uid  int // the uid the server must run as
}

// TestSandbox starts share servers as runs do (a caller's workdir, a root-owned
// workdir, the host view's /etc under the run's own uid) and has each act as a
// compromised server: it can make no socket, reach no loopback listener of the host,
// start no process, signal or see no host process, and it sits in network and PID
// namespaces of its own.
func TestSandbox(t *testing.T) {
	testreq.Root(t, "starts share servers as a root crackbox does")
	user, _ := shareOwner(t)
	rootOwned := t.TempDir()
	etc := t.TempDir()
	if err := os.Chmod(filepath.Dir(etc), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(etc, 0o755)
	os.WriteFile(filepath.Join(etc, "shadow"), []byte("x"), 0o600)
	// A uid of the block pkg/jail claims each run's own from (VMMUIDBase).
	const runUID = 0x7000fff0
	for _, c := range []sandboxCase{
		{"workdir", Config{Dir: user, Quota: 1 << 20}, 1000},
		{"root-owned", Config{Dir: rootOwned}, 0},
		{"host-etc", Config{Dir: etc, ReadOnly: true, Hide: []string{"shadow"}, As: &Ident{UID: runUID, GID: runUID}}, runUID},
	} {
		t.Run(c.name, func(t *testing.T) { checkSandbox(t, c) })
	}
}

// TestSandboxUnprivileged is TestSandbox for a crackbox that is not root: the server
// gets a user namespace of its own and, inside it, the same confinement.
func TestSandboxUnprivileged(t *testing.T) {
	if testreq.AsNobody(t) {
		return
	}
	checkSandbox(t, sandboxCase{"unprivileged", Config{Dir: t.TempDir(), Quota: 1 << 20}, os.Getuid()})
}

func checkSandbox(t *testing.T, c sandboxCase) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if conn, err := ln.Accept(); err == nil {
			conn.Close()
			accepted <- struct{}{}
		}
	}()
	target, _ := json.Marshal(probeTarget{Addr: ln.Addr().String(), HostPID: os.Getpid()})
	if err := os.WriteFile(filepath.Join(c.cfg.Dir, probeFile), target, 0o644); err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	c.cfg.Log = &out
	s, err := Start(c.cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	pid := s.cmd.Process.Pid
	host, guest := net.Pipe()
	done := make(chan struct{})
	go func() { s.Serve(host); close(done) }()
	client, err := p9.NewClient(guest, p9.WithMessageSize(64<<10))
	if err != nil {
		<-done
		t.Fatalf("%v; server said:\n%s", err, out.String())
	}
	root, err := client.Attach("")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := root.Walk(nil); err != nil {
		t.Errorf("the confined server does not serve: %v", err)
	}

	// The kernel's view of the live server: its own namespaces and the intended uid.
	for _, ns := range []string{"net", "pid", "ipc", "uts"} {
		mine, _ := os.Readlink("/proc/self/ns/" + ns)
		its, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/" + ns)
		if err != nil || its == mine {
			t.Errorf("share server %s namespace is %q (%v), the host's is %q", ns, its, err, mine)
		}
	}
	if uid := statusUID(pid); uid != c.uid {
		t.Errorf("share server runs as uid %d, want %d", uid, c.uid)
	}
	if os.Geteuid() == 0 && c.uid != 0 {
		// Not dumpable: another process of its uid (for the host view, the run's
		// QEMU) can neither trace it nor reach its root through /proc.
		peek := exec.Command("/bin/readlink", "/proc/"+strconv.Itoa(pid)+"/root")
		peek.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(c.uid), Gid: uint32(c.uid), NoSetGroups: true}}
		if b, err := peek.CombinedOutput(); err == nil {
			t.Errorf("a process of uid %d reads the share server's root: %s", c.uid, b)
		}
	}
	if os.Geteuid() == 0 {
		// Were the filter to let a socket through, the server's network still has
		// no route to the host's loopback.
		if err := dialFromNetNS(t, pid, ln.Addr().String()); err == nil {
			t.Error("connected to the host's loopback listener from the share server's network namespace")
		}
	}
	client.Close()
	guest.Close()
	<-done

	r, ok := probeOutput(out.String())
	if !ok {
		t.Fatalf("no probe report from the share server:\n%s", out.String())
	}
	eperm := unix.EPERM.Error()
	for _, f := range []struct{ what, got, want string }{
		{"socket(AF_INET)", r.InetSocket, eperm},
		{"socket(AF_UNIX)", r.UnixSocket, eperm},
		{"dial the host's loopback", r.Dial, eperm},
		{"clone a process", r.Fork, eperm},
		{"fsopen", r.Fsopen, eperm},
		{"unshare", r.Unshare, eperm},
		{"execve", r.Exec, eperm},
		{"chroot", r.Chroot, eperm},
		{"setxattr", r.Setxatt, eperm},
		{"kill a host process", r.KillHost, eperm},
		{"read /proc", r.ReadProc, unix.ENOENT.Error()},
		{"map executable memory", r.ExecMap, eperm},
	} {
		if !strings.Contains(f.got, f.want) {
			t.Errorf("compromised share server: %s gave %q, want %q", f.what, f.got, f.want)
		}
	}
	if r.PID != 1 || r.PPID != 0 {
		t.Errorf("share server sees itself as pid %d with parent %d, want pid 1 of its own namespace with no parent in it", r.PID, r.PPID)
	}
	select {
	case <-accepted:
		t.Error("the host's loopback listener accepted a connection from the share server")
	case <-time.After(100 * time.Millisecond):
	}
}

func probeOutput(out string) (probeResult, bool) {
	var r probeResult
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "sandbox-probe "); ok {
			return r, json.Unmarshal([]byte(rest), &r) == nil
		}
	}
	return r, false
}

func statusUID(pid int) int {
	for _, l := range strings.Split(string(procStatus(pid)), "\n") {
		if rest, ok := strings.CutPrefix(l, "Uid:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				n, _ := strconv.Atoi(f[0])
				return n
			}
		}
	}
	return -1
}

// dialFromNetNS connects to addr from a thread moved into pid's network namespace and
// returns the connect error; setup failures fail t. The thread is never returned to
// the runtime.
func dialFromNetNS(t *testing.T, pid int, addr string) error {
	sa, err := netipAddr(addr)
	if err != nil {
		t.Fatal(err)
	}
	type result struct{ setup, connect error }
	res := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/net")
		if err != nil {
			res <- result{setup: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			res <- result{setup: err}
			return
		}
		// A raw socket on this thread: the runtime would dial from any thread.
		s, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			res <- result{setup: err}
			return
		}
		defer unix.Close(s)
		res <- result{connect: unix.Connect(s, sa)}
	}()
	r := <-res
	if r.setup != nil {
		t.Fatalf("enter the share server's network namespace: %v", r.setup)
	}
	return r.connect
}

func netipAddr(addr string) (*unix.SockaddrInet4, error) {
	ta, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, err
	}
	sa := &unix.SockaddrInet4{Port: ta.Port}
	copy(sa.Addr[:], ta.IP.To4())
	return sa, nil
}

package proc

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
)

// gone says whether pid has exited (reaped, or a zombie waiting for init).
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	return strings.HasPrefix(strings.TrimSpace(s[strings.LastIndexByte(s, ')')+1:]), "Z")
}

func TestStopEndsTheGroupAfterGrace(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string
		grace  time.Duration
		killed bool
	}{
		// The leader ignores SIGTERM and waits on a grandchild: only the group kill ends both.
		// Each script holds on reading stdin so the test checks a live child.
		{"stubborn", `trap "" TERM; sleep 60 & echo $!; read x; wait`, 200 * time.Millisecond, true},
		{"exits in grace", `sleep 60 & echo $!; read x; kill $!; wait`, 30 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("sh", "-c", tc.script)
			Tie(cmd, syscall.SIGKILL)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			exited, err := Spawn(cmd)
			if err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			grandchild, _ := strconv.Atoi(strings.TrimSpace(line))
			if pg, _ := syscall.Getpgid(cmd.Process.Pid); pg != cmd.Process.Pid {
				t.Fatalf("child's process group is %d, want its own (%d)", pg, cmd.Process.Pid)
			}
			in.Close()
			if got := Stop(cmd, exited, tc.grace); got != tc.killed {
				t.Fatalf("Stop killed = %v, want %v", got, tc.killed)
			}
			eventually.True(t, 10*time.Second, "the grandchild in the group to end", func() bool { return gone(grandchild) })
		})
	}
}

func TestTieKeepsOtherAttributes(t *testing.T) {
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUTS}
	Tie(cmd, syscall.SIGTERM)
	a := cmd.SysProcAttr
	if a.Pdeathsig != syscall.SIGTERM || !a.Setpgid || a.Cloneflags != syscall.CLONE_NEWUTS {
		t.Fatalf("SysProcAttr after Tie = %+v", a)
	}
}

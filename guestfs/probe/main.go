// Command probe calls every x86_64 syscall of syscalls.txt with harmless arguments and
// prints which ones the running kernel lacks (ENOSYS). It runs inside a guest to check
// that the guest kernel's config leaves out nothing ordinary programs call
// (probe_test.go boots it). Build it static, like guest-init:
//
//	CGO_ENABLED=0 go build -o probe ./guestfs/probe
//
// Output, one line per call: "<nr> <name> <result>" where result is "ok" or the errno's
// name, then "ENOSYS <name>..." summing up the missing ones.
package main

import (
	"bufio"
	_ "embed"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

//go:embed syscalls.txt
var table string

// all is an argument that is invalid for nearly every syscall (a bad fd, pointer, flag
// set or length), so the call fails in its argument checks and changes nothing. A
// compiled-out syscall answers ENOSYS before it looks at any argument.
const all = ^uintptr(0)

// skipped cannot be compiled out of Linux (no COND_SYSCALL) and no argument makes them
// harmless: they would end, fork, stop or hang up the probe.
var skipped = map[string]string{
	"rt_sigreturn": "restores a signal frame that is not there",
	"fork":         "creates a process",
	"vfork":        "creates a process",
	"clone":        "creates a process",
	"clone3":       "creates a process",
	"exit":         "ends the thread",
	"exit_group":   "ends the probe",
	"pause":        "waits for a signal forever",
	"vhangup":      "hangs up the terminal",
}

// args overrides the all-invalid default where it is not harmless or not decisive.
var args = map[string][6]uintptr{
	// alarm(-1) would arm a timer; umask(-1) would set 0777 for the rest of the probe.
	"alarm": {0},
	"umask": {0o022},
	// An unknown modify_ldt function or futex op answers ENOSYS from a present syscall.
	"modify_ldt": {0, 0, 0},
	"futex":      {0, futexWake, 0},
	// With IPC_CREAT among the flags these would make a SysV object; without it, ENOENT.
	"msgget": {all, 0},
	"semget": {all, 0, 0},
	"shmget": {all, 0, 0},
}

// extra are second calls of present syscalls whose sub-operation has its own option.
var extra = []struct {
	name string
	nr   uintptr
	args [6]uintptr
}{
	{"futex_unlock_pi", unix.SYS_FUTEX, [6]uintptr{0, futexUnlockPI}}, // FUTEX_PI
	{"unassigned_335", 335, [6]uintptr{}},                             // no syscall: must be ENOSYS
}

// futex operations (linux/futex.h).
const (
	futexWake     = 1
	futexUnlockPI = 7
)

type call struct {
	name string
	nr   uintptr
	args [6]uintptr
}

func calls() ([]call, error) {
	var out []call
	sc := bufio.NewScanner(strings.NewReader(table))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		nr, err := strconv.Atoi(f[0])
		if len(f) != 2 || err != nil {
			return nil, fmt.Errorf("syscalls.txt: bad line %q", line)
		}
		if _, ok := skipped[f[1]]; ok {
			continue
		}
		a, ok := args[f[1]]
		if !ok {
			a = [6]uintptr{all, all, all, all, all, all}
		}
		out = append(out, call{f[1], uintptr(nr), a})
	}
	for _, e := range extra {
		out = append(out, call(e))
	}
	return out, nil
}

func main() {
	cs, err := calls()
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(2)
	}
	done := make(chan []string)
	go func() {
		// Some calls change the calling thread (set_tid_address, sigaltstack): keep them
		// on one thread that is thrown away with this goroutine.
		runtime.LockOSThread()
		var missing []string
		w := bufio.NewWriter(os.Stdout)
		for _, c := range cs {
			// stderr, unbuffered: a call that hangs is the last name there.
			fmt.Fprintln(os.Stderr, "probe: calling", c.name)
			_, _, e := unix.Syscall6(c.nr, c.args[0], c.args[1], c.args[2], c.args[3], c.args[4], c.args[5])
			res := "ok"
			if e != 0 {
				res = unix.ErrnoName(e)
				if res == "" {
					res = "errno" + strconv.Itoa(int(e))
				}
			}
			if e == unix.ENOSYS {
				missing = append(missing, c.name)
			}
			fmt.Fprintf(w, "%d %s %s\n", c.nr, c.name, res)
		}
		w.Flush()
		done <- missing
	}()
	missing := <-done
	fmt.Printf("ENOSYS %s\n", strings.Join(missing, " "))
}

package sharefs

import (
	"fmt"
	"runtime"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// The share server's seccomp filter repeats the policy in the kernel: even a bug in the
// 9p code cannot set a setuid/setgid bit, change an owner, make a node, write an
// extended attribute, exec, or leave the chroot. Everything else is allowed: the
// process has no capabilities and sees only the share.

var deniedCalls = []string{
	"fchown", "fchownat",
	"mknodat",
	"setxattr", "lsetxattr", "fsetxattr", "setxattrat",
	"removexattr", "lremovexattr", "fremovexattr", "removexattrat",
	"execve", "execveat",
	"mount", "umount2", "chroot", "pivot_root", "unshare", "setns",
	"ptrace", "bpf", "keyctl", "add_key", "request_key",
	"name_to_handle_at", "open_by_handle_at",
	// io_uring operations are not seen by seccomp at all.
	"io_uring_setup", "io_uring_enter", "io_uring_register",
}

// legacyDenied exist only on older ABIs such as amd64.
var legacyDenied = []string{"chown", "lchown", "mknod"}

// modeArg is which argument of each mode-taking syscall holds the mode.
var modeArg = map[string]uint32{
	"fchmod": 1, "fchmodat": 2, "fchmodat2": 2,
	"openat": 3, "mkdirat": 2,
}

var legacyModeArg = map[string]uint32{"chmod": 1, "open": 2, "creat": 1, "mkdir": 1}

func legacyABI() bool { return runtime.GOARCH == "amd64" || runtime.GOARCH == "386" }

func policy() seccomp.Policy {
	names := append([]string(nil), deniedCalls...)
	args := map[string]uint32{}
	for k, v := range modeArg {
		args[k] = v
	}
	if legacyABI() {
		names = append(names, legacyDenied...)
		for k, v := range legacyModeArg {
			args[k] = v
		}
	}
	var cond []seccomp.NameWithConditions
	for name, arg := range args {
		for _, bit := range []uint64{unix.S_ISUID, unix.S_ISGID} {
			cond = append(cond, seccomp.NameWithConditions{Name: name, Conditions: seccomp.ArgumentConditions{
				{Argument: arg, Operation: seccomp.BitsSet, Value: bit},
			}})
		}
	}
	eperm := seccomp.ActionErrno | seccomp.Action(unix.EPERM)
	return seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Names: names, Action: eperm},
			{NamesWithCondtions: cond, Action: eperm},
			// openat2's mode sits in a struct the filter cannot read: refuse it so
			// every open goes through openat, whose mode it can.
			{Names: []string{"openat2"}, Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS)},
		},
	}
}

// loadFilter installs the filter on every thread, with no_new_privs.
func loadFilter() error {
	err := seccomp.LoadFilter(seccomp.Filter{NoNewPrivs: true, Flag: seccomp.FilterFlagTSync, Policy: policy()})
	if err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}

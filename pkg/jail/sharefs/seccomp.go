package sharefs

import (
	"fmt"
	"os"
	"runtime"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// The share server's seccomp filter allows only what the Go runtime and the 9p server
// use, some calls only with the arguments they use; every other call fails with EPERM
// (not a kill: the 9p server then answers the guest with an error). So even a bug in
// the 9p code cannot set a setuid/setgid bit, change an owner, make a node, write an
// extended attribute, exec, start a process, mount (old or new API), make a socket,
// signal another process, map executable memory or leave the chroot. Refused calls are
// not logged: the guest drives the server and could fill any log with them.

// hotCalls and otherCalls are allowed whatever their arguments. The filter checks
// them in order, so the calls of every request come first, then the calls with argument
// checks (policy), then the rest.
var hotCalls = []string{
	"futex", "read", "write", "writev", "epoll_pwait", "nanosleep", "close", "fstat",
	"pread64", "pwrite64", "getdents64", "lseek", "dup", "recvmsg", "sendmsg", "readv",
}

var otherCalls = []string{
	"recvfrom", "sendto", "epoll_pwait2", "epoll_ctl", "clock_nanosleep", "dup3", "sched_yield",
	// File operations on fds below the share's root (fs.go, node.go, mutate.go).
	"statx", "fstatfs", "preadv", "pwritev", "ftruncate", "fsync", "fdatasync",
	"unlinkat", "renameat", "linkat", "symlinkat", "readlinkat", "utimensat",
	// Memory, signals, threads and time for the Go runtime (and the C runtime of a cgo
	// or race test binary).
	"munmap", "madvise", "brk", "mremap",
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "restart_syscall",
	"getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid",
	"sched_getaffinity", "set_robust_list", "rseq", "getrandom", "uname",
	"clock_gettime", "clock_getres", "gettimeofday",
	"epoll_create1", "eventfd2", "pipe2", "getsockopt", "getsockname", "getpeername", "shutdown",
	"exit", "exit_group",
}

// archCalls are the calls whose names or presence differ between ABIs; they are
// checked first, as the stat of every walk is among them.
var archCalls = map[string][]string{
	"amd64": {"newfstatat", "epoll_wait", "getrlimit"},
	"arm64": {"fstatat"},
}

// modeArg is which argument of each mode-taking syscall holds the mode; these are
// allowed only without the setuid and setgid bits.
var modeArg = map[string]uint32{
	"fchmod": 1, "fchmodat": 2, "fchmodat2": 2,
	"openat": 3, "mkdirat": 2,
}

// clone is allowed only with CLONE_THREAD (which the kernel accepts only with
// CLONE_SIGHAND and CLONE_VM: a thread, never a process) and without any flag that
// makes a namespace.
const nsFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// fcntlCmds are the fcntl commands the runtime uses: descriptor and status flags and
// duplication; no locks, leases, signal owners or pipe sizes.
var fcntlCmds = []uint64{unix.F_DUPFD, unix.F_GETFD, unix.F_SETFD, unix.F_GETFL, unix.F_SETFL, unix.F_DUPFD_CLOEXEC}

// archSetFS is arch_prctl's ARCH_SET_FS (asm/prctl.h).
const archSetFS = 0x1002

func eq(arg uint32, v uint64) seccomp.Condition {
	return seccomp.Condition{Argument: arg, Operation: seccomp.Equal, Value: v}
}

func allowIf(name string, c ...seccomp.Condition) seccomp.NameWithConditions {
	return seccomp.NameWithConditions{Name: name, Conditions: c}
}

// policy is the filter for a server whose pid (in its own namespace) is pid.
func policy(pid int) seccomp.Policy {
	hot := append(append([]string(nil), archCalls[runtime.GOARCH]...), hotCalls...)
	noExec := seccomp.Condition{Argument: 2, Operation: seccomp.BitsNotSet, Value: unix.PROT_EXEC}
	var cond []seccomp.NameWithConditions
	// openat and fcntl come with most requests.
	for _, name := range []string{"openat", "mkdirat", "fchmod", "fchmodat", "fchmodat2"} {
		cond = append(cond, allowIf(name, seccomp.Condition{Argument: modeArg[name], Operation: seccomp.BitsNotSet, Value: unix.S_ISUID | unix.S_ISGID}))
	}
	for _, c := range fcntlCmds {
		cond = append(cond, allowIf("fcntl", eq(1, c)))
	}
	cond = append(cond,
		// No new code: the runtime maps data only.
		allowIf("mmap", noExec),
		allowIf("mprotect", noExec),
		allowIf("clone",
			seccomp.Condition{Argument: 0, Operation: seccomp.BitsSet, Value: unix.CLONE_THREAD},
			seccomp.Condition{Argument: 0, Operation: seccomp.BitsNotSet, Value: nsFlags}),
		// Signals only to itself: the runtime preempts its threads with tgkill and
		// raises a fatal signal with kill.
		allowIf("tgkill", eq(0, uint64(pid))),
		allowIf("kill", eq(0, uint64(pid))),
		// Reading limits only.
		allowIf("prlimit64", eq(2, 0)),
		allowIf("renameat2", eq(4, 0)),
	)
	if runtime.GOARCH == "amd64" {
		// Each new thread of the Go runtime sets its TLS base.
		cond = append(cond, allowIf("arch_prctl", eq(0, archSetFS)))
	}
	return seccomp.Policy{
		DefaultAction: seccomp.ActionErrno, // EPERM
		Syscalls: []seccomp.SyscallGroup{
			{Names: hot, Action: seccomp.ActionAllow},
			{NamesWithCondtions: cond, Action: seccomp.ActionAllow},
			{Names: otherCalls, Action: seccomp.ActionAllow},
			// Their arguments sit in structs the filter cannot read; ENOSYS makes a
			// caller fall back to clone and openat, whose arguments it can.
			{Names: []string{"clone3", "openat2"}, Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS)},
		},
	}
}

// loadFilter installs the filter on every thread, with no_new_privs.
func loadFilter() error {
	err := seccomp.LoadFilter(seccomp.Filter{NoNewPrivs: true, Flag: seccomp.FilterFlagTSync, Policy: policy(os.Getpid())})
	if err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}

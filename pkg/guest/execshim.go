package guest

import (
	"encoding/binary"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// The command is exec'd by a short-lived copy of guest-init, never by guest-init itself.
// Go starts children with vfork, which keeps guest-init's only scheduler slot (one vCPU)
// until the child's execve returns; an execve that reads a file from a share served over
// the control session (pkg/sharefs) then waits for guest-init to relay the share's
// traffic, which it cannot do. The shim's own image comes from the initramfs, so that
// window needs no share, and the shim's execve blocks only the shim.
const execShimArg = "crackbox-exec-shim"

// shimErrFD is where the shim reports a failed execve: four bytes of errno. It is
// close-on-exec, so a successful execve shows up in guest-init as end of file.
const shimErrFD = 3

func init() {
	if len(os.Args) >= 4 && os.Args[1] == execShimArg {
		runExecShim(os.Args[2], os.Args[3:])
	}
}

func runExecShim(path string, argv []string) {
	unix.CloseOnExec(shimErrFD)
	err := syscall.Exec(path, argv, os.Environ())
	errno := syscall.EINVAL
	if e, ok := err.(syscall.Errno); ok {
		errno = e
	}
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(errno))
	_, _ = unix.Write(shimErrFD, b[:])
	os.Exit(127)
}

// startShim starts path with argv through the shim and waits until its execve has
// either replaced the shim (nil) or failed (the errno, as os.StartProcess reports it).
func startShim(path string, argv []string, attr *os.ProcAttr) (*os.Process, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("guest: pipe: %w", err)
	}
	defer r.Close()
	a := *attr
	a.Files = append(append([]*os.File{}, attr.Files...), w)
	if len(a.Files) != shimErrFD+1 {
		w.Close()
		return nil, fmt.Errorf("guest: exec shim needs exactly three stdio files, got %d", len(attr.Files))
	}
	proc, err := os.StartProcess("/proc/self/exe", append([]string{argv[0], execShimArg, path}, argv...), &a)
	w.Close()
	if err != nil {
		return nil, err
	}
	var b [4]byte
	n, _ := r.Read(b[:])
	if n == len(b) {
		return proc, &os.PathError{Op: "fork/exec", Path: path, Err: syscall.Errno(binary.LittleEndian.Uint32(b[:]))}
	}
	return proc, nil
}

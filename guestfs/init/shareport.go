package main

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// shareMsize is the largest 9p message of a stream share, the most 9p's fd transport
// takes: fewer round trips for large reads and writes.
const shareMsize = 1 << 20

// relayBuf is one read's worth of a share relay: a whole message.
const relayBuf = shareMsize

// shareCache is the 9p cache mode of a stream share. A read-only share does not change
// under the run, so the guest keeps what it read (as for the device lowers). A
// read-writable one is written through to the host as it is written, so the disk quota
// refuses a write to the writer, and a shared writable mmap works (cache=mmap).
func shareCache(readOnly bool) string {
	if readOnly {
		return "cache=loose"
	}
	return "cache=mmap"
}

// openSharePort opens the virtio-serial port a stream share has to itself once the
// host's end is connected (the kernel's 9p client takes a port without a host for a
// closed one), blocking, so a relay direction is one thread asleep in read rather than
// goroutines woken through the poller.
func openSharePort(name string) (int, error) {
	dev, err := findPort(name)
	if err != nil {
		return -1, err
	}
	fd, err := unix.Open(dev, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", dev, err)
	}
	deadline := time.Now().Add(portDeadline)
	for {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		_, err := unix.Poll(pfd, 0)
		if err == nil && pfd[0].Revents&unix.POLLHUP == 0 {
			return fd, nil
		}
		if time.Now().After(deadline) {
			unix.Close(fd)
			return -1, fmt.Errorf("%s: the host never connected", dev)
		}
		time.Sleep(portRetry)
	}
}

// relayPort copies between the mount's socket and the share's port until either ends,
// then closes both. A port reads 0 bytes while the host end is not connected, which is
// no end of stream until the host has answered once.
func relayPort(sock, port int) {
	done := make(chan struct{}, 2)
	var answered bool
	go func() {
		copyFD(port, sock, nil)
		done <- struct{}{}
	}()
	go func() {
		copyFD(sock, port, &answered)
		done <- struct{}{}
	}()
	<-done
	// The mount ends its side with EOF on the socket once the port has closed; a
	// direction still reading the port ends when the host's end closes with the run.
	unix.Shutdown(sock, unix.SHUT_RDWR)
	<-done
	unix.Close(port)
	unix.Close(sock)
}

// copyFD copies src to dst until EOF or an error. With connected set, src is a port
// whose zero reads before the first byte mean "not connected yet".
func copyFD(dst, src int, connected *bool) {
	runtime.LockOSThread()
	buf := make([]byte, relayBuf)
	for {
		n, err := unix.Read(src, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		if n == 0 {
			if connected != nil && !*connected {
				time.Sleep(portRetry)
				continue
			}
			return
		}
		if connected != nil {
			*connected = true
		}
		for b := buf[:n]; len(b) > 0; {
			w, err := unix.Write(dst, b)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				return
			}
			b = b[w:]
		}
	}
}

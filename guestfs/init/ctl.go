package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mdlayher/vsock"
)

// Polling intervals for the two waits on the boot path that have no event to wait on.
const (
	portRetry    = 5 * time.Millisecond
	portDeadline = 30 * time.Second
)

// ctlMode is the value of crackbox.ctl= on the kernel command line: "virtio-serial" (the
// default), "vsock:<port>", or "none" (power off at once: the boot-time floor for
// benchmarks).
func ctlMode(cmdline string) string {
	mode := "virtio-serial"
	for _, f := range strings.Fields(cmdline) {
		if v, ok := strings.CutPrefix(f, "crackbox.ctl="); ok {
			mode = v
		}
	}
	return mode
}

// openControl connects to the host over the channel named by mode.
func openControl(mode string, log *slog.Logger) (io.ReadWriteCloser, error) {
	if p, ok := strings.CutPrefix(mode, "vsock:"); ok {
		port, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("crackbox.ctl=%s: bad vsock port", mode)
		}
		return vsock.Dial(vsock.Host, uint32(port), nil)
	}
	if mode != "virtio-serial" {
		return nil, fmt.Errorf("crackbox.ctl=%s: want virtio-serial or vsock:<port>", mode)
	}
	dev, err := findPort("ctl")
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dev, err)
	}
	log.Debug("control port", "dev", dev)
	return &port{f: f}, nil
}

// findPort returns the /dev node of the virtio-serial port with the given name. The
// name arrives from QEMU after the port itself, so it may briefly be missing.
func findPort(name string) (string, error) {
	deadline := time.Now().Add(portDeadline)
	for {
		names, _ := filepath.Glob("/sys/class/virtio-ports/vport*/name")
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err == nil && strings.TrimSpace(string(b)) == name {
				return "/dev/" + filepath.Base(filepath.Dir(n)), nil
			}
		}
		if time.Now().After(deadline) {
			devs, _ := filepath.Glob("/sys/bus/virtio/devices/*/device")
			var ids []string
			for _, d := range devs {
				b, _ := os.ReadFile(d)
				ids = append(ids, strings.TrimSpace(string(b)))
			}
			return "", fmt.Errorf("no virtio-serial port named %q (ports %v, virtio device ids %v)", name, names, ids)
		}
		time.Sleep(portRetry)
	}
}

// port is a virtio-serial port as a stream. A read returns 0 while the host end is not
// connected yet, which is not end of stream until the host has sent something; and every
// write is completed, since callers (yamux) treat a short write as a failure.
type port struct {
	f         *os.File
	connected bool
}

func (p *port) Read(b []byte) (int, error) {
	for {
		n, err := p.f.Read(b)
		if n > 0 {
			p.connected = true
			return n, err
		}
		if err != nil && (!errors.Is(err, io.EOF) || p.connected) {
			return n, err
		}
		time.Sleep(portRetry)
	}
}

func (p *port) Write(b []byte) (int, error) {
	total := 0
	for total < len(b) {
		n, err := p.f.Write(b[total:])
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func (p *port) Close() error { return p.f.Close() }

package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/crackbox/crackbox/pkg/control"
	"github.com/crackbox/crackbox/pkg/initramfs"
)

func main() {
	kernel := flag.String("kernel", "", "vmlinux")
	initBin := flag.String("init", "/work/main/bin/guest-init", "guest-init")
	mode := flag.String("mode", "hostview", "")
	rootdir := flag.String("rootdir", "", "rootfs dir")
	tty := flag.Bool("tty", false, "")
	extra := flag.String("append", "", "")
	uid := flag.Int("uid", 0, "")
	tap := flag.Bool("tap", false, "")
	ponly := flag.Bool("proxyonly", false, "")
	floor := flag.Bool("floor", false, "")
	vfs := flag.Bool("virtiofs", false, "")
	home := flag.String("home", "/root", "")
	flag.Parse()
	argv := flag.Args()
	dir, _ := os.MkdirTemp("", "cb-boot-")
	defer os.RemoveAll(dir)
	ird, err := initramfs.Ensure(*initBin, "/tmp/cb-cache")
	if err != nil {
		panic(err)
	}
	sock := filepath.Join(dir, "ctl.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		panic(err)
	}
	rs := control.RunSpec{Argv: argv, Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME=" + *home, "TERM=xterm"}, UID: *uid, GID: *uid,
		Dir: "/", TTY: *tty, Rows: 30, Cols: 100, Net: control.Net{Mode: "none"}, Hostname: "cbtest"}
	args := []string{"-accel", "tcg,tb-size=32", "-M", "microvm,pit=on,pic=on,rtc=on,acpi=off", "-global", "virtio-mmio.force-legacy=false",
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot", "-m", "512", "-smp", "1",
		"-kernel", *kernel, "-initrd", ird, "-serial", "stdio",
		"-append", "console=ttyS0 quiet reboot=t panic=-1 tsc_early_khz=2300000 tsc=reliable 8250.nr_uarts=1 crackbox.ctl=virtio-serial " + *extra,
		"-chardev", "socket,id=ctl,path=" + sock,
		"-device", "virtio-serial-device,id=vser", "-device", "virtserialport,bus=vser.0,chardev=ctl,name=ctl"}
	share := func(id, path string) {
		args = append(args, "-fsdev", "local,id="+id+",path="+path+",security_model=none,readonly=on", "-device", "virtio-9p-device,fsdev="+id+",mount_tag="+id)
	}
	if *vfs {
		args = append(args, "-object", "memory-backend-memfd,id=mem,size=512M,share=on")
		for i, a := range args {
			if strings.HasPrefix(a, "microvm,") {
				args[i] = a + ",memory-backend=mem"
			}
		}
		var lowers []control.Mount
		for _, d := range []string{"usr", "etc"} {
			vs := filepath.Join(dir, d+".vfs")
			vd := exec.Command("/usr/lib/qemu/virtiofsd", "--socket-path="+vs, "-o", "source=/"+d, "-o", "cache=auto", "-o", "sandbox=chroot")
			vd.Stderr = os.Stderr
			if err := vd.Start(); err != nil {
				panic(err)
			}
			defer vd.Process.Kill()
			for i := 0; i < 100; i++ {
				if _, err := os.Stat(vs); err == nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			args = append(args, "-chardev", "socket,id=vfs"+d+",path="+vs, "-device", "vhost-user-fs-device,chardev=vfs"+d+",tag="+d)
			lowers = append(lowers, control.Mount{Tag: d, Target: "/" + d, FSType: "virtiofs", ReadOnly: true})
		}
		rs.Root = control.Root{Mode: "hostview", Lower: lowers,
			Symlinks: map[string]string{"bin": "usr/bin", "lib": "usr/lib", "lib64": "usr/lib64", "sbin": "usr/sbin"},
			Mask:     []string{"/etc/shadow"}}
	} else if *mode == "hostview" {
		share("usr", "/usr")
		share("etc", "/etc")
		rs.Root = control.Root{Mode: "hostview", Lower: []control.Mount{{Tag: "usr", Target: "/usr", FSType: "9p", ReadOnly: true}, {Tag: "etc", Target: "/etc", FSType: "9p", ReadOnly: true}},
			Symlinks: map[string]string{"bin": "usr/bin", "lib": "usr/lib", "lib64": "usr/lib64", "sbin": "usr/sbin"},
			Mask:     []string{"/etc/shadow", "/etc/gshadow", "/etc/ssh/ssh_host_*_key", "/etc/ssl/private", "/etc/sudoers.d", "/etc/machine-id"}}
	} else {
		share("root", *rootdir)
		rs.Root = control.Root{Mode: "rootfs", Lower: []control.Mount{{Tag: "root", Target: "/", FSType: "9p", ReadOnly: true}}}
	}
	if *tap {
		args = append(args, "-netdev", "user,id=n0,restrict=on", "-device", "virtio-net-device,netdev=n0")
		rs.Net = control.Net{Mode: "tap", Addr: "10.0.2.15/24", Gateway: "10.0.2.2", DNS: "10.0.2.3", ProxyURL: "http://10.0.2.2:3128"}
	}
	if *ponly {
		rs.Net = control.Net{Mode: "proxy-only", ProxyListen: "127.0.0.1:3128", ProxyURL: "http://127.0.0.1:3128"}
		rs.MCPSocket = "/run/mcp/mcp.sock"
	}
	echo := func(kind string) func(net.Conn) {
		return func(c net.Conn) {
			defer c.Close()
			l, _ := bufio.NewReader(c).ReadString('\n')
			fmt.Fprintf(c, "%s-reply:%s", kind, l)
		}
	}
	t0 := time.Now()
	cmd := exec.Command("qemu-system-x86_64", args...)
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			l := sc.Text()
			fmt.Fprintf(os.Stderr, "[%6.2fs console] %s\n", time.Since(t0).Seconds(), l)
		}
	}()
	if *floor {
		err := cmd.Wait()
		fmt.Fprintf(os.Stderr, "[%6.2fs] FLOOR qemu exited: %v\n", time.Since(t0).Seconds(), err)
		return
	}
	c, err := ln.Accept()
	if err != nil {
		panic(err)
	}
	fmt.Fprintf(os.Stderr, "[%6.2fs] qemu connected\n", time.Since(t0).Seconds())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	exit, err := runSession(ctx, c, rs, Stdio{Stdin: strings.NewReader("stdin-data\n"), Stdout: os.Stdout, Stderr: os.Stderr},
		sessionHooks{Log: log, ProxyConn: echo("proxy"), MCPConn: echo("mcp"), Started: func(pid int) { fmt.Fprintf(os.Stderr, "[%6.2fs] started pid %d\n", time.Since(t0).Seconds(), pid) }})
	fmt.Fprintf(os.Stderr, "[%6.2fs] EXIT %+v err=%v\n", time.Since(t0).Seconds(), exit, err)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		fmt.Fprintf(os.Stderr, "[%6.2fs] QEMUEXIT qemu exited by itself: %v\n", time.Since(t0).Seconds(), err)
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		fmt.Fprintf(os.Stderr, "[%6.2fs] qemu killed\n", time.Since(t0).Seconds())
	}
}

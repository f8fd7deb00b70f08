// Package jailtest is the one helper tests use to boot real guests: it finds the kernel
// and guest-init, stops the test through testreq (skip, or fail under make test) naming
// what is missing when the machine cannot boot guests, and keeps at most two guests running
// at once across every test process on the machine.
package jailtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/testreq"
	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/jail/install"
)

// Slots is how many guests may run at once machine-wide (the CI machine has 2 slow cores).
const Slots = 2

// DefaultTimeout bounds one test guest.
const DefaultTimeout = 3 * time.Minute

// Env is what a guest needs. pkg/jail reads no environment, so this fixture maps the
// variables make test sets: CRACKBOX_KERNEL, CRACKBOX_GUEST_INIT, CRACKBOX_CACHE and
// CRACKBOX_SNAPSHOT.
type Env struct {
	Kernel    string
	GuestInit string
	Cache     string // $CRACKBOX_CACHE, else install.CacheDir()
	Snapshot  string // $CRACKBOX_SNAPSHOT; "" is auto
}

// missing is a prerequisite find did not find and how to get it.
type missing struct{ what, fix string }

var (
	envOnce sync.Once
	env     Env
	envMiss *missing
)

// Require stops t through testreq unless guests can boot here: root,
// qemu-system-x86_64, a kernel ($CRACKBOX_KERNEL or the cache) and guest-init
// ($CRACKBOX_GUEST_INIT, else built once from ./guestfs/init in this module).
func Require(t testing.TB) Env {
	t.Helper()
	envOnce.Do(func() { env, envMiss = find() })
	if envMiss != nil {
		testreq.Missing(t, envMiss.what, envMiss.fix)
	}
	return env
}

func find() (Env, *missing) {
	if os.Geteuid() != 0 {
		return Env{}, &missing{"root", "guest tests run as root (QEMU drops to nobody, virtiofsd serves shares): sudo make test"}
	}
	if _, err := install.FindQEMU(); err != nil {
		return Env{}, &missing{"qemu-system-x86_64", err.Error()}
	}
	cache := os.Getenv("CRACKBOX_CACHE")
	if cache == "" {
		cache = install.CacheDir()
	}
	k, err := install.FindKernel(os.Getenv("CRACKBOX_KERNEL"), cache)
	if err != nil {
		return Env{}, &missing{"guest kernel", "set CRACKBOX_KERNEL or run `make kernel` (" + err.Error() + ")"}
	}
	gi := os.Getenv("CRACKBOX_GUEST_INIT")
	if gi == "" {
		gi, err = buildGuestInit()
		if err != nil {
			return Env{}, &missing{"guest-init", "set CRACKBOX_GUEST_INIT or run `make guest-init` (" + err.Error() + ")"}
		}
	}
	if _, err := os.Stat(gi); err != nil {
		return Env{}, &missing{"guest-init " + gi, "run `make guest-init`"}
	}
	return Env{Kernel: k, GuestInit: gi, Cache: cache, Snapshot: os.Getenv("CRACKBOX_SNAPSHOT")}, nil
}

// buildGuestInit compiles ./guestfs/init of the enclosing module into a per-user temp dir.
func buildGuestInit() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside a Go module")
	}
	src := filepath.Join(filepath.Dir(mod), "guestfs", "init")
	if _, err := os.Stat(src); err != nil {
		return "", fmt.Errorf("%s: %w", src, err)
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("crackbox-jailtest-%d", os.Geteuid()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, "guest-init-*")
	if err != nil {
		return "", err
	}
	tmp.Close()
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", tmp.Name(), "./guestfs/init")
	cmd.Dir = filepath.Dir(mod)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("go build ./guestfs/init: %v: %s", err, b)
	}
	final := filepath.Join(dir, "guest-init")
	if err := os.Rename(tmp.Name(), final); err != nil {
		return "", err
	}
	return final, nil
}

// Spec returns a Spec with the kernel, guest-init and a timeout filled in.
func Spec(t testing.TB, argv ...string) jail.Spec {
	e := Require(t)
	s := jail.Spec{Argv: argv, Kernel: e.Kernel, GuestInit: e.GuestInit, CacheDir: e.Cache, Snapshot: e.Snapshot,
		Timeout: DefaultTimeout, Accel: jail.AccelAuto}
	if os.Getenv("CRACKBOX_TEST_DEBUG") != "" {
		s.Debug = true
		s.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return s
}

// Run boots one guest for s while holding a machine-wide slot.
func Run(t testing.TB, s jail.Spec) (jail.Result, error) {
	t.Helper()
	return RunContext(t, context.Background(), s)
}

// RunContext is Run with a context.
func RunContext(t testing.TB, ctx context.Context, s jail.Spec) (jail.Result, error) {
	t.Helper()
	Require(t)
	release, err := Acquire(ctx)
	if err != nil {
		t.Fatalf("jailtest: waiting for a guest slot: %v", err)
	}
	defer release()
	start := time.Now()
	res, err := jail.Run(ctx, s)
	t.Logf("guest %q: exit %d err %v boot %s run %s total %s", s.Argv, res.Exit, err,
		res.Boot.Round(time.Millisecond), res.Run.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	if errors.Is(err, jail.ErrGuestCrashed) && res.ConsoleLog != "" {
		logConsole(t, res.ConsoleLog)
	}
	return res, err
}

// logConsole puts the end of a crashed guest's console into the test log, since the run
// dir that keeps it stays on the machine the test ran on.
func logConsole(t testing.TB, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Logf("console log: %v", err)
		return
	}
	if len(b) > consoleTail {
		b = b[len(b)-consoleTail:]
	}
	t.Logf("console log %s, last %d bytes:\n%s", path, len(b), strings.ToValidUTF8(string(b), "?"))
}

// consoleTail is how much of a crashed guest's console a test log shows.
const consoleTail = 4 << 10

// HoldAll takes every machine-wide guest slot until the test ends, so a benchmark times
// its own guests alone and never a wait for a slot; it then runs jail.Run directly.
func HoldAll(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	for range Slots {
		release, err := Acquire(ctx)
		if err != nil {
			t.Fatalf("jailtest: waiting for a guest slot: %v", err)
		}
		t.Cleanup(release)
	}
}

// Acquire takes one of Slots guest slots machine-wide. Each slot is a lock file in the
// temp dir held with flock, which also excludes other holders in this process (each
// acquisition opens its own file description).
func Acquire(ctx context.Context) (release func(), err error) {
	dir := os.TempDir()
	for {
		for i := 0; i < Slots; i++ {
			p := filepath.Join(dir, fmt.Sprintf("crackbox-guest-slot-%d.lock", i))
			// Read-only: flock needs no write access, so any user can share the slots.
			f, err := os.OpenFile(p, os.O_CREATE|os.O_RDONLY, 0o644)
			if err != nil {
				return nil, err
			}
			if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
				return func() {
					syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
					f.Close()
				}, nil
			}
			f.Close()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

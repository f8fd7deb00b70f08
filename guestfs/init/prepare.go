package main

import (
	"context"
	"fmt"
	"log/slog"

	"golang.org/x/sys/unix"

	"github.com/crackbox/crackbox/pkg/jail/control"
)

// builder turns a RunSpec into the guest the command runs in.
type builder struct {
	log    *slog.Logger
	loDone <-chan error
	swap   string         // the swap disk's device (swapDisk)
	synced []*syncedShare // shares whose changes go back when the command ends
	// stopSwap ends swapLater's wait once the command has ended.
	stopSwap context.CancelFunc
}

// prepare builds the root, network, home and masks. The network is configured while
// the root is built; both mostly wait on emulated devices.
func (b *builder) prepare(ctx context.Context, rs *control.RunSpec) error {
	b.log.Info("run received", "mode", rs.Root.Mode, "net", rs.Net.Mode)
	if err := applyHostState(rs); err != nil {
		return err
	}
	netDone := make(chan error, 1)
	go func() { netDone <- configureNet(rs.Net) }()
	rootErr := b.buildFS(ctx, rs)
	netErr := <-netDone
	if err := <-b.loDone; err != nil {
		b.log.Warn("loopback", "err", err)
	}
	if rootErr != nil {
		return rootErr
	}
	applyPath(rs)
	if netErr != nil {
		return netErr
	}
	if err := writeTrustBundle(rs.Net.TrustCA); err != nil {
		return err
	}
	if rs.Net.Mode == "tap" {
		if err := writeResolvConf(rs.Net.DNS); err != nil {
			return err
		}
	}
	if rs.Hostname != "" {
		if err := unix.Sethostname([]byte(rs.Hostname)); err != nil {
			return fmt.Errorf("hostname %q: %w", rs.Hostname, err)
		}
	}
	b.log.Info("guest ready")
	return nil
}

// beforeExit runs once the command has ended, before its exit is reported: it syncs
// the filesystems and hands back the changes of every share synced at exit, so the host
// has them when it learns the exit.
func (b *builder) beforeExit() {
	if b.stopSwap != nil {
		b.stopSwap()
	}
	unix.Sync()
	for _, s := range b.synced {
		if err := s.send(b.log); err != nil {
			b.log.Error("sync share", "err", err)
		}
	}
}

func (b *builder) buildFS(ctx context.Context, rs *control.RunSpec) error {
	if b.swap != "" && rs.Swap > 0 {
		swapCtx, stop := context.WithCancel(ctx)
		b.stopSwap = stop
		go swapLater(swapCtx, b.log, b.swap, rs.Swap)
	} else if rs.Swap > 0 {
		b.log.Warn("no swap", "err", "no disk with serial "+control.SwapSerial)
	}
	if err := buildRoot(ctx, rs.Root); err != nil {
		return err
	}
	if err := makeSymlinks(rs.Root.Symlinks); err != nil {
		return err
	}
	if err := makeHome(rs); err != nil {
		return err
	}
	synced, err := mountShares(ctx, rs.Mounts, plannedSwap(b.swap, rs.Swap))
	b.synced = synced
	if err != nil {
		return err
	}
	return applyMasks(rs.Root.Mask)
}

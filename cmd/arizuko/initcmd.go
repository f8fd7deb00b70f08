package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/secrets"
)

// newInitCmd is `arizuko init`.
func newInitCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "init",
		Short: "Create the data dir: database, API token and (unless one is configured) a secrets key",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
				return err
			}
			lock, err := lockData(cfg.DataDir)
			if err != nil {
				return fmt.Errorf("%s: %w", cfg.DataDir, err)
			}
			defer lock.Close()
			l, err := service.Open(cmd.Context(), service.Options{DataDir: cfg.DataDir, Create: true, Store: cfg.Store.URL, Log: slog.Default()})
			if err != nil {
				return err
			}
			defer l.Close()
			if err := l.Bootstrap(cmd.Context()); err != nil {
				return err
			}
			for _, d := range []string{folder.Root(cfg.DataDir), folder.HomesRoot(cfg.DataDir)} {
				if err := os.MkdirAll(d, 0o750); err != nil {
					return err
				}
			}
			made, err := writeIfMissing(cfg.Server.TokenFile, func() string {
				b := make([]byte, 32)
				rand.Read(b)
				return hex.EncodeToString(b)
			})
			if err != nil {
				return err
			}
			if made {
				fmt.Fprintln(os.Stderr, "wrote API token to", cfg.Server.TokenFile)
			}
			if !cfg.Secrets.fromEnv {
				made, err := writeIfMissing(cfg.Secrets.KeyFile, secrets.GenerateKey)
				if err != nil {
					return err
				}
				if made {
					fmt.Fprintln(os.Stderr, "wrote secrets key to", cfg.Secrets.KeyFile, "(back it up; move it off this disk for stronger isolation)")
				}
			}
			fmt.Println(cfg.DataDir)
			return nil
		},
	}
}

func writeIfMissing(path string, gen func() string) (bool, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if _, err := f.WriteString(gen() + "\n"); err != nil {
		f.Close()
		return false, err
	}
	return true, f.Close()
}

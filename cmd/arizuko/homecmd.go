package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/internal/httpjson"
	"github.com/crackbox/crackbox/pkg/arizuko/api"
	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/home"
)

// newHomeCmd is `arizuko home`.
func newHomeCmd(a *app) *cobra.Command {
	var version int
	restore := &cobra.Command{
		Use:   "restore FOLDER --version N",
		Short: "Make version N of a folder's home its newest version (fleet mode)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if version <= 0 {
				return fmt.Errorf("--version %d: want a version from `arizuko home log %s`", version, args[0])
			}
			var v home.Version
			if err := a.homeCall(cmd.Context(), "POST", "/v1/home/restore", nil, HomeRestoreIn{Folder: args[0], Version: version}, &v); err != nil {
				return err
			}
			fmt.Printf("%s: version %d restored as version %d\n", args[0], version, v.N)
			return nil
		},
	}
	restore.Flags().IntVar(&version, "version", 0, "the version to bring back")
	return group("home", "Folder homes: history, diff, restore, push and pull",
		&cobra.Command{
			Use:   "log FOLDER",
			Short: "List the versions of a folder's home (fleet mode)",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				var vs []home.Version
				if err := a.homeCall(cmd.Context(), "GET", "/v1/home/log", url.Values{"folder": {args[0]}}, nil, &vs); err != nil || a.json {
					return jsonOr(vs, err)
				}
				table("VERSION\tTIME\tSOURCE\tTURN\tSIZE\tFILES\tCHANGED", func(w *tabwriter.Writer) {
					for _, v := range vs {
						src := v.Source
						if v.From > 0 {
							src += " of " + strconv.Itoa(v.From)
						}
						turn := "-"
						if v.Turn > 0 {
							turn = fmt.Sprintf("%d.%d", v.Turn, v.Attempt)
						}
						fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%d\t%d\n", v.N, v.Time.Local().Format("2006-01-02 15:04:05"), src, turn, v.Size, v.Files, v.Changed)
					}
				})
				return nil
			},
		},
		&cobra.Command{
			Use:   "diff FOLDER A B",
			Short: "List the paths that changed from version A to version B (0: the empty home)",
			Args:  cobra.ExactArgs(3),
			RunE: func(cmd *cobra.Command, args []string) error {
				var d HomeDiff
				q := url.Values{"folder": {args[0]}, "a": {args[1]}, "b": {args[2]}}
				if err := a.homeCall(cmd.Context(), "GET", "/v1/home/diff", q, nil, &d); err != nil || a.json {
					return jsonOr(d, err)
				}
				for _, c := range d.Changes {
					fmt.Printf("%s %s\n", map[string]string{"added": "+", "removed": "-", "changed": "~"}[c.Op], c.Path)
				}
				return nil
			},
		},
		restore,
		&cobra.Command{
			Use:   "push FOLDER DIR",
			Short: "Make a folder's home a copy of DIR (a new version in fleet mode)",
			Args:  cobra.ExactArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				if fi, err := os.Stat(args[1]); err != nil || !fi.IsDir() {
					return fmt.Errorf("%s: not a directory to push (%v)", args[1], err)
				}
				pr, pw := io.Pipe()
				go func() { pw.CloseWithError(home.TarDir(pw, args[1])) }()
				defer pr.Close()
				var v home.Version
				if err := a.homeCall(cmd.Context(), "PUT", "/v1/home/files", url.Values{"folder": {args[0]}}, pr, &v); err != nil {
					return err
				}
				if v.N > 0 {
					fmt.Printf("%s: version %d, %d files, %d bytes\n", args[0], v.N, v.Files, v.Size)
				} else {
					fmt.Printf("%s: %d files, %d bytes\n", args[0], v.Files, v.Size)
				}
				return nil
			},
		},
		&cobra.Command{
			Use:   "pull FOLDER DIR",
			Short: "Copy a folder's latest home into DIR, which must be empty or absent",
			Args:  cobra.ExactArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				if es, err := os.ReadDir(args[1]); err == nil && len(es) > 0 {
					return fmt.Errorf("%s is not empty: pull into an empty or new directory", args[1])
				}
				if err := os.MkdirAll(args[1], 0o700); err != nil {
					return err
				}
				var buf bytes.Buffer
				if err := a.homeCall(cmd.Context(), "GET", "/v1/home/files", url.Values{"folder": {args[0]}}, nil, &buf); err != nil {
					return err
				}
				chunks := map[string][]byte{}
				m, err := home.FromTar(&buf, home.Limits{}, func(h string, b []byte) error { chunks[h] = append([]byte(nil), b...); return nil })
				if err != nil {
					return err
				}
				if _, _, err := home.Sync(args[1], nil, m, func(h string) ([]byte, error) { return chunks[h], nil }); err != nil {
					return err
				}
				fmt.Printf("%s: %d files, %d bytes in %s\n", args[0], len(m.Entries), m.Size(), args[1])
				return nil
			},
		},
	)
}

// homeCall does one home request: against the daemon, or on a single host
// with no daemon running, on the data dir itself. A body that is a reader
// is sent as is (a tar stream), anything else as JSON; out a *bytes.Buffer
// takes the raw answer.
func (a *app) homeCall(ctx context.Context, method, path string, q url.Values, body, out any) error {
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	base, token, err := cfg.daemonEndpoint()
	if errors.Is(err, errNoDaemon) {
		if cfg.Fleet.NATS != "" {
			return fmt.Errorf("homes live in the fleet's store: start `arizuko serve --nats` first")
		}
		return localHomeCall(ctx, &localHomes{data: cfg.DataDir, lim: cfg.Fleet.Home.limits}, method, path, q, body, out)
	}
	if err != nil {
		return err
	}
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return api.RemoteError(base, (&httpjson.Client{Base: base, Token: token}).Do(ctx, method, path, body, out))
}

// localHomeCall serves push and pull on a single host without a daemon;
// history needs fleet mode.
func localHomeCall(ctx context.Context, k *localHomes, method, path string, q url.Values, body, out any) error {
	f := q.Get("folder")
	if err := folder.Validate(f); err != nil {
		return err
	}
	switch {
	case method == "PUT" && path == "/v1/home/files":
		v, err := k.Push(ctx, f, body.(io.Reader))
		if err == nil {
			*out.(*home.Version) = v
		}
		return err
	case method == "GET" && path == "/v1/home/files":
		return k.Pull(ctx, f, out.(*bytes.Buffer))
	}
	return errNoHistory
}

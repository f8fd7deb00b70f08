package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/service"
	"github.com/crackbox/crackbox/pkg/store"
)

// daemonEndpoint finds the running daemon: --server/$ARIZUKO_SERVER, else
// the URL the daemon serving the data dir advertises; errNoDaemon if none.
func daemonEndpoint(cfg *Config) (string, string, error) {
	server := firstNonEmpty(flagServer, os.Getenv("ARIZUKO_SERVER"))
	if server == "" {
		lock, err := lockData(cfg.DataDir)
		if err == nil {
			lock.Close()
			return "", "", errNoDaemon
		}
		if !errors.Is(err, errLocked) {
			return "", "", err
		}
		var info daemonInfo
		b, rerr := os.ReadFile(filepath.Join(cfg.DataDir, daemonFile))
		if rerr != nil || json.Unmarshal(b, &info) != nil || info.URL == "" {
			return "", "", fmt.Errorf("%s: %w and advertises no URL; pass --server", cfg.DataDir, err)
		}
		server = info.URL
	}
	token := firstNonEmpty(flagToken, os.Getenv("ARIZUKO_TOKEN"))
	if token == "" {
		var err error
		if token, err = readToken(cfg.Server.TokenFile); err != nil {
			return "", "", err
		}
	}
	return strings.TrimSuffix(server, "/"), token, nil
}

// daemonCall does one JSON request against the daemon; a non-2xx answer
// becomes the envelope's error, classified like the API client's.
func daemonCall(ctx context.Context, base, token, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("daemon %s: %w", base, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if resp.StatusCode/100 != 2 {
		var e service.Error
		if json.Unmarshal(b, &e) == nil && e.Message != "" {
			return &e
		}
		return fmt.Errorf("daemon answered %s", resp.Status)
	}
	if out == nil || len(b) == 0 {
		return nil
	}
	return json.Unmarshal(b, out)
}

// withTurnStore runs fn on the data dir's store when no daemon runs, after
// authorizing turn:read for the admin principal like every other caller.
func withTurnStore(ctx context.Context, scope string, fn func(st *store.Store) error) error {
	return withService(ctx, func(ctx context.Context, s service.Service) error {
		l, ok := s.(*service.Local)
		if !ok {
			return errors.New("a daemon started meanwhile; run the command again")
		}
		if err := l.Gate().Check(ctx, service.Principal(ctx), "turn:read", scope); err != nil {
			return err
		}
		return fn(l.Store())
	})
}

func listTurns(ctx context.Context, cfg *Config, folder string, limit int) ([]store.Turn, error) {
	base, token, err := daemonEndpoint(cfg)
	if err == nil {
		q := url.Values{"folder": {folder}, "limit": {fmt.Sprint(limit)}}
		var ts []store.Turn
		return ts, daemonCall(ctx, base, token, http.MethodGet, "/v1/turns?"+q.Encode(), nil, &ts)
	}
	if !errors.Is(err, errNoDaemon) {
		return nil, err
	}
	var ts []store.Turn
	err = withTurnStore(ctx, folder, func(st *store.Store) error {
		ts, err = st.ListTurns(ctx, folder, limit)
		return err
	})
	return ts, err
}

func showTurn(ctx context.Context, cfg *Config, id int64) (TurnDetail, error) {
	base, token, err := daemonEndpoint(cfg)
	if err == nil {
		var d TurnDetail
		return d, daemonCall(ctx, base, token, http.MethodGet, fmt.Sprintf("/v1/turns/%d", id), nil, &d)
	}
	if !errors.Is(err, errNoDaemon) {
		return TurnDetail{}, err
	}
	var d TurnDetail
	err = withTurnStore(ctx, "", func(st *store.Store) error {
		d, err = turnDetail(ctx, st, id)
		return err
	})
	return d, err
}

func when(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).Local().Format("2006-01-02 15:04:05")
}

func took(t store.Turn) string {
	if t.StartedAt == 0 || t.EndedAt < t.StartedAt {
		return "-"
	}
	return time.Duration((t.EndedAt - t.StartedAt) * int64(time.Millisecond)).Round(100 * time.Millisecond).String()
}

func exitText(t store.Turn) string {
	if t.ExitCode == nil {
		return "-"
	}
	return fmt.Sprint(*t.ExitCode)
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}

func init() {
	turns := &cobra.Command{Use: "turns", Short: "Show agent turns: when they ran, how they ended, what they sent"}
	var folder string
	var limit int
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the newest turns",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			ts, err := listTurns(cmd.Context(), cfg, folder, limit)
			if err != nil || flagJSON {
				return jsonOr(ts, err)
			}
			table("ID\tFOLDER\tTOPIC\tSTATUS\tTRIES\tEXIT\tSTARTED\tTOOK\tOUTCOME", func(w *tabwriter.Writer) {
				for _, t := range ts {
					out := t.Outcome
					if t.Error != "" {
						out = firstNonEmpty(out+" ", "") + "error: " + t.Error
					}
					fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", t.ID, t.Folder, firstNonEmpty(t.Topic, "-"), t.Status,
						t.Attempts, exitText(t), when(t.StartedAt), took(t), clip(out, 60))
				}
			})
			return nil
		},
	}
	ls.Flags().StringVar(&folder, "folder", "", "only this folder's turns")
	ls.Flags().IntVar(&limit, "limit", 20, "how many turns")
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show one turn: its messages, replies, exit code and egress summary",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var id int64
			if _, err := fmt.Sscan(args[0], &id); err != nil || id <= 0 {
				return fmt.Errorf("turn id %q: want a positive number: %w", args[0], service.ErrInvalid)
			}
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			d, err := showTurn(cmd.Context(), cfg, id)
			if err != nil || flagJSON {
				return jsonOr(d, err)
			}
			where := d.Folder
			if d.Topic != "" {
				where += "#" + d.Topic
			}
			fmt.Printf("turn %d  %s  %s after %d attempt(s)\n", d.ID, where, d.Status, d.Attempts)
			fmt.Printf("session   %s\nstarted   %s\nended     %s (%s)\nexit      %s\ndepth     %d\n",
				firstNonEmpty(d.SessionID, "-"), when(d.StartedAt), when(d.EndedAt), took(d.Turn), exitText(d.Turn), d.Depth)
			fmt.Printf("outcome   %s\n", firstNonEmpty(d.Outcome, "-"))
			if d.Error != "" {
				fmt.Printf("error     %s\n", d.Error)
			}
			fmt.Printf("egress    %s\n", firstNonEmpty(d.Egress, "nothing blocked"))
			fmt.Println("\nmessages in:")
			for _, m := range d.Messages {
				fmt.Printf("  #%d %s %s: %s\n", m.ID, m.ChatJID, firstNonEmpty(m.Sender, "?"), clip(m.Text, 200))
			}
			fmt.Println("sent:")
			for _, o := range d.Outbound {
				fmt.Printf("  #%d -> %s [%s, %d attempt(s)]: %s\n", o.ID, o.ChatJID, o.Status, o.Attempts, clip(o.Text, 200))
			}
			return nil
		},
	}
	turns.AddCommand(ls, show)
	root.AddCommand(turns)
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/internal/httpjson"
	"github.com/crackbox/crackbox/pkg/admin"
	"github.com/crackbox/crackbox/pkg/jail/rundir"
)

// newStateCmd builds crackbox state.
func newStateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Print the proxy daemon's registered clients",
		Long: `Print the clients registered with a running "crackbox proxy serve", read
from its admin API. The address and secret default to admin.listen and
admin.secret (or CRACKBOX_ADMIN_SECRET) from the config; without a secret it uses
the token a local daemon started without one keeps in the run dir base
(/run/crackbox/admin-PORT.token as root), readable by the daemon's user only.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := loadConfig(cmd, []flagBind{{"secret", "admin.secret"}})
			if err != nil {
				return err
			}
			base, _ := cmd.Flags().GetString("admin")
			if base == "" {
				if base = adminURL(cfg.Admin.Listen); base == "" {
					return fmt.Errorf("admin.listen is disabled in the config: pass --admin URL")
				}
			}
			asJSON, _ := cmd.Flags().GetBool("json")
			st, err := fetchState(cmd.Context(), base, cfg.Admin.Secret)
			if err != nil {
				return err
			}
			return printState(cmd.OutOrStdout(), st, asJSON)
		},
	}
	addConfigFlag(cmd)
	cmd.Flags().String("admin", "", "admin API URL, e.g. http://127.0.0.1:3129 (default from admin.listen)")
	cmd.Flags().String("secret", "", "admin bearer token (default admin.secret / CRACKBOX_ADMIN_SECRET)")
	cmd.Flags().Bool("json", false, "print JSON instead of a table")
	return cmd
}

// localToken is the token a local daemon without admin.secret made for its admin API
// at hostport, and where it looked; "" when there is none to find.
func localToken(hostport string) (tok, path string, err error) {
	if _, _, err := net.SplitHostPort(hostport); err != nil {
		return "", "", nil // no port: not an address a local daemon keeps a token for
	}
	if path, err = admin.TokenFile(rundir.DefaultBase(), hostport); err != nil {
		return "", "", nil
	}
	tok, err = admin.ReadToken(path)
	if errors.Is(err, admin.ErrNoToken) {
		return "", path, nil
	}
	return tok, path, err
}

// adminURL turns a listen address into a URL to reach it locally: an
// unspecified host (":3129", "0.0.0.0:3129") is reached over loopback.
func adminURL(listen string) string {
	if listen == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

func fetchState(ctx context.Context, base, secret string) (*admin.StateJSON, error) {
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u, err := url.Parse(strings.TrimRight(base, "/") + "/v1/state")
	if err != nil {
		return nil, fmt.Errorf("admin url %q: %w", base, err)
	}
	hint := ""
	if secret == "" {
		var path string
		if secret, path, err = localToken(u.Host); err != nil {
			return nil, err
		}
		if secret == "" && path != "" {
			hint = fmt.Sprintf(" (no --secret or admin.secret given, and no daemon token at %s: pass the daemon's, e.g. --secret \"$(cat <its run dir base>/%s)\")", path, filepath.Base(path))
		}
	}
	var st admin.StateJSON
	err = (&httpjson.Client{Base: base, Token: secret}).Do(ctx, http.MethodGet, "/v1/state", nil, &st)
	var se *httpjson.StatusError
	var de *httpjson.DecodeError
	var ue *url.Error
	switch {
	case err == nil:
		return &st, nil
	case errors.As(err, &se) && se.Envelope.Message != "":
		return nil, fmt.Errorf("admin api: %s: %s%s", se.Status, se.Envelope.Message, hint)
	case errors.As(err, &se):
		return nil, fmt.Errorf("admin api: %s%s", se.Status, hint)
	case errors.As(err, &de):
		return nil, fmt.Errorf("admin api returned bad JSON: %w", de.Err)
	case errors.As(err, &ue):
		return nil, fmt.Errorf("reach admin api (is crackbox proxy serve running?): %w", err)
	}
	return nil, fmt.Errorf("read admin api response: %w", err)
}

func printState(w io.Writer, st *admin.StateJSON, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IP\tID\tALLOWLIST")
	for _, c := range st.Clients {
		list := strings.Join(c.Allowlist, ",")
		if list == "" {
			list = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.IP, c.ID, list)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d clients, %d active tunnels\n", len(st.Clients), st.ActiveTunnels)
	return err
}

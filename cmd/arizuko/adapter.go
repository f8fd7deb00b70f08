package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/arizuko/adapter"
	"github.com/crackbox/crackbox/pkg/arizuko/slackadapter"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// errNotConforming is an adapter that failed a case of the conformance kit.
var errNotConforming = errors.New("the adapter does not conform")

// newAdapterCmd is `arizuko adapter`: the contract's kit and the adapters
// that ship with arizuko.
func newAdapterCmd(a *app) *cobra.Command {
	return group("adapter", "Channel adapters: the conformance kit and the built-in adapters",
		newAdapterTestCmd(), newAdapterSlackCmd(a))
}

// newAdapterTestCmd is `arizuko adapter test`.
func newAdapterTestCmd() *cobra.Command {
	var secret, chat string
	cmd := &cobra.Command{
		Use:   "test URL",
		Short: "Drive an adapter through every case of the adapter contract and print a pass/fail table",
		Long: `Play the daemon's side against the adapter whose callback URL is URL (as
registered with POST /v1/adapters): signed deliveries to URL/send, a retry
of one idempotency key, a new key, attachments, unsigned, wrongly signed,
tampered and stale calls, a malformed body, an edit to URL/edit of a sent
and of an unknown message, and typing hints to URL/typing. The adapter
really posts the test messages to chat --chat. Exits non-zero unless every
case passes. The secret comes from $ARIZUKO_ADAPTER_SECRET or --secret.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := loadSession(os.LookupEnv, flagOverrides(map[string]string{"adapter_secret": secret})...)
			if err != nil {
				return err
			}
			rs, err := adapter.Check(cmd.Context(), adapter.KitConfig{URL: args[0], Secret: s.AdapterSecret, Chat: chat})
			if err != nil {
				return fmt.Errorf("%w (pass --secret and --chat)", err)
			}
			adapter.PrintTable(cmd.OutOrStdout(), rs)
			if !adapter.Passed(rs) {
				return errNotConforming
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&secret, "secret", "", "the secret the adapter was registered with (default $ARIZUKO_ADAPTER_SECRET)")
	cmd.Flags().StringVar(&chat, "chat", "", "a chat jid the adapter carries, e.g. slack:C0123/1700000000.000100")
	return cmd
}

// slackRun is one `arizuko adapter slack` run's settings.
type slackRun struct {
	listen, callback, apiURL string
	maxWait                  time.Duration
	base, token              string
	signing, bot, secret     string
	ready                    func(addr string) // tests learn the address
}

// newAdapterSlackCmd is `arizuko adapter slack`.
func newAdapterSlackCmd(a *app) *cobra.Command {
	r := &slackRun{}
	cmd := &cobra.Command{
		Use:   "slack",
		Short: "Carry a Slack workspace to arizuko (Events API in, chat.postMessage out)",
		Long: `Serve Slack's Events API at http://LISTEN/slack/events (set that as the
app's Request URL) and carry its messages to the daemon: each thread is a
chat slack:<channel>/<thread_ts>, replies go back in the thread. Needs
$SLACK_SIGNING_SECRET and $SLACK_BOT_TOKEN (xoxb-…, scopes chat:write and
the history scopes of the channels it reads). The adapter registers itself
as platform "slack" with a fresh signing secret, which needs an admin
token; with $ARIZUKO_ADAPTER_SECRET set it does not register (an operator
did, with that secret) and an adapter token for platform slack will do.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			if r.base, r.token, err = cfg.daemonEndpoint(); err != nil {
				return err
			}
			r.signing, r.bot, r.secret = os.Getenv("SLACK_SIGNING_SECRET"), os.Getenv("SLACK_BOT_TOKEN"), cfg.adapterSecret
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return r.run(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&r.listen, "listen", "127.0.0.1:7490", "address to serve Slack's events and the daemon's calls on")
	f.StringVar(&r.callback, "callback", "", "this adapter's URL as the daemon reaches it (default http://LISTEN)")
	f.StringVar(&r.apiURL, "slack-api-url", "", "Slack Web API base, ending in / (default Slack's own; tests point it at a stand-in)")
	f.DurationVar(&r.maxWait, "max-wait", slackadapter.DefaultMaxWait, "longest Slack Retry-After to wait out before handing the message back to the daemon")
	return cmd
}

func (r *slackRun) run(ctx context.Context) error {
	register := r.secret == ""
	if register {
		var b [24]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		r.secret = hex.EncodeToString(b[:])
	}
	client := &http.Client{Timeout: 30 * time.Second}
	sa, err := slackadapter.New(ctx, slackadapter.Options{SigningSecret: r.signing, BotToken: r.bot, APIURL: r.apiURL,
		Secret: r.secret, Post: slackadapter.PostTo(r.base, r.token, client), HTTPClient: client, MaxWait: r.maxWait, Log: slog.Default()})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", r.listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", r.listen, err)
	}
	srv := &http.Server{Handler: sa.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	cb := strings.TrimRight(firstNonEmpty(r.callback, "http://"+ln.Addr().String()), "/") + slackadapter.PathContract
	if register {
		if err := daemonCall(ctx, r.base, r.token, http.MethodPost, "/v1/adapters",
			store.Adapter{Platform: slackadapter.Platform, CallbackURL: cb, Secret: r.secret}, nil); err != nil {
			return fmt.Errorf("register the slack adapter (an admin token may; or register it yourself and set $ARIZUKO_ADAPTER_SECRET): %w", err)
		}
	}
	slog.Info("slack adapter serving", "events", "http://"+ln.Addr().String()+slackadapter.PathEvents, "callback", cb, "bot", sa.BotUser())
	if r.ready != nil {
		r.ready(ln.Addr().String())
	}
	<-ctx.Done()
	return nil
}

package turn

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/crackbox/crackbox/pkg/folder"
	"github.com/crackbox/crackbox/pkg/gated"
	"github.com/crackbox/crackbox/pkg/inject"
	"github.com/crackbox/crackbox/pkg/router"
	"github.com/crackbox/crackbox/pkg/secrets"
	"github.com/crackbox/crackbox/pkg/service"
	"github.com/crackbox/crackbox/pkg/store"
)

// OutcomeNoSecrets is the outcome of a turn that failed because the folder's
// secrets did not open; such turns run again at the next daemon start.
const OutcomeNoSecrets = "secrets-unavailable"

// ErrNoAgent is a folder without an agent command.
var ErrNoAgent = errors.New("folder has no agent command")

// ErrSecretMissing is an inject grant whose secret the folder does not have.
var ErrSecretMissing = errors.New("injected secret is missing")

// maxOutput bounds the agent output kept in the error of a failed turn.
const maxOutput = 2048

// runTurn runs t until it is done, failed for good, or the daemon stops.
func (q *Queue) runTurn(ctx context.Context, t store.Turn) {
	log := q.o.Log.With("turn", t.ID, "folder", t.Folder, "topic", t.Topic)
	if t.Status == store.TurnRunning {
		// A daemon died during this turn. If it already answered, running it
		// again would answer twice.
		if outs, err := q.o.Store.TurnOutbound(ctx, t.ID); err == nil && len(outs) > 0 {
			q.finish(ctx, t.ID, store.TurnEnd{Status: store.TurnDone, Outcome: "replied before a daemon restart"}, log)
			return
		}
		log.Info("turn runs again after a daemon restart", "attempts", t.Attempts)
	}
	if t.Attempts == 0 {
		// Only a turn that never started is held to the budget: a retry or a
		// re-run after a restart was admitted already.
		limit, err := q.checkBudget(ctx, t)
		switch {
		case errors.Is(err, ErrQuota):
			q.refuse(ctx, t, limit, err, log)
			return
		case err != nil:
			log.Error("turn budget", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(q.o.RetryDelay):
			}
			return
		}
	}
	for {
		if t.Attempts > q.o.MaxRetries {
			why := fmt.Sprintf("gave up after %d attempts", t.Attempts)
			q.notify(ctx, t, failureNotice(t.Folder, why), log)
			q.finish(ctx, t.ID, store.TurnEnd{Status: store.TurnFailed, Error: why}, log)
			return
		}
		// A guest slot is held for one attempt and its record, never across
		// the retry delay: the next waiting turn takes it at once.
		release, err := q.acquire(ctx, t.Folder)
		if err != nil {
			return
		}
		start := time.Now()
		res, out, err := q.attempt(ctx, t)
		t.Attempts++
		if ctx.Err() != nil {
			release()
			log.Info("turn cut off by shutdown; it runs again at the next start")
			return
		}
		replied := false
		if outs, oerr := q.o.Store.TurnOutbound(ctx, t.ID); oerr == nil && len(outs) > 0 {
			replied = true
		}
		exit := res.Exit
		q.auditGuarded(ctx, t.Folder, res.Guarded, log)
		end := store.TurnEnd{Egress: res.Egress}
		if res.ran {
			end.ExitCode = &exit
		}
		log.Info("turn attempt ended", "attempt", t.Attempts, "exit", exit, "replied", replied, "took", time.Since(start).Round(time.Millisecond), "err", err)
		switch {
		case errors.Is(err, secrets.ErrOpen) || errors.Is(err, service.ErrWrongKey):
			// No retry opens a secret; the daemon queues the turn again when
			// it starts with a key ring that opens the store.
			end.Status, end.Outcome, end.Error = store.TurnFailed, OutcomeNoSecrets, err.Error()
		case errors.Is(err, ErrTerminal) || errors.Is(err, ErrNoAgent):
			end.Status, end.Error = store.TurnFailed, err.Error()
		case err == nil && exit == 0:
			end.Status, end.Outcome = store.TurnDone, "ok"
			if !replied {
				end.Outcome = "ok, no reply"
			}
		case replied:
			// Retrying would answer twice; the reply is what the user wanted.
			end.Status, end.Outcome = store.TurnDone, fmt.Sprintf("replied, then exit %d", exit)
			end.Error = errText(err, out)
		case t.Attempts > q.o.MaxRetries:
			end.Status, end.Error = store.TurnFailed, fmt.Sprintf("after %d attempts: %s", t.Attempts, errText(err, out))
		default:
			if rerr := q.o.Store.RequeueTurn(ctx, t.ID, errText(err, out)); rerr != nil {
				log.Error("requeue turn", "err", rerr)
			}
			release()
			select {
			case <-ctx.Done():
				return
			case <-time.After(q.o.RetryDelay):
			}
			continue
		}
		if end.Status == store.TurnFailed && !replied {
			q.notify(ctx, t, failureNotice(t.Folder, end.Error), log)
		}
		q.finish(ctx, t.ID, end, log)
		release()
		return
	}
}

// failureNotice is the one line a chat gets when its folder's turn failed for
// good: what failed, and where the operator finds the rest.
func failureNotice(folder, why string) string {
	why, _, _ = strings.Cut(why, "; output:")
	if len(why) > 300 {
		why = why[:300] + "…"
	}
	return fmt.Sprintf("arizuko: %s could not answer (%s); the operator sees the details in `arizuko turns ls`", folder, why)
}

func (q *Queue) finish(ctx context.Context, id int64, e store.TurnEnd, log interface {
	Info(string, ...any)
	Error(string, ...any)
}) {
	if err := q.o.Store.FinishTurn(ctx, id, e); err != nil {
		log.Error("finish turn", "err", err)
		return
	}
	log.Info("turn finished", "status", e.Status, "outcome", e.Outcome, "error", e.Error)
}

func errText(err error, out []byte) string {
	var parts []string
	if err != nil {
		parts = append(parts, err.Error())
	}
	if len(out) > 0 {
		if len(out) > maxOutput {
			out = out[len(out)-maxOutput:]
		}
		parts = append(parts, "output: "+strings.TrimSpace(string(out)))
	}
	if len(parts) == 0 {
		return "agent exited with an error"
	}
	return strings.Join(parts, "; ")
}

// OutputTail keeps the last maxOutput bytes an agent writes, for a failed turn's
// error or a runner's outcome. The jail copies stdout and stderr into it from two
// goroutines, hence the lock.
type OutputTail struct {
	mu  sync.Mutex
	buf []byte
}

func (b *OutputTail) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > 4*maxOutput {
		b.buf = append([]byte(nil), b.buf[len(b.buf)-maxOutput:]...)
	}
	return len(p), nil
}

// Bytes returns a copy of the last maxOutput bytes written.
func (b *OutputTail) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf[max(0, len(b.buf)-maxOutput):]...)
}

// attempt runs the agent once.
func (q *Queue) attempt(ctx context.Context, t store.Turn) (Result, []byte, error) {
	f, err := q.o.Store.GetFolder(ctx, t.Folder)
	if err != nil {
		return Result{}, nil, fmt.Errorf("%w: %w", err, ErrTerminal)
	}
	if len(f.AgentCommand) == 0 {
		return Result{}, nil, fmt.Errorf("%s: %w; set one with `arizuko folder add %s --agent CMD`", t.Folder, ErrNoAgent, t.Folder)
	}
	sess, err := q.o.Store.EnsureSession(ctx, t.Folder, t.Topic, gated.NewSessionID())
	if err != nil {
		return Result{}, nil, err
	}
	msgs, err := q.o.Store.TurnMessages(ctx, t)
	if err != nil {
		return Result{}, nil, err
	}
	var chat, replyTo string
	engage := false
	if len(msgs) > 0 {
		last := msgs[len(msgs)-1]
		chat, replyTo = last.ChatJID, last.PlatformID
		switch router.How(last.How) {
		case router.Direct, router.ByRoute, router.Engaged, router.Fallback:
			engage = true
		}
	}
	prompt, err := q.prompt(ctx, t, msgs)
	if err != nil {
		return Result{}, nil, err
	}
	allowList, err := q.o.Control.EffectiveAllowlist(ctx, t.Folder)
	if err != nil {
		return Result{}, nil, err
	}
	env, inj, err := q.env(ctx, t, sess.SessionID, chat)
	if err != nil {
		return Result{}, nil, err
	}
	// The guest gets the folder's flat home, never a directory of the folder
	// tree, so no other folder's home lies inside what this guest can write.
	home, err := folder.EnsureHome(q.o.DataDir, t.Folder)
	if err != nil {
		return Result{}, nil, fmt.Errorf("%w: %w", err, ErrTerminal)
	}
	// The socket is bound before the guest starts, so the agent finds it at once.
	gt := gated.Turn{Folder: t.Folder, Topic: t.Topic, TurnID: t.ID, Depth: t.Depth, ChatJID: chat, ReplyTo: replyTo, Engage: engage}
	ln, err := q.o.Gated.Listen(ctx, gt)
	if err != nil {
		return Result{}, nil, err
	}
	defer ln.Close()
	if err := q.o.Store.StartTurn(ctx, t.ID, sess.SessionID); err != nil {
		return Result{}, nil, err
	}
	var out OutputTail
	res, err := q.o.Runner.Run(ctx, Job{
		Turn: t, Argv: f.AgentCommand, Env: env, Secrets: inj, Prompt: prompt, HostHome: home, GuestHome: q.o.GuestHome,
		Allow: allowList, Socket: ln.Path(), MCPConn: ln.Bridge(), MemoryMiB: f.GuestMemoryMiB, CPUs: f.GuestCPUs, Stdout: &out, MCP: gt,
	})
	res.ran = true
	return res, out.Bytes(), err
}

func (q *Queue) prompt(ctx context.Context, t store.Turn, msgs []store.Message) (string, error) {
	sources, err := q.o.Store.Observed(ctx, t.Folder)
	if err != nil {
		return "", err
	}
	p, err := q.o.Gate.Policy(ctx)
	if err != nil {
		return "", err
	}
	var obs []Observed
	for _, s := range sources {
		// The grant that let the folder start observing must still hold: a
		// revoked allow or a new deny ends what it may read from the next turn.
		if d := p.Decide("folder:"+t.Folder, "mcp:observe_group", s); !d.Allow {
			q.o.Log.Info("observation not used: grant no longer holds", "folder", t.Folder, "source", s, "reason", d.Reason)
			continue
		}
		ms, err := q.o.Store.RecentFolderMessages(ctx, s, q.o.ObserveMessages)
		if err != nil {
			return "", err
		}
		obs = append(obs, Observed{Folder: s, Messages: ms})
	}
	return BuildPrompt(t, msgs, obs, q.o.ObserveChars), nil
}

// env is the agent's environment: the turn's identity, and only the folder
// secrets a shell:env:<KEY> grant names (plus the model credential keys).
// Secrets an inject:<KEY>@<host> grant binds are returned apart, for the
// proxy: the guest gets their placeholders instead, whatever else names them.
func (q *Queue) env(ctx context.Context, t store.Turn, session, chat string) ([]string, []inject.Secret, error) {
	env := []string{
		"ARIZUKO_FOLDER=" + t.Folder,
		"ARIZUKO_TOPIC=" + t.Topic,
		fmt.Sprintf("ARIZUKO_TURN=%d", t.ID),
		"ARIZUKO_SESSION=" + session,
		"ARIZUKO_CHAT=" + chat,
		"ARIZUKO_MCP_SOCKET=" + gated.GuestSocket,
	}
	p, err := q.o.Gate.Policy(ctx)
	if err != nil {
		return nil, nil, err
	}
	bound := p.Injections("folder:"+t.Folder, t.Folder)
	secrets, err := q.o.Control.FolderSecrets(ctx, t.Folder)
	if errors.Is(err, service.ErrUnavailable) {
		if len(bound) > 0 {
			return nil, nil, fmt.Errorf("%s: inject grants need the sealed secret store, and the daemon has no key ring: %w: %w", t.Folder, ErrSecretMissing, ErrTerminal)
		}
		return env, nil, nil // no key ring: no secrets to pass
	}
	if err != nil {
		return nil, nil, err
	}
	inj, err := injections(t.Folder, bound, secrets)
	if err != nil {
		return nil, nil, err
	}
	cred := map[string]bool{}
	for _, k := range q.o.CredentialKeys {
		cred[k] = true
	}
	keys := make([]string, 0, len(secrets))
	for k := range secrets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if bound[k] != nil {
			continue
		}
		if cred[k] || p.Decide("folder:"+t.Folder, "shell:env:"+k, t.Folder).Allow {
			env = append(env, k+"="+secrets[k])
		}
	}
	return env, inj, nil
}

// injections pairs every bound secret with its value; a grant naming a
// secret the folder does not have fails the turn rather than run it with an
// empty value.
func injections(folder string, bound map[string][]string, secrets map[string]string) ([]inject.Secret, error) {
	names := make([]string, 0, len(bound))
	for k := range bound {
		names = append(names, k)
	}
	sort.Strings(names)
	var out []inject.Secret
	for _, k := range names {
		v := secrets[k]
		if v == "" {
			return nil, fmt.Errorf("%s: an inject grant names the secret %s, which is not set; set it with `arizuko secret set folder:%s %s`: %w: %w",
				folder, k, folder, k, ErrSecretMissing, ErrTerminal)
		}
		out = append(out, inject.Secret{Name: k, Hosts: bound[k], Value: v})
	}
	return out, nil
}

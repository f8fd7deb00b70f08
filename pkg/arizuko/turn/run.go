package turn

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/gated"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/proxy/inject"
	"github.com/crackbox/crackbox/pkg/router"
	"github.com/crackbox/crackbox/pkg/secrets"
)

// OutcomeNoSecrets is the outcome of a turn that failed because the folder's
// secrets did not open; such turns run again at the next daemon start.
const OutcomeNoSecrets = "secrets-unavailable"

// OutcomeNoReply is the outcome of a turn whose agent exited 0 without
// answering the chat it was asked in; OutcomeStdoutReply of one whose
// folder delivered the agent's stdout as the reply instead.
const (
	OutcomeNoReply     = "no reply"
	OutcomeStdoutReply = "ok, replied with its stdout"
)

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
		res, a, err := q.attempt(ctx, t)
		out := a.tail.Bytes()
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
			if perr := q.o.Store.PutTurnOutput(ctx, t.ID, store.TurnOutput{Attempt: t.Attempts, ExitCode: &exit, Output: string(out)}); perr != nil {
				log.Error("keep turn output", "err", perr)
			}
		}
		log.Info("turn attempt ended", "attempt", t.Attempts, "exit", exit, "replied", replied, "took", time.Since(start).Round(time.Millisecond), "err", err)
		unanswered := err == nil && exit == 0 && !replied && a.engage
		if unanswered {
			handed, herr := q.o.Store.HandedOff(ctx, t.Folder, start.UnixMilli())
			if herr != nil {
				log.Error("turn hand-off", "err", herr)
			}
			unanswered = !handed
		}
		stdoutReply := false
		if unanswered && a.answer != nil {
			stdoutReply = q.answerFromStdout(ctx, t, a.answer, log)
			unanswered, replied = !stdoutReply, stdoutReply
		}
		switch {
		case unanswered:
			// The agent ended well but the chat heard nothing: tell it, and
			// mark the turn so the CLI and `turns ls` show it. A retry would
			// most likely end the same way.
			end.Status, end.Outcome, end.Override = store.TurnDone, OutcomeNoReply, true
			end.Error = fmt.Sprintf("the agent ended its turn without calling a reply tool; its output is in `arizuko turns show %d`, "+
				"and `arizuko folder set %s --stdout-reply` delivers its stdout as the reply", t.ID, t.Folder)
			q.notify(ctx, t, fmt.Sprintf("arizuko: %s ended its turn without answering; the operator sees its output in `arizuko turns show %d`", t.Folder, t.ID), log)
		case stdoutReply:
			end.Status, end.Outcome = store.TurnDone, OutcomeStdoutReply
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

// attemptOut is what an attempt leaves besides its result: the tail of the
// agent's output, its stdout alone when the folder may deliver it as the
// reply, and whether the turn's chat expects an answer.
type attemptOut struct {
	tail   *OutputTail
	answer *OutputTail // nil unless the folder has StdoutReply
	engage bool
}

// attempt runs the agent once.
func (q *Queue) attempt(ctx context.Context, t store.Turn) (Result, *attemptOut, error) {
	a := &attemptOut{tail: &OutputTail{}}
	f, err := q.o.Store.GetFolder(ctx, t.Folder)
	if err != nil {
		return Result{}, a, fmt.Errorf("%w: %w", err, ErrTerminal)
	}
	if len(f.AgentCommand) == 0 {
		return Result{}, a, fmt.Errorf("%s: %w; set one with `arizuko folder add %s --agent CMD`", t.Folder, ErrNoAgent, t.Folder)
	}
	sess, err := q.o.Store.EnsureSession(ctx, t.Folder, t.Topic, gated.NewSessionID())
	if err != nil {
		return Result{}, a, err
	}
	msgs, err := q.o.Store.TurnMessages(ctx, t)
	if err != nil {
		return Result{}, a, err
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
		return Result{}, a, err
	}
	allowList, err := q.o.Control.EffectiveAllowlist(ctx, t.Folder)
	if err != nil {
		return Result{}, a, err
	}
	env, inj, err := q.env(ctx, t, f.AgentEnv, sess.SessionID, chat)
	if err != nil {
		return Result{}, a, err
	}
	// The guest gets the folder's flat home, never a directory of the folder
	// tree, so no other folder's home lies inside what this guest can write.
	home, err := folder.EnsureHome(q.o.DataDir, t.Folder)
	if err != nil {
		return Result{}, a, fmt.Errorf("%w: %w", err, ErrTerminal)
	}
	// The socket is bound before the guest starts, so the agent finds it at once.
	gt := gated.Turn{Folder: t.Folder, Topic: t.Topic, TurnID: t.ID, Depth: t.Depth, ChatJID: chat, ReplyTo: replyTo, Engage: engage}
	ln, err := q.o.Gated.Listen(ctx, gt)
	if err != nil {
		return Result{}, a, err
	}
	defer ln.Close()
	if err := q.o.Store.StartTurn(ctx, t.ID, sess.SessionID); err != nil {
		return Result{}, a, err
	}
	a.engage = engage
	job := Job{
		Turn: t, Argv: f.AgentCommand, Env: env, Secrets: inj, Prompt: prompt, HostHome: home, GuestHome: q.o.GuestHome,
		Allow: allowList, Socket: ln.Path(), MCPConn: ln.Bridge(), MemoryMiB: f.GuestMemoryMiB, CPUs: f.GuestCPUs, Stdout: a.tail, MCP: gt,
	}
	if f.StdoutReply {
		a.answer = &OutputTail{Max: gated.MaxText}
		job.Answer = a.answer
	}
	res, err := q.o.Runner.Run(ctx, job)
	res.ran = true
	return res, a, err
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
func (q *Queue) env(ctx context.Context, t store.Turn, folderEnv []string, session, chat string) ([]string, []inject.Secret, error) {
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
		return mergeEnv(folderEnv, env), nil, nil // no key ring: no secrets to pass
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
	return mergeEnv(folderEnv, env, slices.Collect(maps.Keys(bound))...), inj, nil
}

// mergeEnv puts the folder's own settings first and drops those whose key
// the host sets itself, so no folder setting replaces the turn's identity, a
// secret or an injection placeholder (the injected names).
func mergeEnv(folderEnv, host []string, injected ...string) []string {
	set := map[string]bool{}
	for _, k := range injected {
		set[k] = true
	}
	for _, kv := range host {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	out := make([]string, 0, len(folderEnv)+len(host))
	for _, kv := range folderEnv {
		if k, _, _ := strings.Cut(kv, "="); !set[k] {
			out = append(out, kv)
		}
	}
	return append(out, host...)
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

package turn

import (
	"context"
	"log/slog"
	"strings"
	"sync"

	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// OutputTail keeps the last Max bytes an agent writes (0 = store.MaxTurnOutput),
// for the turn's output record, a failed turn's error or a runner's outcome.
// The jail copies stdout and stderr into it from two goroutines, hence the lock.
type OutputTail struct {
	Max int

	mu  sync.Mutex
	buf []byte
	cut bool // bytes were dropped from the front
}

func (b *OutputTail) limit() int {
	if b.Max > 0 {
		return b.Max
	}
	return store.MaxTurnOutput
}

func (b *OutputTail) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if n := b.limit(); len(b.buf) > 4*n {
		b.buf = append([]byte(nil), b.buf[len(b.buf)-n:]...)
		b.cut = true
	}
	return len(p), nil
}

// Bytes returns a copy of the last Max bytes written.
func (b *OutputTail) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf[max(0, len(b.buf)-b.limit()):]...)
}

// Cut reports whether more than Max bytes were written, so Bytes lost the start.
func (b *OutputTail) Cut() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cut || len(b.buf) > b.limit()
}

// answerFromStdout delivers the agent's stdout as the reply to the turn's
// chat, for a folder that opted in, when the agent called no reply tool. It
// holds to the reply tool's grant, so a folder denied mcp:reply gets nothing
// through here either. It reports whether a reply was stored.
func (q *Queue) answerFromStdout(ctx context.Context, t store.Turn, stdout *OutputTail, log *slog.Logger) bool {
	text := strings.TrimSpace(strings.ToValidUTF8(string(stdout.Bytes()), "\uFFFD"))
	if text == "" {
		return false
	}
	if stdout.Cut() {
		text = "…" + text
	}
	if err := q.o.Gate.Check(ctx, "folder:"+t.Folder, "mcp:reply", t.Folder); err != nil {
		log.Info("stdout not delivered: the folder may not reply", "err", err)
		return false
	}
	msgs, err := q.o.Store.TurnMessages(ctx, t)
	if err != nil || len(msgs) == 0 {
		log.Error("stdout reply: no chat to answer", "err", err)
		return false
	}
	last := msgs[len(msgs)-1]
	if _, err := q.o.Store.PutOutbound(ctx, store.Outbound{ChatJID: last.ChatJID, Folder: t.Folder, Topic: t.Topic,
		Text: text, ReplyTo: last.PlatformID, TurnID: t.ID}); err != nil {
		log.Error("stdout reply", "err", err)
		return false
	}
	if q.o.OnOutbound != nil {
		q.o.OnOutbound()
	}
	log.Info("agent stdout delivered as the reply", "bytes", len(text))
	return true
}

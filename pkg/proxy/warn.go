package proxy

import (
	"sync"
	"time"

	"github.com/crackbox/crackbox/internal/lograte"
)

// maxExfilClients bounds the clients whose exfiltration warnings are limited apart.
const maxExfilClients = 1024

// exfilWarnings rate limits the secret-exfiltration warning per client, so one
// guest's flood does not hide another's first attempt.
type exfilWarnings struct {
	mu  sync.Mutex
	per map[string]*lograte.Every
}

func (w *exfilWarnings) of(client string) *lograte.Every {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.per[client]; ok {
		return e
	}
	if w.per == nil || len(w.per) >= maxExfilClients {
		w.per = map[string]*lograte.Every{}
	}
	e := &lograte.Every{Interval: 10 * time.Second}
	w.per[client] = e
	return e
}

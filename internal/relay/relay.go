// Package relay copies bytes both ways between two connections, with the end-of-stream
// semantics each caller chooses on purpose.
package relay

import (
	"context"
	"io"
	"sync"
)

// Mode says what one side's end of stream does to the other direction.
type Mode int

const (
	// HalfClose passes each direction's EOF on as a half-close of the other side's
	// write end, so a peer that shuts its sending half still reads the answer. Copy
	// returns once both directions have ended.
	HalfClose Mode = iota
	// CloseBoth closes both sides on the first EOF or error in either direction, for
	// protocols with no half-close where one side ending means the session is over.
	CloseBoth
)

// Copy relays between a and b until the mode says the session is over or ctx ends,
// then closes both and returns after both copying goroutines have stopped. A side
// without CloseWrite is fully closed where HalfClose would half-close it.
func Copy(ctx context.Context, a, b io.ReadWriteCloser, mode Mode) {
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			a.Close()
			b.Close()
		})
	}
	done := make(chan struct{}, 2)
	pump := func(dst, src io.ReadWriteCloser) {
		_, _ = io.Copy(dst, src)
		if mode == HalfClose {
			closeWrite(dst)
		} else {
			closeBoth()
		}
		done <- struct{}{}
	}
	go pump(a, b)
	go pump(b, a)
	for left := 2; left > 0; left-- {
		select {
		case <-done:
		case <-ctx.Done():
			closeBoth()
			<-done
		}
	}
	closeBoth()
}

// closeWrite half-closes c where it can; a yamux stream's Close is already a half-close.
func closeWrite(c io.ReadWriteCloser) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

package guest

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/crackbox/crackbox/internal/relay"
)

// outputLinger bounds how long output is still read after the command exited while no
// new bytes arrive. It only matters when a background process keeps the pipe open; a
// command whose writers are all gone reaches EOF at once.
const outputLinger = 500 * time.Millisecond

// copyOutput copies the command's output to dst until EOF, or until the command has
// exited and the source stayed idle for outputLinger. If dst fails (the host stopped
// reading) the rest is drained and dropped, so the command never blocks on a full pipe;
// the first write error is returned.
func copyOutput(dst io.Writer, src *os.File, exited <-chan struct{}) error {
	go func() {
		<-exited
		_ = src.SetReadDeadline(time.Now().Add(outputLinger))
	}()
	var werr error
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if werr == nil {
				_, werr = dst.Write(buf[:n])
			}
			select {
			case <-exited:
				_ = src.SetReadDeadline(time.Now().Add(outputLinger))
			default:
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			select {
			case <-exited:
				return werr
			default: // a deadline from before the exit was noticed; keep reading
			}
		case err == io.EOF, errors.Is(err, syscall.EIO): // EIO: the pty's last slave closed
			return werr
		default:
			return err
		}
	}
}

// copyInput copies the host's stdin stream into the command and closes the command's
// end at EOF so it sees end of input.
func copyInput(dst io.WriteCloser, src io.Reader, closeAtEOF bool) {
	_, _ = io.Copy(dst, src)
	if closeAtEOF {
		dst.Close()
	}
}

// splice joins a local connection to a control stream, passing half-closes through so
// a forwarded client that shuts its sending half still reads the reply.
func splice(local net.Conn, remote net.Conn) {
	relay.Copy(context.Background(), local, remote, relay.HalfClose)
}

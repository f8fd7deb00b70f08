package guest

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"github.com/hashicorp/yamux"

	"github.com/crackbox/crackbox/pkg/jail/control"
)

// forwarder carries each connection accepted on a guest listener to the host as a
// stream of one kind. The host decides where (and whether) the stream goes.
type forwarder struct {
	ln   net.Listener
	sess *yamux.Session
	kind string
	log  *slog.Logger
}

func listenProxy(sess *yamux.Session, addr string, log *slog.Logger) (*forwarder, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("guest: proxy listener on %q: %w", addr, err)
	}
	f := &forwarder{ln: ln, sess: sess, kind: control.KindProxy, log: log}
	go f.serve()
	return f, nil
}

// listenMCP listens on a unix socket any guest user may connect to: the command's uid is
// the one meant to use it.
func listenMCP(sess *yamux.Session, path string, log *slog.Logger) (*forwarder, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("guest: mcp socket %q must be an absolute guest path", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("guest: mcp socket dir: %w", err)
	}
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("guest: mcp socket %q: %w", path, err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("guest: mcp socket %q: %w", path, err)
	}
	f := &forwarder{ln: ln, sess: sess, kind: control.KindMCP, log: log}
	go f.serve()
	return f, nil
}

func (f *forwarder) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				f.log.Debug("forward accept", "kind", f.kind, "err", err)
			}
			return
		}
		go func() {
			s, err := control.Open(f.sess, f.kind)
			if err != nil {
				f.log.Debug("forward open", "kind", f.kind, "err", err)
				c.Close()
				return
			}
			splice(c, s)
		}()
	}
}

func (f *forwarder) close() {
	if f != nil {
		f.ln.Close()
	}
}

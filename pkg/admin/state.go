package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/crackbox/crackbox/pkg/proxy"
)

// stateFile is the on-disk shape of the registry.
type stateFile struct {
	Version int          `json:"version"`
	Clients []ClientJSON `json:"clients"`
}

// Apply runs fn on the registry and then saves the state file, as one step
// with respect to API requests. Callers that change the registry outside the
// API (the configured client on reload) use it.
func (s *Server) Apply(fn func(*proxy.Registry) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := fn(s.opts.Registry); err != nil {
		return err
	}
	return s.saveLocked()
}

func (s *Server) saveLocked() error {
	if s.opts.StateFile == "" {
		return nil
	}
	st := stateFile{Version: 1, Clients: []ClientJSON{}}
	for _, c := range s.opts.Registry.List() {
		st.Clients = append(st.Clients, clientJSON(c))
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(s.opts.StateFile, append(data, '\n'))
}

// loadState registers the saved clients. A corrupt file is not fatal: the
// daemon starts empty and says which file it ignored.
func (s *Server) loadState() {
	path := s.opts.StateFile
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		s.log.Warn("state file unreadable, starting empty", "file", path, "err", err)
		return
	}
	clients, err := parseState(data)
	if err != nil {
		s.log.Warn("state file corrupt, starting empty", "file", path, "err", err)
		return
	}
	for _, c := range clients {
		err := s.opts.Registry.Register(c)
		if err == nil {
			continue
		}
		// The configured client is saved like any other; finding it again
		// under the same ID is expected, not worth a warning.
		if cur, ok := s.opts.Registry.Lookup(c.IP); ok && cur.ID == c.ID {
			continue
		}
		s.log.Warn("saved client skipped", "file", path, "ip", c.IP, "id", c.ID, "err", err)
	}
	s.log.Info("state loaded", "file", path, "clients", len(clients))
}

// parseState validates the whole file before anything is registered, so a
// file that is half bad does not yield half a registry.
func parseState(data []byte) ([]proxy.Client, error) {
	var st stateFile
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, err
	}
	if st.Version != 1 {
		return nil, fmt.Errorf("unsupported state version %d", st.Version)
	}
	out := make([]proxy.Client, 0, len(st.Clients))
	for i, c := range st.Clients {
		pc, err := c.Client()
		if err != nil {
			return nil, fmt.Errorf("client %d: %w", i, err)
		}
		out = append(out, pc)
	}
	return out, nil
}

// writeAtomic replaces path with data so a crash leaves the old or the new
// file, never a torn one: temp file, fsync, rename, fsync of the directory.
func writeAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if err = f.Chmod(0o600); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

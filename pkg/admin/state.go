package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/crackbox/crackbox/pkg/proxy"
	"github.com/crackbox/crackbox/pkg/secrets"
)

// stateFile is the on-disk shape of the registry.
type stateFile struct {
	Version int           `json:"version"`
	Clients []savedClient `json:"clients"`
}

// savedClient is a client in the state file. Its secrets, placeholders and
// CA are one sealed blob; only their names are in clear.
type savedClient struct {
	IP          string   `json:"ip"`
	ID          string   `json:"id"`
	Allowlist   []string `json:"allowlist"`
	SecretNames []string `json:"secret_names,omitempty"`
	Sealed      []byte   `json:"sealed_secrets,omitempty"`
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
	st := stateFile{Version: 1, Clients: []savedClient{}}
	for _, c := range s.opts.Registry.List() {
		sealed, err := s.sealSecrets(c)
		if errors.Is(err, ErrNoStateKey) {
			// Saved without its secrets it would come back as a client whose
			// bound hosts are plain tunnels; it registers again instead.
			continue
		}
		if err != nil {
			return fmt.Errorf("seal secrets of client %q: %w", c.ID, err)
		}
		st.Clients = append(st.Clients, savedClient{
			IP: c.IP.String(), ID: c.ID, Allowlist: c.Allow.Entries(),
			SecretNames: c.Secrets.Names(), Sealed: sealed,
		})
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(s.opts.StateFile, append(data, '\n'))
}

// loadState registers the saved clients. A corrupt file is not fatal: the
// daemon starts empty and says which file it ignored. Sealed secrets that
// do not open are fatal: starting without them would overwrite them.
func (s *Server) loadState() error {
	path := s.opts.StateFile
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		s.log.Warn("state file unreadable, starting empty", "file", path, "err", err)
		return nil
	}
	clients, stale, err := parseState(data, s.opts.StateKey)
	if errors.Is(err, ErrNoStateKey) || errors.Is(err, ErrStateKey) {
		return fmt.Errorf("state file %s: %w: start with the key it was sealed with (%s or proxy.state_key_file), or remove the file to start without its clients", path, err, EnvStateKey)
	}
	if err != nil {
		s.log.Warn("state file corrupt, starting empty", "file", path, "err", err)
		return nil
	}
	for _, err := range stale {
		s.log.Warn("saved client skipped: it must register again", "file", path, "err", err)
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
	return nil
}

// parseState validates the whole file before anything is registered, so a
// file that is half bad does not yield half a registry. A client whose
// secrets open but are of no more use (their CA expired) is left out and
// named in stale.
func parseState(data []byte, key *secrets.Ring) (_ []proxy.Client, stale []error, _ error) {
	var st stateFile
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, nil, err
	}
	if st.Version != 1 {
		return nil, nil, fmt.Errorf("unsupported state version %d", st.Version)
	}
	out := make([]proxy.Client, 0, len(st.Clients))
	for i, c := range st.Clients {
		cl, err := ClientJSON{IP: c.IP, ID: c.ID, Allowlist: c.Allowlist}.Client()
		if err != nil {
			return nil, nil, fmt.Errorf("client %d: %w", i, err)
		}
		if len(c.Sealed) > 0 {
			cl.Secrets, err = openSecrets(key, cl.IP, c.ID, c.Sealed)
			if errors.Is(err, errSecretsStale) {
				stale = append(stale, fmt.Errorf("client %q (%s): %w", c.ID, c.IP, err))
				continue
			}
			if err != nil {
				return nil, nil, fmt.Errorf("client %d (%s): %w", i, c.IP, err)
			}
		}
		out = append(out, cl)
	}
	return out, stale, nil
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

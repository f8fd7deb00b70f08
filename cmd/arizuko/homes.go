package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/crackbox/crackbox/pkg/arizuko/api"
	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/home"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/config"
)

// HomeConfig is [fleet.home]: where a folder's home is control-plane state.
type HomeConfig struct {
	// MaxBytes and MaxFiles bound each folder's home (defaults 1 GiB, 100000).
	MaxBytes int64 `toml:"max_bytes"`
	MaxFiles int   `toml:"max_files"`
	// KeepVersions and KeepAge: a version is kept while it is one of the
	// newest KeepVersions or younger than KeepAge (defaults 50, 720h).
	KeepVersions int             `toml:"keep_versions"`
	KeepAge      config.Duration `toml:"keep_age"`
	// KeepFailed lists folders (each with its subtree) whose terminally
	// failed turns still commit their home's changes.
	KeepFailed []string `toml:"keep_failed"`
}

// Defaults of [fleet.home].
const (
	defaultHomeMaxBytes = 1 << 30
	defaultHomeMaxFiles = 100000
)

func (hc HomeConfig) validate() error {
	if hc.MaxBytes < 0 || hc.MaxFiles < 0 || hc.KeepVersions < 0 {
		return fmt.Errorf("fleet.home: max_bytes, max_files and keep_versions must not be negative")
	}
	for _, f := range hc.KeepFailed {
		if err := folder.Validate(f); err != nil {
			return fmt.Errorf("fleet.home.keep_failed: %w", err)
		}
	}
	return nil
}

func (hc HomeConfig) limits(string) home.Limits {
	l := home.Limits{MaxBytes: hc.MaxBytes, MaxFiles: hc.MaxFiles}
	if l.MaxBytes == 0 {
		l.MaxBytes = defaultHomeMaxBytes
	}
	if l.MaxFiles == 0 {
		l.MaxFiles = defaultHomeMaxFiles
	}
	return l
}

func (hc HomeConfig) keepFailed(f string) bool {
	for _, k := range hc.KeepFailed {
		if f == k || strings.HasPrefix(f, k+"/") {
			return true
		}
	}
	return false
}

func (hc HomeConfig) retention() home.Retention {
	return home.Retention{Keep: hc.KeepVersions, Age: hc.KeepAge.Duration}
}

// errNoHistory answers history requests on a single host, whose home is a
// plain directory.
var errNoHistory = fmt.Errorf("home history is kept in fleet mode only (arizuko serve --nats): %w", service.ErrInvalid)

// homeKeeper is where homes live: the fleet's store, or this host's
// <data>/homes directories.
type homeKeeper interface {
	Log(ctx context.Context, folder string) (home.Log, error)
	Manifest(ctx context.Context, folder string, version int) (home.Manifest, error)
	Restore(ctx context.Context, folder string, version int) (home.Version, error)
	// Push makes the folder's home the tar stream r.
	Push(ctx context.Context, folder string, r io.Reader) (home.Version, error)
	// Pull writes the folder's latest home as a tar stream.
	Pull(ctx context.Context, folder string, w io.Writer) error
}

// fleetHomes keeps homes in the fleet's JetStream store.
type fleetHomes struct {
	s   *home.Store
	lim func(string) home.Limits
}

func (h fleetHomes) Log(ctx context.Context, f string) (home.Log, error) { return h.s.Log(ctx, f) }

func (h fleetHomes) Manifest(ctx context.Context, f string, n int) (home.Manifest, error) {
	l, err := h.s.Log(ctx, f)
	if err != nil {
		return home.Manifest{}, err
	}
	if n == 0 {
		v, ok := l.Latest()
		if !ok {
			return home.Manifest{}, nil
		}
		return h.s.Manifest(ctx, v)
	}
	v, err := l.Find(n)
	if err != nil {
		return home.Manifest{}, fmt.Errorf("%s: %w: %w", f, err, service.ErrNotFound)
	}
	return h.s.Manifest(ctx, v)
}

func (h fleetHomes) Restore(ctx context.Context, f string, n int) (home.Version, error) {
	v, err := h.s.Restore(ctx, f, n)
	if errors.Is(err, home.ErrNoVersion) {
		err = fmt.Errorf("%w: %w", err, service.ErrNotFound)
	}
	return v, err
}

func (h fleetHomes) Push(ctx context.Context, f string, r io.Reader) (home.Version, error) {
	m, err := home.FromTar(r, h.lim(f), func(_ string, b []byte) error { _, err := h.s.PutChunk(ctx, b); return err })
	if err != nil {
		return home.Version{}, fmt.Errorf("push to %s: %w: %w", f, err, service.ErrInvalid)
	}
	return h.s.Commit(ctx, f, m, home.Version{Source: "push"})
}

func (h fleetHomes) Pull(ctx context.Context, f string, w io.Writer) error {
	m, err := h.Manifest(ctx, f, 0)
	if err != nil {
		return err
	}
	return home.WriteTar(w, m, func(c string) ([]byte, error) { return h.s.Chunk(ctx, c) })
}

// localHomes is a single host: the home is <data>/homes/<folder>, no history.
type localHomes struct {
	data string
	lim  func(string) home.Limits
	mu   sync.Mutex
}

func (h *localHomes) Log(context.Context, string) (home.Log, error) { return home.Log{}, errNoHistory }

func (h *localHomes) Manifest(context.Context, string, int) (home.Manifest, error) {
	return home.Manifest{}, errNoHistory
}

func (h *localHomes) Restore(context.Context, string, int) (home.Version, error) {
	return home.Version{}, errNoHistory
}

func (h *localHomes) Push(_ context.Context, f string, r io.Reader) (home.Version, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	chunks := map[string][]byte{}
	m, err := home.FromTar(r, h.lim(f), func(c string, b []byte) error { chunks[c] = append([]byte(nil), b...); return nil })
	if err != nil {
		return home.Version{}, fmt.Errorf("push to %s: %w: %w", f, err, service.ErrInvalid)
	}
	dir, err := folder.EnsureHome(h.data, f)
	if err != nil {
		return home.Version{}, err
	}
	if _, _, err := home.Sync(dir, nil, m, func(c string) ([]byte, error) { return chunks[c], nil }); err != nil {
		return home.Version{}, err
	}
	return home.Version{Source: "push", Hash: m.Hash(), Time: time.Now().UTC(), Size: m.Size(), Files: len(m.Entries)}, nil
}

func (h *localHomes) Pull(_ context.Context, f string, w io.Writer) error {
	dir, err := folder.EnsureHome(h.data, f)
	if err != nil {
		return err
	}
	return home.TarDir(w, dir)
}

// HomeDiff is what changed in a folder's home from version A to B.
type HomeDiff struct {
	Folder  string        `json:"folder"`
	A       int           `json:"a"`
	B       int           `json:"b"`
	Changes []home.Change `json:"changes"`
}

// HomeRestoreIn asks for a version to be made the newest again.
type HomeRestoreIn struct {
	Folder  string `json:"folder"`
	Version int    `json:"version"`
}

// registerHomes serves the operator's home routes: every one checks the
// caller may read (home:read) or change (home:write) that folder.
func registerHomes(s *api.Server, l *service.Local, k homeKeeper) {
	check := func(r *http.Request, action, f string) error {
		if err := folder.Validate(f); err != nil {
			return fmt.Errorf("folder %q: %w: %w", f, err, service.ErrInvalid)
		}
		return l.Gate().Check(r.Context(), service.Principal(r.Context()), action, f)
	}
	s.Handle("/v1/home/log", map[string]api.HandlerFunc{"GET": func(w http.ResponseWriter, r *http.Request) error {
		f := r.URL.Query().Get("folder")
		if err := check(r, "home:read", f); err != nil {
			return err
		}
		lg, err := k.Log(r.Context(), f)
		if err != nil {
			return err
		}
		if lg.Versions == nil {
			lg.Versions = []home.Version{}
		}
		return api.WriteJSON(w, http.StatusOK, lg.Versions)
	}})
	s.Handle("/v1/home/diff", map[string]api.HandlerFunc{"GET": func(w http.ResponseWriter, r *http.Request) error {
		q := r.URL.Query()
		f := q.Get("folder")
		if err := check(r, "home:read", f); err != nil {
			return err
		}
		a, aerr := strconv.Atoi(q.Get("a"))
		b, berr := strconv.Atoi(q.Get("b"))
		if aerr != nil || berr != nil || a < 0 || b < 0 {
			return fmt.Errorf("a=%q b=%q: want two version numbers (0 is the empty home): %w", q.Get("a"), q.Get("b"), service.ErrInvalid)
		}
		var ms [2]home.Manifest
		for i, n := range []int{a, b} {
			if n == 0 {
				continue
			}
			m, err := k.Manifest(r.Context(), f, n)
			if err != nil {
				return err
			}
			ms[i] = m
		}
		ch := home.Diff(ms[0], ms[1])
		if ch == nil {
			ch = []home.Change{}
		}
		return api.WriteJSON(w, http.StatusOK, HomeDiff{Folder: f, A: a, B: b, Changes: ch})
	}})
	s.Handle("/v1/home/restore", map[string]api.HandlerFunc{"POST": func(w http.ResponseWriter, r *http.Request) error {
		var in HomeRestoreIn
		if err := api.Decode(w, r, &in); err != nil {
			return err
		}
		if err := check(r, "home:write", in.Folder); err != nil {
			return err
		}
		v, err := k.Restore(r.Context(), in.Folder, in.Version)
		if err != nil {
			return err
		}
		return api.WriteJSON(w, http.StatusOK, v)
	}})
	s.Handle("/v1/home/files", map[string]api.HandlerFunc{
		"GET": func(w http.ResponseWriter, r *http.Request) error {
			f := r.URL.Query().Get("folder")
			if err := check(r, "home:read", f); err != nil {
				return err
			}
			if _, err := l.Store().GetFolder(r.Context(), f); err != nil {
				return err
			}
			w.Header().Set("Content-Type", "application/x-tar")
			if err := k.Pull(r.Context(), f, w); err != nil {
				return err
			}
			return nil
		},
		"PUT": func(w http.ResponseWriter, r *http.Request) error {
			f := r.URL.Query().Get("folder")
			if err := check(r, "home:write", f); err != nil {
				return err
			}
			if _, err := l.Store().GetFolder(r.Context(), f); err != nil {
				return err
			}
			v, err := k.Push(r.Context(), f, r.Body)
			if err != nil {
				return err
			}
			return api.WriteJSON(w, http.StatusOK, v)
		},
	})
}

// importLocalHomes commits, as each folder's first version, the home a
// control plane kept on its own disk before it ran with --nats: an operator
// who followed the single-host steps keeps the agent they copied there.
// Folders that already have a version are left alone.
func importLocalHomes(ctx context.Context, l *service.Local, s *home.Store, lim func(string) home.Limits) error {
	fs, err := l.Store().ListFolders(ctx)
	if err != nil {
		return err
	}
	for _, f := range fs {
		lg, err := s.Log(ctx, f.Path)
		if err != nil {
			return err
		}
		if len(lg.Versions) > 0 {
			continue
		}
		dir, err := folder.Home(l.DataDir(), f.Path)
		if err != nil {
			return err
		}
		if es, err := os.ReadDir(dir); err != nil || len(es) == 0 {
			continue
		}
		m, _, _, err := home.Scan(dir, nil, lim(f.Path), func(_ string, b []byte) error { _, err := s.PutChunk(ctx, b); return err })
		if err != nil {
			return fmt.Errorf("import the home of %s: %w", f.Path, err)
		}
		v, err := s.Commit(ctx, f.Path, m, home.Version{Source: "import"})
		if err != nil {
			return err
		}
		slog.Info("home imported into the fleet's store", "folder", f.Path, "version", v.N, "files", v.Files, "size", v.Size, "from", dir)
	}
	return nil
}

// collectHomes removes, every hour until ctx ends, the chunks no kept
// version of any folder names any more.
func collectHomes(ctx context.Context, s *home.Store) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := s.Collect(ctx, home.DefaultCollectGrace)
		if err != nil && ctx.Err() == nil {
			slog.Warn("home chunks not collected", "err", err)
		} else if n > 0 {
			slog.Info("home chunks collected", "removed", n)
		}
	}
}

// Package runrec keeps a record of each `crackbox run`: a directory per run
// holding manifest.json (what ran, with which allowlist and network, how it
// ended, how long it took) and decisions.jsonl (the proxy's decision log).
// Only the newest records are kept. `crackbox runs ls|show` reads them.
package runrec

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/crackbox/crackbox/internal/buildinfo"
	"github.com/crackbox/crackbox/internal/logfile"
	"github.com/crackbox/crackbox/internal/proc"
)

// DefaultKeep is how many records Store keeps when Keep is 0.
const DefaultKeep = 50

// File names inside a record directory.
const (
	ManifestFile  = "manifest.json"
	DecisionsFile = "decisions.jsonl"
)

// DecisionsMax caps decisions.jsonl: past it the log rotates once to
// decisions.jsonl.1, so a guest that makes requests without end costs a
// record at most twice this on disk and the newest decisions are kept.
const DecisionsMax = 8 << 20

// Sentinels callers branch on.
var (
	ErrNotFound  = errors.New("run record not found")
	ErrAmbiguous = errors.New("run id prefix matches several records")
)

// Status values.
const (
	StatusRunning = "running"
	StatusExited  = "exited"
	StatusFailed  = "failed" // crackbox itself failed: boot, crash, timeout
	StatusLost    = "lost"   // still "running" on disk, but its process is gone (killed)
)

// Manifest describes one run. Fields after Status are filled by Finish.
type Manifest struct {
	ID       string    `json:"id"`
	PID      int       `json:"pid"`
	PIDStart uint64    `json:"pid_start,omitempty"` // /proc start time of PID, tells pid reuse apart
	Argv     []string  `json:"argv"`
	Workdir  string    `json:"workdir,omitempty"`
	Allow    []string  `json:"allow"`
	Learn    bool      `json:"learn,omitempty"`
	Net      string    `json:"net"`
	Accel    string    `json:"accel,omitempty"`
	Started  time.Time `json:"started"`
	Status   string    `json:"status"`

	Ended   time.Time `json:"ended,omitzero"`
	BootMS  int64     `json:"boot_ms,omitempty"`
	RunMS   int64     `json:"run_ms,omitempty"`
	Exit    int       `json:"exit"`
	Signal  int       `json:"signal,omitempty"`
	Error   string    `json:"error,omitempty"`
	Blocked string    `json:"blocked,omitempty"` // the blocked-egress summary line
	Learned []string  `json:"learned,omitempty"` // --learn: attempted hosts
	RunDir  string    `json:"run_dir,omitempty"` // the jail's run dir, when kept
	// Build is the crackbox that made the record; Create fills it in.
	Build     buildinfo.Info `json:"build,omitzero"`
	recordDir string
}

// Dir is the record's directory.
func (m Manifest) Dir() string { return m.recordDir }

// Duration is the wall time from start to end (or to now while running).
func (m Manifest) Duration() time.Duration {
	if m.Ended.IsZero() {
		return time.Since(m.Started)
	}
	return m.Ended.Sub(m.Started)
}

// Store is a directory of run records.
type Store struct {
	Dir  string
	Keep int // records kept by Prune; 0 = DefaultKeep
}

// DefaultDir is /var/lib/crackbox/runs for root, else
// $XDG_STATE_HOME/crackbox/runs (~/.local/state/crackbox/runs).
func DefaultDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/crackbox/runs"
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "crackbox", "runs")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "crackbox-runs")
	}
	return filepath.Join(home, ".local", "state", "crackbox", "runs")
}

// NewID returns a run id that sorts by start time and is unique on the host.
func NewID(now time.Time) string {
	b := make([]byte, 3)
	rand.Read(b)
	return now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b)
}

// Record is an open run record.
type Record struct {
	store *Store
	mu    sync.Mutex
	m     Manifest
	log   *logfile.File
}

// Create starts a record for m (ID, PID, Started and Status are filled in
// when empty) and opens its decision log.
func (s *Store) Create(m Manifest) (*Record, error) {
	if m.Started.IsZero() {
		m.Started = time.Now()
	}
	if m.ID == "" {
		m.ID = NewID(m.Started)
	}
	if m.PID == 0 {
		m.PID = os.Getpid()
		m.PIDStart, _ = proc.Start(m.PID)
	}
	m.Status = StatusRunning
	if m.Build.Module == "" {
		m.Build = buildinfo.Get()
	}
	if m.Allow == nil {
		m.Allow = []string{}
	}
	if strings.ContainsAny(m.ID, "/\\") || m.ID == "." || m.ID == ".." {
		return nil, fmt.Errorf("runrec: run id %q: must not contain path separators", m.ID)
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("runrec: records dir: %w", err)
	}
	m.recordDir = filepath.Join(s.Dir, m.ID)
	if err := os.Mkdir(m.recordDir, 0o700); err != nil {
		return nil, fmt.Errorf("runrec: create record %s: %w", m.ID, err)
	}
	log, err := logfile.Open(filepath.Join(m.recordDir, DecisionsFile), DecisionsMax, 0o600)
	if err != nil {
		return nil, fmt.Errorf("runrec: decision log: %w", err)
	}
	r := &Record{store: s, m: m, log: log}
	if err := writeManifest(m); err != nil {
		log.Close()
		return nil, err
	}
	return r, nil
}

// ID is the record's run id.
func (r *Record) ID() string { return r.m.ID }

// DecisionLog is where the proxy writes its JSON decision lines.
func (r *Record) DecisionLog() io.Writer { return r.log }

// Finish applies update to the manifest, marks the run ended, writes it and
// closes the decision log. It then prunes old records.
func (r *Record) Finish(update func(*Manifest)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if update != nil {
		update(&r.m)
	}
	if r.m.Ended.IsZero() {
		r.m.Ended = time.Now()
	}
	if r.m.Status == StatusRunning {
		r.m.Status = StatusExited
	}
	err := errors.Join(writeManifest(r.m), r.log.Close())
	if perr := r.store.Prune(); perr != nil {
		err = errors.Join(err, perr)
	}
	return err
}

// writeManifest replaces manifest.json atomically so readers never see half.
func writeManifest(m Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(m.recordDir, ManifestFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("runrec: write manifest: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(m.recordDir, ManifestFile)); err != nil {
		return fmt.Errorf("runrec: write manifest: %w", err)
	}
	return nil
}

func readManifest(dir string) (Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return Manifest{}, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return Manifest{}, fmt.Errorf("runrec: %s: %w", dir, err)
	}
	m.recordDir = dir
	if m.Status == StatusRunning && !processAlive(m.PID, m.PIDStart) {
		m.Status = StatusLost
	}
	return m, nil
}

// processAlive reports whether pid still runs and, when start is known, is
// the same process (not a new one that reused the pid).
func processAlive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	st, err := proc.Start(pid)
	if err != nil {
		return false
	}
	return start == 0 || st == start
}

// List returns every readable record, newest first.
func (s *Store) List() ([]Manifest, error) {
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("runrec: list %s: %w", s.Dir, err)
	}
	var out []Manifest
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		m, err := readManifest(filepath.Join(s.Dir, e.Name()))
		if err != nil {
			continue // a record being created, or not ours
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Manifest) int {
		if c := b.Started.Compare(a.Started); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return out, nil
}

// Get returns the record whose id is id or starts with it.
func (s *Store) Get(id string) (Manifest, error) {
	if id == "" {
		return Manifest{}, fmt.Errorf("runrec: empty run id: %w", ErrNotFound)
	}
	all, err := s.List()
	if err != nil {
		return Manifest{}, err
	}
	var hits []Manifest
	for _, m := range all {
		if m.ID == id {
			return m, nil
		}
		if strings.HasPrefix(m.ID, id) {
			hits = append(hits, m)
		}
	}
	switch len(hits) {
	case 0:
		return Manifest{}, fmt.Errorf("runrec: %q in %s (see crackbox runs ls): %w", id, s.Dir, ErrNotFound)
	case 1:
		return hits[0], nil
	}
	return Manifest{}, fmt.Errorf("runrec: %q matches %d runs, give more of the id: %w", id, len(hits), ErrAmbiguous)
}

// Prune removes all but the newest Keep records. Records of live runs are
// never removed and do not count against Keep.
func (s *Store) Prune() error {
	keep := s.Keep
	if keep <= 0 {
		keep = DefaultKeep
	}
	all, err := s.List()
	if err != nil {
		return err
	}
	var errs []error
	n := 0
	for _, m := range all {
		if m.Status == StatusRunning {
			continue
		}
		n++
		if n <= keep {
			continue
		}
		if err := os.RemoveAll(m.recordDir); err != nil {
			errs = append(errs, fmt.Errorf("runrec: prune %s: %w", m.ID, err))
		}
	}
	return errors.Join(errs...)
}

// Decisions opens a record's decision log.
func (m Manifest) Decisions() (io.ReadCloser, error) {
	return os.Open(filepath.Join(m.recordDir, DecisionsFile))
}

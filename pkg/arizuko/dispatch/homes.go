package dispatch

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/crackbox/crackbox/pkg/arizuko/api"
	"github.com/crackbox/crackbox/pkg/arizuko/home"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
)

// API paths of the home routes: a runner fetches and commits the home of a
// turn it holds, nothing else.
const (
	PathHomeLatest   = "/v1/fleet/home/latest"
	PathHomeChunks   = "/v1/fleet/home/chunks"
	PathHomeUpload   = "/v1/fleet/home/upload"
	PathHomeManifest = "/v1/fleet/home/manifest"
)

// Bounds of one home request.
const (
	maxChunksPerFetch = 256
	maxUploadBytes    = 64 << 20
	maxManifestBytes  = 64 << 20
)

// HomeRequest asks for a claimed turn's home: its latest manifest unless
// the runner's copy already matches Have.
type HomeRequest struct {
	Claim
	Have string `json:"have,omitempty"`
}

// HomeLatest is a folder's latest committed home; Manifest is left out when
// it is the one the runner has.
type HomeLatest struct {
	Version  int            `json:"version"`
	Hash     string         `json:"hash"`
	Manifest *home.Manifest `json:"manifest,omitempty"`
}

// ChunkRequest asks for chunks of the claimed turn's home, in order.
type ChunkRequest struct {
	Claim
	Hashes []string `json:"hashes"`
}

// HomeStats is what the runner's home step did, for the control plane's metrics.
type HomeStats struct {
	FetchedBytes int64 `json:"fetched_bytes"`
	FetchedChunk int   `json:"fetched_chunks"`
	CacheHits    int   `json:"cache_hits"`
	SentBytes    int64 `json:"sent_bytes"`
	SentChunks   int   `json:"sent_chunks"`
}

// OutcomeAck is the control plane's answer to an outcome: the home version
// it committed with it, if any.
type OutcomeAck struct {
	HomeVersion int    `json:"home_version,omitempty"`
	HomeHash    string `json:"home_hash,omitempty"`
}

// flightHome is what a claim did with its folder's home: the chunks it may
// read (the base manifest's and its own uploads) and the manifest it sent.
type flightHome struct {
	base     home.Version
	readable map[string]bool // nil until the base manifest is loaded
	uploaded map[string]bool
	pending  *home.Manifest
	done     bool
}

func (d *Dispatcher) registerHomes(s *api.Server) {
	s.Handle(PathHomeLatest, map[string]api.HandlerFunc{"POST": d.handleHomeLatest})
	s.Handle(PathHomeChunks, map[string]api.HandlerFunc{"POST": d.handleHomeChunks})
	s.Handle(PathHomeUpload, map[string]api.HandlerFunc{"POST": d.handleHomeUpload})
	s.Handle(PathHomeManifest, map[string]api.HandlerFunc{"POST": d.handleHomeManifest})
}

// Homes is the store of folder homes.
func (d *Dispatcher) Homes() *home.Store { return d.o.Setup.Homes }

// heldHome finds c's flight for runner, with its home record, or refuses.
func (d *Dispatcher) heldHome(ctx context.Context, what, runner string, c Claim) (*flight, error) {
	f, err := d.held(runner, c)
	if err != nil {
		d.refused(ctx, what, runner, c, err)
		return nil, err
	}
	if d.o.Setup.Homes == nil {
		return nil, fmt.Errorf("this control plane keeps no homes: %w", service.ErrUnavailable)
	}
	d.mu.Lock()
	if f.home == nil {
		f.home = &flightHome{uploaded: map[string]bool{}}
	}
	d.mu.Unlock()
	return f, nil
}

// readable loads the chunks f may read: the manifest of the version its
// claim started from.
func (d *Dispatcher) readable(ctx context.Context, f *flight) (map[string]bool, error) {
	d.mu.Lock()
	r, base := f.home.readable, f.home.base
	d.mu.Unlock()
	if r != nil {
		return r, nil
	}
	r = map[string]bool{}
	if base.N > 0 {
		m, err := d.o.Setup.Homes.Manifest(ctx, base)
		if err != nil {
			return nil, err
		}
		for _, c := range m.Chunks() {
			r[c] = true
		}
	}
	d.mu.Lock()
	f.home.readable = r
	d.mu.Unlock()
	return r, nil
}

func (d *Dispatcher) handleHomeLatest(w http.ResponseWriter, r *http.Request) error {
	runner, err := runnerOf(r)
	if err != nil {
		return err
	}
	var in HomeRequest
	if err := api.Decode(w, r, &in); err != nil {
		return err
	}
	f, err := d.heldHome(r.Context(), "home", runner, in.Claim)
	if err != nil {
		return apiErr(err)
	}
	l, err := d.o.Setup.Homes.Log(r.Context(), f.item.Folder)
	if err != nil {
		return err
	}
	v, ok := l.Latest()
	if !ok {
		v.Hash = home.Manifest{}.Hash()
	}
	d.mu.Lock()
	if f.home.base.Hash != v.Hash {
		f.home.base, f.home.readable = v, nil
	}
	d.mu.Unlock()
	out := HomeLatest{Version: v.N, Hash: v.Hash}
	if in.Have != v.Hash {
		m := home.Manifest{}
		if v.N > 0 {
			if m, err = d.o.Setup.Homes.Manifest(r.Context(), v); err != nil {
				return err
			}
		}
		out.Manifest = &m
	}
	return api.WriteJSON(w, http.StatusOK, out)
}

// handleHomeChunks streams the chunks asked for, each as a 4-byte length
// and its bytes; only chunks of the turn's own home are served.
func (d *Dispatcher) handleHomeChunks(w http.ResponseWriter, r *http.Request) error {
	runner, err := runnerOf(r)
	if err != nil {
		return err
	}
	var in ChunkRequest
	if err := api.Decode(w, r, &in); err != nil {
		return err
	}
	if len(in.Hashes) > maxChunksPerFetch {
		return fmt.Errorf("%d chunks asked for, at most %d a request: %w", len(in.Hashes), maxChunksPerFetch, service.ErrInvalid)
	}
	f, err := d.heldHome(r.Context(), "home", runner, in.Claim)
	if err != nil {
		return apiErr(err)
	}
	ok, err := d.readable(r.Context(), f)
	if err != nil {
		return err
	}
	d.mu.Lock()
	for _, h := range in.Hashes {
		if !ok[h] && !f.home.uploaded[h] {
			d.mu.Unlock()
			err := fmt.Errorf("chunk %q is not in folder %s's home: %w", h, f.item.Folder, ErrNotHolder)
			d.refused(r.Context(), "home", runner, in.Claim, err)
			return apiErr(err)
		}
	}
	d.mu.Unlock()
	// Reads from JetStream in parallel: a first fetch of a home of many
	// small files is one round trip per chunk.
	data := make([][]byte, len(in.Hashes))
	errs := make([]error, len(in.Hashes))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(len(in.Hashes), 16) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				data[i], errs[i] = d.o.Setup.Homes.Chunk(r.Context(), in.Hashes[i])
			}
		}()
	}
	for i := range in.Hashes {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	for _, b := range data {
		if err := writeFrame(w, b); err != nil {
			return nil
		}
	}
	return nil
}

// handleHomeUpload stores the chunks of the body (frames as handleHomeChunks
// sends them) for the claimed turn's commit.
func (d *Dispatcher) handleHomeUpload(w http.ResponseWriter, r *http.Request) error {
	runner, err := runnerOf(r)
	if err != nil {
		return err
	}
	c, err := claimHeader(r)
	if err != nil {
		return err
	}
	f, err := d.heldHome(r.Context(), "home", runner, c)
	if err != nil {
		return apiErr(err)
	}
	body := http.MaxBytesReader(w, r.Body, maxUploadBytes)
	n := 0
	for {
		b, err := readFrame(body, home.ChunkSize)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("upload: %v: %w", err, service.ErrInvalid)
		}
		if name := secretIn(f, b); name != "" {
			err := fmt.Errorf("a chunk of folder %s's home holds the value of secret %s: secrets never enter the home store: %w", f.item.Folder, name, service.ErrInvalid)
			d.refused(r.Context(), "home", runner, c, err)
			return err
		}
		h, err := d.o.Setup.Homes.PutChunk(r.Context(), b)
		if err != nil {
			return err
		}
		d.mu.Lock()
		f.home.uploaded[h] = true
		d.mu.Unlock()
		n++
	}
	return api.WriteJSON(w, http.StatusOK, map[string]int{"stored": n})
}

// handleHomeManifest takes the manifest the turn's home ended with: checked
// against the folder's limits, naming only chunks of the base version or
// uploaded under this claim. It commits with the outcome, or never.
func (d *Dispatcher) handleHomeManifest(w http.ResponseWriter, r *http.Request) error {
	runner, err := runnerOf(r)
	if err != nil {
		return err
	}
	c, err := claimHeader(r)
	if err != nil {
		return err
	}
	f, err := d.heldHome(r.Context(), "home", runner, c)
	if err != nil {
		return apiErr(err)
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxManifestBytes))
	if err != nil {
		return fmt.Errorf("manifest: %v: %w", err, service.ErrInvalid)
	}
	m, err := home.Decode(b)
	if err != nil {
		return fmt.Errorf("%w: %w", err, service.ErrInvalid)
	}
	if err := d.o.HomeLimits(f.item.Folder).Check(m); err != nil {
		return fmt.Errorf("folder %s: home of %w: %w", f.item.Folder, err, service.ErrInvalid)
	}
	ok, err := d.readable(r.Context(), f)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, h := range m.Chunks() {
		if !ok[h] && !f.home.uploaded[h] {
			return fmt.Errorf("manifest names chunk %s, neither in the turn's home nor uploaded: %w", h, service.ErrInvalid)
		}
	}
	f.home.pending = &m
	return api.WriteJSON(w, http.StatusOK, map[string]string{"hash": m.Hash()})
}

// commitHome commits the manifest o names, once, if the outcome is a
// success or the folder keeps failed turns' changes.
func (d *Dispatcher) commitHome(ctx context.Context, f *flight, o Outcome) (OutcomeAck, error) {
	d.mu.Lock()
	fh := f.home
	d.mu.Unlock()
	if o.Home == "" || fh == nil || fh.pending == nil || fh.done {
		return OutcomeAck{}, nil
	}
	if fh.pending.Hash() != o.Home {
		return OutcomeAck{}, fmt.Errorf("outcome names home %s, the manifest sent was %s: %w", o.Home, fh.pending.Hash(), service.ErrInvalid)
	}
	if (o.Error != "" || o.Exit != 0) && !(o.Terminal && d.o.KeepFailed(f.item.Folder)) {
		return OutcomeAck{}, nil
	}
	if fh.base.N > 0 && fh.base.Hash == o.Home {
		// Nothing changed: no new version, and the runner's copy is current.
		return OutcomeAck{HomeVersion: fh.base.N, HomeHash: fh.base.Hash}, nil
	}
	v, err := d.o.Setup.Homes.Commit(ctx, f.item.Folder, *fh.pending, home.Version{Source: "turn", Turn: o.Turn, Attempt: o.Attempt})
	if err != nil {
		return OutcomeAck{}, fmt.Errorf("commit home of %s: %w", f.item.Folder, err)
	}
	d.mu.Lock()
	fh.done = true
	d.mu.Unlock()
	d.metrics.committed.Add(float64(v.Size))
	d.o.Log.Info("home committed", "folder", f.item.Folder, "version", v.N, "turn", o.Turn, "attempt", o.Attempt, "size", v.Size, "files", v.Files, "changed", v.Changed)
	return OutcomeAck{HomeVersion: v.N, HomeHash: v.Hash}, nil
}

func claimHeader(r *http.Request) (Claim, error) {
	var c Claim
	if err := json.Unmarshal([]byte(r.Header.Get(ClaimHeader)), &c); err != nil {
		return c, fmt.Errorf("header %s: %v: %w", ClaimHeader, err, service.ErrInvalid)
	}
	return c, nil
}

func writeFrame(w io.Writer, b []byte) error {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(b)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

// readFrame reads one frame; io.EOF at a frame boundary ends the stream.
func readFrame(r io.Reader, max int) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if int(size) > max {
		return nil, fmt.Errorf("frame of %d bytes, at most %d", size, max)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("frame cut short: %w", err)
	}
	return b, nil
}

// secretIn names the injected secret whose value b holds, if any. Those
// values reach the runner's proxy, never the guest, so a home holding one
// is a runner that wrote it there; it is refused, not stored.
func secretIn(f *flight, b []byte) string {
	for _, sec := range f.job.Secrets {
		if len(sec.Value) >= 8 && bytes.Contains(b, []byte(sec.Value)) {
			return sec.Name
		}
	}
	return ""
}

package dispatch

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/crackbox/crackbox/pkg/arizuko/home"
)

// homeTurn is one attempt's home on this runner: the version it started
// from and what fetching it cost.
type homeTurn struct {
	folder, dir string
	base        map[string]bool // chunks the control plane already holds
	fromIndex   bool            // base is the chunks of this host's index
	stats       HomeStats
}

func (r *Runner) homeCache() home.Cache {
	return home.Cache{Dir: filepath.Join(r.o.DataDir, "home-cache")}
}

// pullHome makes dir the folder's latest committed home before the guest
// starts: nothing to do when this host's copy is known to match it, else
// the missing chunks are fetched and the directory synced to the manifest.
// The copy is marked unknown before the guest may write to it.
func (r *Runner) pullHome(ctx context.Context, c Claim, folder, dir string) (*homeTurn, error) {
	cache := r.homeCache()
	have := cache.Clean(folder)
	latest, err := r.o.Client.HomeLatest(ctx, c, have)
	if err != nil {
		return nil, err
	}
	ht := &homeTurn{folder: folder, dir: dir}
	if latest.Manifest == nil {
		if latest.Hash != have {
			return nil, fmt.Errorf("home of %s: the control plane sent no manifest for %s", folder, latest.Hash)
		}
		// The control plane holds every chunk of the version this host has;
		// the index names them, and pushHome reads it (not here: reading a
		// big index is most of an unchanged home's cost).
		ht.fromIndex = true
	} else {
		if err := cache.SetClean(folder, ""); err != nil {
			return nil, err
		}
		m := *latest.Manifest
		ht.base = map[string]bool{}
		var missing []string
		for _, h := range m.Chunks() {
			ht.base[h] = true
			if cache.Has(h) {
				ht.stats.CacheHits++
			} else {
				missing = append(missing, h)
			}
		}
		err := r.o.Client.HomeChunks(ctx, c, missing, func(h string, b []byte) error {
			ht.stats.FetchedChunk++
			ht.stats.FetchedBytes += int64(len(b))
			return cache.PutChunk(h, b)
		})
		if err != nil {
			return nil, fmt.Errorf("home of %s: %w", folder, err)
		}
		idx, st, err := home.Sync(dir, cache.Index(folder), m, func(h string) ([]byte, error) {
			b, ok := cache.Chunk(h)
			if !ok {
				return nil, fmt.Errorf("chunk %s is not in this runner's cache", h)
			}
			return b, nil
		})
		if err != nil {
			return nil, fmt.Errorf("home of %s: %w", folder, err)
		}
		if err := cache.SaveIndex(folder, idx); err != nil {
			return nil, err
		}
		r.o.Log.Info("home fetched", "folder", folder, "version", latest.Version, "written", st.Written, "removed", st.Removed,
			"fetched_chunks", ht.stats.FetchedChunk, "fetched_bytes", ht.stats.FetchedBytes, "cache_hits", ht.stats.CacheHits)
	}
	// From here the guest may change the home: until a commit says
	// otherwise, this host's copy matches no version.
	if err := cache.SetClean(folder, ""); err != nil {
		return nil, err
	}
	return ht, nil
}

// pushHome scans the home the turn left, sends the chunks the control plane
// lacks and the manifest, and names it in the outcome: the control plane
// commits it with a success and drops it otherwise. A home over its limits
// fails the turn terminally.
func (r *Runner) pushHome(ctx context.Context, c Claim, ht *homeTurn, lim home.Limits, out *Outcome) {
	cache := r.homeCache()
	var send [][]byte
	sent := map[string]bool{}
	idx := cache.Index(ht.folder)
	if ht.fromIndex {
		ht.base = map[string]bool{}
		for _, ix := range idx {
			for _, h := range ix.Chunks {
				ht.base[h] = true
			}
		}
	}
	m, idx, _, err := home.Scan(ht.dir, idx, lim, func(h string, b []byte) error {
		if ht.base[h] || sent[h] {
			return nil
		}
		sent[h] = true
		send = append(send, append([]byte(nil), b...))
		return cache.PutChunk(h, b)
	})
	if err == nil {
		// A file the index vouched for may hold chunks the control plane
		// never had (a home synced from another base): send those too.
		for _, e := range m.Entries {
			for _, h := range e.Chunks {
				if !ht.base[h] && !sent[h] {
					b, ok := cache.Chunk(h)
					if !ok {
						err = fmt.Errorf("chunk %s of %s is in neither the cache nor the base version", h, e.Path)
						break
					}
					sent[h] = true
					send = append(send, b)
				}
			}
		}
	}
	if err == nil {
		err = r.o.Client.HomeUpload(ctx, c, send)
	}
	var hash string
	if err == nil {
		hash, err = r.o.Client.HomeManifest(ctx, c, m)
	}
	if err != nil {
		if out.Error == "" {
			out.Exit, out.Error = 1, "home: "+err.Error()
			out.Terminal = errors.Is(err, home.ErrTooLarge) || errors.Is(err, ErrBadRequest)
		}
		return
	}
	cache.SaveIndex(ht.folder, idx)
	for _, b := range send {
		out.HomeStats.SentBytes += int64(len(b))
	}
	out.HomeStats.SentChunks = len(send)
	out.Home = hash
	r.o.Log.Info("home sent", "folder", ht.folder, "hash", hash, "files", len(m.Entries), "size", m.Size(), "sent_chunks", len(send))
}

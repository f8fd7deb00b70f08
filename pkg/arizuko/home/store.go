package home

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Names in JetStream.
const (
	ChunkStream  = "ARIZUKO_HOME_CHUNKS"
	chunkSubject = "arizuko.home.chunk."
	LogBucket    = "arizuko_homes"
)

// Retention defaults: a version is kept while it is one of the newest
// DefaultKeepVersions or younger than DefaultKeepAge; the newest always is.
const (
	DefaultKeepVersions = 50
	DefaultKeepAge      = 30 * 24 * time.Hour
)

// ErrNoVersion is a version a folder's log does not hold.
var ErrNoVersion = errors.New("no such home version")

// Version is one commit of a folder's home.
type Version struct {
	N        int       `json:"n"`
	Hash     string    `json:"hash"`     // the manifest's
	Manifest []string  `json:"manifest"` // chunks holding the manifest's bytes
	Source   string    `json:"source"`   // turn, push, restore, import
	Turn     int64     `json:"turn,omitempty"`
	Attempt  int       `json:"attempt,omitempty"`
	From     int       `json:"from,omitempty"` // the version a restore brought back
	Time     time.Time `json:"time"`
	Size     int64     `json:"size"`
	Files    int       `json:"files"`
	Changed  int       `json:"changed"` // paths changed from the version before
}

// Log is a folder's versions, oldest first.
type Log struct {
	Next     int       `json:"next"`
	Versions []Version `json:"versions"`
}

// Latest is the newest version, if any.
func (l Log) Latest() (Version, bool) {
	if len(l.Versions) == 0 {
		return Version{}, false
	}
	return l.Versions[len(l.Versions)-1], true
}

// Find is version n.
func (l Log) Find(n int) (Version, error) {
	for _, v := range l.Versions {
		if v.N == n {
			return v, nil
		}
	}
	return Version{}, fmt.Errorf("version %d: %w", n, ErrNoVersion)
}

// Retention bounds a folder's log.
type Retention struct {
	Keep int           // newest versions kept whatever their age (0: DefaultKeepVersions)
	Age  time.Duration // versions younger than this kept too (0: DefaultKeepAge)
}

func (r Retention) prune(vs []Version, now time.Time) []Version {
	keep, age := r.Keep, r.Age
	if keep <= 0 {
		keep = DefaultKeepVersions
	}
	if age <= 0 {
		age = DefaultKeepAge
	}
	var out []Version
	for i, v := range vs {
		if len(vs)-i <= keep || now.Sub(v.Time) < age {
			out = append(out, v)
		}
	}
	return out
}

// Store keeps homes in the fleet's JetStream: chunks as the last message of
// their own subject in ChunkStream (one message each, written once), each
// folder's log as one key of LogBucket.
type Store struct {
	js        jetstream.JetStream
	stream    jetstream.Stream
	kv        jetstream.KeyValue
	Retention Retention
}

// Ensure creates or opens the store (the control plane does this).
// replicas ≤ 0 is 3; a NATS with fewer nodes gets one replica, loudly.
func Ensure(ctx context.Context, js jetstream.JetStream, replicas int, log *slog.Logger) (*Store, error) {
	if replicas <= 0 {
		replicas = 3
	}
	s, err := ensure(ctx, js, replicas)
	if err != nil && replicas > 1 {
		log.Warn("home store with one replica: the nats cluster refused more", "replicas", replicas, "err", err)
		s, err = ensure(ctx, js, 1)
	}
	return s, err
}

func ensure(ctx context.Context, js jetstream.JetStream, replicas int) (*Store, error) {
	st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: ChunkStream, Subjects: []string{chunkSubject + ">"}, MaxMsgsPerSubject: 1,
		Storage: jetstream.FileStorage, Replicas: replicas, AllowDirect: true, Discard: jetstream.DiscardOld,
	})
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", ChunkStream, err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: LogBucket, History: 1,
		Storage: jetstream.FileStorage, Replicas: replicas})
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", LogBucket, err)
	}
	return &Store{js: js, stream: st, kv: kv}, nil
}

func logKey(folder string) string {
	return "f." + base64.RawURLEncoding.EncodeToString([]byte(folder))
}

// Chunk reads one chunk, checking it against its name.
func (s *Store) Chunk(ctx context.Context, h string) ([]byte, error) {
	if !ValidHash(h) {
		return nil, fmt.Errorf("chunk %q: not a sha256", h)
	}
	m, err := s.stream.GetLastMsgForSubject(ctx, chunkSubject+h)
	if err != nil {
		return nil, fmt.Errorf("chunk %s: %w", h, err)
	}
	if Sum(m.Data) != h {
		return nil, fmt.Errorf("chunk %s: stored content does not match its name", h)
	}
	return m.Data, nil
}

// HasChunk reports whether the store holds a chunk.
func (s *Store) HasChunk(ctx context.Context, h string) (bool, error) {
	_, err := s.stream.GetLastMsgForSubject(ctx, chunkSubject+h)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	return err == nil, err
}

// PutChunk stores a chunk under the sha256 of b.
func (s *Store) PutChunk(ctx context.Context, b []byte) (string, error) {
	if len(b) > ChunkSize {
		return "", fmt.Errorf("chunk of %d bytes: at most %d", len(b), ChunkSize)
	}
	h := Sum(b)
	if _, err := s.js.Publish(ctx, chunkSubject+h, b, jetstream.WithMsgID(h)); err != nil {
		return "", fmt.Errorf("chunk %s: %w", h, err)
	}
	return h, nil
}

// PutManifest stores a manifest's bytes as chunks and returns their names.
func (s *Store) PutManifest(ctx context.Context, m Manifest) ([]string, error) {
	b := m.Encode()
	var out []string
	for len(b) > 0 {
		n := min(len(b), ChunkSize)
		h, err := s.PutChunk(ctx, b[:n])
		if err != nil {
			return nil, err
		}
		out = append(out, h)
		b = b[n:]
	}
	return out, nil
}

// Manifest reads version v's manifest.
func (s *Store) Manifest(ctx context.Context, v Version) (Manifest, error) {
	var buf bytes.Buffer
	for _, h := range v.Manifest {
		b, err := s.Chunk(ctx, h)
		if err != nil {
			return Manifest{}, fmt.Errorf("manifest of version %d: %w", v.N, err)
		}
		buf.Write(b)
	}
	if len(v.Manifest) == 0 {
		buf.WriteString(`{"entries":null}`)
	}
	if Sum(buf.Bytes()) != v.Hash {
		return Manifest{}, fmt.Errorf("manifest of version %d: bytes do not match hash %s", v.N, v.Hash)
	}
	return Decode(buf.Bytes())
}

// Log reads a folder's log (empty if it has none).
func (s *Store) Log(ctx context.Context, folder string) (Log, error) {
	l, _, err := s.log(ctx, folder)
	return l, err
}

func (s *Store) log(ctx context.Context, folder string) (Log, uint64, error) {
	var l Log
	e, err := s.kv.Get(ctx, logKey(folder))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Log{Next: 1}, 0, nil
	}
	if err != nil {
		return l, 0, fmt.Errorf("home log of %s: %w", folder, err)
	}
	if err := json.Unmarshal(e.Value(), &l); err != nil {
		return l, 0, fmt.Errorf("home log of %s: %w", folder, err)
	}
	return l, e.Revision(), nil
}

// Commit appends m as the folder's next version, described by v (its
// source, turn, attempt), pruning the log by Retention. The manifest's
// chunks must already be stored.
func (s *Store) Commit(ctx context.Context, folder string, m Manifest, v Version) (Version, error) {
	if err := m.Validate(); err != nil {
		return Version{}, err
	}
	mc, err := s.PutManifest(ctx, m)
	if err != nil {
		return Version{}, err
	}
	v.Hash, v.Manifest, v.Size, v.Files = m.Hash(), mc, m.Size(), len(m.Entries)
	if v.Time.IsZero() {
		v.Time = time.Now().UTC()
	}
	for {
		l, rev, err := s.log(ctx, folder)
		if err != nil {
			return Version{}, err
		}
		prev := Manifest{}
		if last, ok := l.Latest(); ok {
			if prev, err = s.Manifest(ctx, last); err != nil {
				return Version{}, err
			}
		}
		v.Changed = len(Diff(prev, m))
		v.N = max(l.Next, 1)
		l.Next = v.N + 1
		l.Versions = s.Retention.prune(append(l.Versions, v), v.Time)
		b, _ := json.Marshal(l)
		if rev == 0 {
			_, err = s.kv.Create(ctx, logKey(folder), b)
		} else {
			_, err = s.kv.Update(ctx, logKey(folder), b, rev)
		}
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue // another commit landed first: append after it
		}
		if err != nil {
			return Version{}, fmt.Errorf("home log of %s: %w", folder, err)
		}
		return v, nil
	}
}

// Restore commits version n's manifest again as the newest version.
func (s *Store) Restore(ctx context.Context, folder string, n int) (Version, error) {
	l, err := s.Log(ctx, folder)
	if err != nil {
		return Version{}, err
	}
	old, err := l.Find(n)
	if err != nil {
		return Version{}, fmt.Errorf("%s: %w", folder, err)
	}
	m, err := s.Manifest(ctx, old)
	if err != nil {
		return Version{}, err
	}
	return s.Commit(ctx, folder, m, Version{Source: "restore", From: n})
}

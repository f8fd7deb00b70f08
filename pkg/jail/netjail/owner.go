package netjail

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/crackbox/crackbox/internal/proc"
)

// Every object this package creates carries the prefix so GC and humans can
// tell it apart from anything else on the host.
const (
	tapPrefix   = "cbx"  // tap devices: cbx + 10 hex digits of the run id's hash
	tablePrefix = "cbx_" // nft tables: cbx_ + the sanitized run id
	ownerTag    = "crackbox"
)

// TapName is the tap device name of a run: short enough for IFNAMSIZ and
// stable for the run id, so GC can recompute it.
func TapName(runID string) string {
	sum := sha256.Sum256([]byte(runID))
	return tapPrefix + hex.EncodeToString(sum[:])[:10]
}

// TableName is the nftables table name of a run.
func TableName(runID string) string {
	var b strings.Builder
	b.WriteString(tablePrefix)
	for _, r := range strings.ToLower(runID) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 64 {
			break
		}
	}
	return b.String()
}

// owner identifies the process that holds a run's network objects. The start
// time (clock ticks since boot, from /proc/PID/stat) tells a live owner from
// a new process that reused a dead owner's pid.
type owner struct {
	RunID string `json:"run_id"`
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

func self(runID string) (owner, error) {
	pid := os.Getpid()
	st, err := proc.Start(pid)
	if err != nil {
		return owner{}, fmt.Errorf("netjail: own start time: %w", err)
	}
	return owner{RunID: runID, PID: pid, Start: st}, nil
}

// alive reports whether the owner process still runs. Unknown (zero) owners
// count as alive so nothing is removed on a guess.
func (o owner) alive() bool {
	if o.PID <= 0 {
		return true
	}
	st, err := proc.Start(o.PID)
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	return o.Start == 0 || st == o.Start
}

// tag renders the owner for a tap alias and an nft rule comment.
func (o owner) tag() string {
	return fmt.Sprintf("%s run=%s pid=%d start=%d", ownerTag, o.RunID, o.PID, o.Start)
}

// parseTag is the inverse of tag; ok is false for anything we did not write.
func parseTag(s string) (owner, bool) {
	f := strings.Fields(s)
	if len(f) != 4 || f[0] != ownerTag {
		return owner{}, false
	}
	var o owner
	for _, kv := range f[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return owner{}, false
		}
		switch k {
		case "run":
			o.RunID = v
		case "pid":
			n, err := strconv.Atoi(v)
			if err != nil {
				return owner{}, false
			}
			o.PID = n
		case "start":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return owner{}, false
			}
			o.Start = n
		default:
			return owner{}, false
		}
	}
	return o, o.PID > 0
}

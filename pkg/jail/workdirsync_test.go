package jail

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/control"
)

// TestWorkdirSyncPlan: a bad mode is refused naming the value and the choices; exit
// marks the workdir's mount and serves the share read-only over 9p, leaving volumes
// and a read-only workdir alone.
func TestWorkdirSyncPlan(t *testing.T) {
	wd := t.TempDir()
	os.Chmod(filepath.Dir(wd), 0o755)
	vol := t.TempDir()
	cases := []struct {
		name, sync string
		ro         bool
		want       string // Mount.Sync of the workdir; "err" for a refusal
	}{
		{"default", "", false, ""},
		{"live", WorkdirSyncLive, false, ""},
		{"exit", WorkdirSyncExit, false, control.SyncExit},
		{"exit read-only", WorkdirSyncExit, true, ""},
		{"bad", "later", false, "err"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := Spec{Argv: []string{"true"}, Workdir: wd, WorkdirRO: c.ro, WorkdirSync: c.sync,
				Volumes: []Volume{{Host: vol, Guest: "/data"}}, DiskQuota: 1 << 20}
			p, err := makePlan(s, FSStream)
			if c.want == "err" {
				if !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), `"later"`) || !strings.Contains(err.Error(), "live or exit") {
					t.Fatalf("err %v, want ErrBadSpec naming the value and the choices", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			w, v := p.rs.Mounts[0], p.rs.Mounts[1]
			if w.Sync != c.want || v.Sync != "" {
				t.Fatalf("workdir sync %q, volume sync %q; want %q and none", w.Sync, v.Sync, c.want)
			}
			if c.want != "" && w.SyncLimit != 1<<20 {
				t.Errorf("sync limit %d, want the quota", w.SyncLimit)
			}
			shares := newStreamShares(p, 1<<20, nil, nil)
			cfg := shares.config(shares.byTag[w.Tag])
			if cfg.ReadOnly != (c.ro || c.want != "") {
				t.Errorf("workdir served read-only=%v", cfg.ReadOnly)
			}
		})
	}
}

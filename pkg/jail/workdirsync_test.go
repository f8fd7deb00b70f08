package jail

import (
	"archive/tar"
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/pkg/jail/control"
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
			if want := map[bool]int64{true: 1 << 20}[c.want != ""]; p.rs.Swap != want {
				t.Errorf("swap %d, want %d (the quota when synced at exit, else none)", p.rs.Swap, want)
			}
			shares := newStreamShares(p, 1<<20, nil, nil)
			cfg := shares.config(shares.byTag[w.Tag])
			if cfg.ReadOnly != (c.ro || c.want != "") {
				t.Errorf("workdir served read-only=%v", cfg.ReadOnly)
			}
		})
	}
}

// TestSyncStreamOnce: a changes stream is applied only for a share synced at exit, and
// once; a second one, or one for a live share or an unknown tag, is closed unread.
func TestSyncStreamOnce(t *testing.T) {
	ex, live := t.TempDir(), t.TempDir()
	p := &plan{userShare: []share{
		{Tag: "w0", Host: ex, Target: "/w0", FS: FSStream, SyncExit: true},
		{Tag: "w1", Host: live, Target: "/w1", FS: FSStream},
	}}
	s := newStreamShares(p, 0, io.Discard, slog.New(slog.DiscardHandler))
	s.start()
	defer s.close()
	changes := func(name string) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: 2})
		tw.Write([]byte("hi"))
		tw.Close()
		return b.Bytes()
	}
	send := func(tag, name string) string {
		h, g := net.Pipe()
		go s.sync(tag, h)
		go func() { g.Write(changes(name)) }()
		g.SetReadDeadline(time.Now().Add(30 * time.Second))
		line, _ := bufio.NewReader(g).ReadString('\n')
		g.Close()
		return line
	}
	if got := send("w0", "first"); !strings.HasPrefix(got, "ok ") {
		t.Fatalf("first stream: answer %q", got)
	}
	for _, c := range []struct{ tag, name string }{{"w0", "second"}, {"w1", "live"}, {"nope", "unknown"}} {
		if got := send(c.tag, c.name); got != "" {
			t.Errorf("stream for %q answered %q, want it refused", c.tag, got)
		}
	}
	for _, f := range []string{filepath.Join(ex, "second"), filepath.Join(live, "live")} {
		if _, err := os.Lstat(f); !os.IsNotExist(err) {
			t.Errorf("%s was written", f)
		}
	}
	if b, err := os.ReadFile(filepath.Join(ex, "first")); err != nil || string(b) != "hi" {
		t.Errorf("first: %q, %v", b, err)
	}
}

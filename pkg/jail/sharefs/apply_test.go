package sharefs

import (
	"archive/tar"
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// applyStream applies stream to dir through a real, confined share server, as a
// guest's stream would arrive (then half-closed), and returns the server's answer.
func applyStream(t testing.TB, dir string, quota int64, stream []byte) string {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "pair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	host, guest := conn(fds[0]), conn(fds[1])
	defer guest.Close()
	done := make(chan error, 1)
	go func() {
		done <- Apply(Config{Dir: dir, Quota: quota, Log: io.Discard}, host, slog.New(slog.DiscardHandler))
	}()
	go func() { _, _ = guest.Write(stream); _ = guest.CloseWrite() }()
	_ = guest.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(guest).ReadString('\n')
	if err != nil {
		t.Fatalf("no answer from the apply server: %v", err)
	}
	line = strings.TrimSpace(line)
	if err := <-done; strings.HasPrefix(line, "ok ") != (err == nil) || (err != nil && !errors.Is(err, ErrApply)) {
		t.Errorf("answer %q, but Apply returned %v", line, err)
	}
	return line
}

// entry is one header of a test stream, with its data.
type entry struct {
	hdr  tar.Header
	data string
}

func stream(t *testing.T, es ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range es {
		h := e.hdr
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len(e.data))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func file(name, data string) entry {
	return entry{hdr: tar.Header{Name: name, Typeflag: tar.TypeReg}, data: data}
}

func dirEntry(name string, pax map[string]string) entry {
	return entry{hdr: tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755, PAXRecords: pax}}
}

func removal(name string) entry {
	return entry{hdr: tar.Header{Name: name, Typeflag: tar.TypeReg, PAXRecords: map[string]string{PAXRemove: "1"}}}
}

// TestApplyChanges: a stream's files, directories, symlinks, deletions and opaque
// directories land on the host as the guest's layer had them.
func TestApplyChanges(t *testing.T) {
	dir, owner := shareOwner(t)
	for _, p := range []string{"gone/a", "keep/old", "opq/x", "opq/sub/y", "f"} {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if os.Geteuid() == 0 {
		if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, int(owner), int(owner))
		}); err != nil {
			t.Fatal(err)
		}
	}
	mtime := time.Unix(1_700_000_000, 0)
	new := file("keep/new", "hello")
	new.hdr.ModTime = mtime
	new.hdr.Mode = 0o600
	ans := applyStream(t, dir, 0, stream(t,
		removal("gone"),
		dirEntry("keep", nil),
		new,
		dirEntry("opq", map[string]string{PAXOpaque: "y"}),
		file("opq/z", "z"),
		entry{hdr: tar.Header{Name: "ln", Typeflag: tar.TypeSymlink, Linkname: "keep/new"}},
		file("f", "replaced"),
	))
	if !strings.HasPrefix(ans, "ok ") {
		t.Fatalf("answer %q", ans)
	}
	checks := []struct {
		path, want string
	}{
		{"keep/old", "old"}, {"keep/new", "hello"}, {"opq/z", "z"}, {"f", "replaced"},
	}
	for _, c := range checks {
		if b, err := os.ReadFile(filepath.Join(dir, c.path)); err != nil || string(b) != c.want {
			t.Errorf("%s: %q, %v; want %q", c.path, b, err, c.want)
		}
	}
	for _, p := range []string{"gone", "opq/x", "opq/sub"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); !os.IsNotExist(err) {
			t.Errorf("%s still exists (%v)", p, err)
		}
	}
	if l, err := os.Readlink(filepath.Join(dir, "ln")); err != nil || l != "keep/new" {
		t.Errorf("ln: %q, %v", l, err)
	}
	st := lstat(t, filepath.Join(dir, "keep/new"))
	if st.Mode&0o7777 != 0o600 || st.Uid != owner || st.Mtim.Sec != mtime.Unix() {
		t.Errorf("keep/new: mode %o uid %d mtime %d", st.Mode&0o7777, st.Uid, st.Mtim.Sec)
	}
}

// TestApplyAttacks is a hostile guest's changes stream: each attempt to reach outside
// the share, plant a privileged or special file or overrun the quota is refused or
// neutralised on the host.
func TestApplyAttacks(t *testing.T) {
	outsideDir := t.TempDir()
	secret := filepath.Join(outsideDir, "secret")
	cases := []struct {
		name    string
		entries []entry
		quota   int64
		raw     func([]byte) []byte // rewrites the stream's bytes
		answer  string              // prefix of the server's answer
		check   func(t *testing.T, dir string)
	}{
		{
			name: "symlink out then write through it",
			entries: []entry{
				{hdr: tar.Header{Name: "esc", Typeflag: tar.TypeSymlink, Linkname: outsideDir}},
				file("esc/secret", "pwned"),
				{hdr: tar.Header{Name: "esc/d", Typeflag: tar.TypeDir, Mode: 0o777}},
				removal("esc/secret"),
			},
			answer: "partial applied=1 removed=0",
		},
		{
			name:    "dot-dot and absolute paths",
			entries: []entry{file("../secret", "pwned"), file("a/../../secret", "pwned"), file(secret, "pwned"), removal("..")},
			answer:  "partial applied=0 removed=0 neutralised=0 refused=4",
		},
		{
			name:    "setuid and setgid bits",
			entries: []entry{{hdr: tar.Header{Name: "suid", Typeflag: tar.TypeReg, Mode: 0o6755}}, {hdr: tar.Header{Name: "sgid", Typeflag: tar.TypeDir, Mode: 0o2777}}},
			answer:  "ok applied=2 removed=0 neutralised=2",
			check: func(t *testing.T, dir string) {
				for _, n := range []string{"suid", "sgid"} {
					if st := lstat(t, filepath.Join(dir, n)); st.Mode&0o6000 != 0 {
						t.Errorf("%s: mode %o on the host", n, st.Mode&0o7777)
					}
				}
			},
		},
		{
			name: "device, fifo and hard link",
			entries: []entry{
				{hdr: tar.Header{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3, Mode: 0o666}},
				{hdr: tar.Header{Name: "sda", Typeflag: tar.TypeBlock, Devmajor: 8, Mode: 0o666}},
				{hdr: tar.Header{Name: "fifo", Typeflag: tar.TypeFifo, Mode: 0o666}},
				{hdr: tar.Header{Name: "hl", Typeflag: tar.TypeLink, Linkname: secret}},
			},
			answer: "partial applied=0 removed=0 neutralised=0 refused=4",
			check: func(t *testing.T, dir string) {
				for _, n := range []string{"null", "sda", "fifo", "hl"} {
					if _, err := os.Lstat(filepath.Join(dir, n)); !os.IsNotExist(err) {
						t.Errorf("%s exists on the host", n)
					}
				}
			},
		},
		{
			name:    "data shorter than the header says",
			entries: []entry{file("short", strings.Repeat("x", 4096))},
			raw:     func(b []byte) []byte { return b[:512+1000] },
			answer:  "error short: changes stream: unexpected EOF",
		},
		{
			name:    "data longer than the header says",
			entries: []entry{file("long", "abc")},
			raw: func(b []byte) []byte {
				// Three bytes of data in a block, then a block of junk where the next
				// header belongs.
				return append(b[:1024:1024], bytes.Repeat([]byte{'A'}, 1024)...)
			},
			answer: "error changes stream:",
		},
		{
			name:    "past the quota",
			quota:   64 << 10,
			entries: []entry{file("small", "ok"), file("big", strings.Repeat("x", 128<<10)), file("after", "never")},
			answer:  "error big: no space left on device (the disk quota is full)",
			check: func(t *testing.T, dir string) {
				if _, err := os.Lstat(filepath.Join(dir, "after")); !os.IsNotExist(err) {
					t.Error("an entry after the quota was full was applied")
				}
				if st, err := os.Lstat(filepath.Join(dir, "big")); err == nil && st.Size() > 64<<10 {
					t.Errorf("big grew to %d past the quota", st.Size())
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := os.WriteFile(secret, []byte("host secret"), 0o644); err != nil {
				t.Fatal(err)
			}
			dir, _ := shareOwner(t)
			b := stream(t, c.entries...)
			if c.raw != nil {
				b = c.raw(b)
			}
			ans := applyStream(t, dir, c.quota, b)
			t.Log(ans)
			if !strings.HasPrefix(ans, c.answer) {
				t.Errorf("answer %q, want prefix %q", ans, c.answer)
			}
			if got, err := os.ReadFile(secret); err != nil || string(got) != "host secret" {
				t.Errorf("host file outside the share: %q, %v", got, err)
			}
			if ents, _ := os.ReadDir(outsideDir); len(ents) != 1 {
				t.Errorf("outside the share: %d entries, want 1", len(ents))
			}
			if c.check != nil {
				c.check(t, dir)
			}
		})
	}
}

// dirCacheCases are streams that remove or replace a directory the apply walked into
// earlier: a later entry under the same path lands in what is there now, or is
// refused, and never lands where a symlink points.
var dirCacheCases = []struct {
	name    string
	entries func(outside string) []entry
	want    map[string]string // path -> contents; "" means it must not exist
}{
	{
		name: "removed then made again",
		entries: func(string) []entry {
			return []entry{dirEntry("a", nil), dirEntry("a/b", nil), file("a/b/f", "f"), removal("a"),
				dirEntry("a", nil), file("a/g", "g"), dirEntry("a/b", nil), file("a/b/h", "h")}
		},
		want: map[string]string{"a/g": "g", "a/b/h": "h", "a/b/f": ""},
	},
	{
		name: "removed then a symlink out",
		entries: func(out string) []entry {
			return []entry{dirEntry("a", nil), dirEntry("a/b", nil), file("a/b/f", "f"), removal("a"),
				{hdr: tar.Header{Name: "a", Typeflag: tar.TypeSymlink, Linkname: out}}, file("a/g", "g"), file("a/b/g", "g")}
		},
		want: map[string]string{"a/b/f": ""},
	},
	{
		name: "replaced by a symlink entry",
		entries: func(out string) []entry {
			return []entry{dirEntry("a", nil), file("a/f", "f"),
				{hdr: tar.Header{Name: "a", Typeflag: tar.TypeSymlink, Linkname: out}}, file("a/g", "g")}
		},
	},
	{
		name: "emptied by an opaque entry",
		entries: func(out string) []entry {
			return []entry{dirEntry("a", nil), dirEntry("a/b", nil), file("a/b/f", "f"),
				dirEntry("a", map[string]string{PAXOpaque: "y"}),
				{hdr: tar.Header{Name: "a/b", Typeflag: tar.TypeSymlink, Linkname: out}}, file("a/b/g", "g"),
				dirEntry("a/c", nil), file("a/c/h", "h")}
		},
		want: map[string]string{"a/b/f": "", "a/c/h": "h"},
	},
	{
		name: "emptied by an opaque entry, then made again",
		entries: func(string) []entry {
			return []entry{dirEntry("a", nil), dirEntry("a/b", nil), file("a/b/f", "f"),
				dirEntry("a", map[string]string{PAXOpaque: "y"}), dirEntry("a/b", nil), file("a/b/g", "g")}
		},
		want: map[string]string{"a/b/f": "", "a/b/g": "g"},
	},
	{
		name: "more directories than the cache holds, each visited twice",
		entries: func(string) []entry {
			var es []entry
			for _, f := range []string{"f", "g"} {
				for i := range 2 * maxDirs {
					d := fmt.Sprintf("d%d/s", i)
					es = append(es, dirEntry(path.Dir(d), nil), dirEntry(d, nil), file(d+"/"+f, d))
				}
			}
			return es
		},
		want: map[string]string{"d0/s/f": "d0/s", "d0/s/g": "d0/s", "d127/s/f": "d127/s", "d127/s/g": "d127/s", "d70/s/g": "d70/s"},
	},
	{
		name: "a file over a directory",
		entries: func(string) []entry {
			return []entry{dirEntry("a", nil), dirEntry("a/b", nil), file("a/b/f", "f"), file("a", "x"), file("a/g", "g"), file("a/b/g", "g")}
		},
		want: map[string]string{"a": "x"},
	},
}

// dirCacheProblems lists how dir differs from what a case wants, and anything that
// landed in outside.
func dirCacheProblems(dir, outside string, want map[string]string) []string {
	var bad []string
	for p, w := range want {
		b, err := os.ReadFile(filepath.Join(dir, p))
		switch {
		case w == "" && !errors.Is(err, os.ErrNotExist):
			bad = append(bad, p+" exists")
		case w != "" && string(b) != w:
			bad = append(bad, fmt.Sprintf("%s: %q, %v; want %q", p, b, err, w))
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		bad = append(bad, fmt.Sprintf("%d entries landed outside the share", len(ents)))
	}
	return bad
}

// TestApplyDirCache applies each dirCacheCase through a real share server. It then
// applies them in this process with a cache that never forgets, which must get some
// of them wrong: the cases can tell.
func TestApplyDirCache(t *testing.T) {
	naiveWrong := 0
	for _, c := range dirCacheCases {
		t.Run(c.name, func(t *testing.T) {
			outside := t.TempDir()
			dir, _ := shareOwner(t)
			ans := applyStream(t, dir, 0, stream(t, c.entries(outside)...))
			t.Log(ans)
			for _, p := range dirCacheProblems(dir, outside, c.want) {
				t.Error(p)
			}

			naive := t.TempDir()
			root, err := unix.Open(naive, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(root)
			fs := &fsys{root: root, hidden: map[string]bool{}, dirs: &dirCache{fds: map[string]int{}, naive: true}}
			res, err := fs.apply(bytes.NewReader(stream(t, c.entries(outside)...)))
			if bad := dirCacheProblems(naive, outside, c.want); len(bad) > 0 {
				t.Logf("a cache that never forgets: %v %v: %v", res, err, bad)
				naiveWrong++
			}
		})
	}
	if naiveWrong == 0 {
		t.Error("a cache that never forgets passed every case: the cases test nothing")
	}
}

// TestApplyQuotaFull: with the quota used up, a directory the share holds already and
// a file that replaces a bigger one still apply: neither needs room it does not free.
func TestApplyQuotaFull(t *testing.T) {
	dir, owner := shareOwner(t)
	if err := os.Mkdir(filepath.Join(dir, "keep"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"keep", "f"} {
		if err := os.Lchown(filepath.Join(dir, p), int(owner), int(owner)); err != nil && os.Geteuid() == 0 {
			t.Fatal(err)
		}
	}
	ans := applyStream(t, dir, 2*entryCost, stream(t,
		file("a", ""), file("b", ""), dirEntry("keep", nil), file("f", "small"), file("c", "")))
	// a and b fill the quota; keep needs none; f frees more than it takes, so c fits.
	if want := "ok applied=5 "; !strings.HasPrefix(ans, want) {
		t.Errorf("answer %q, want %q", ans, want)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || string(b) != "small" {
		t.Errorf("f: %.40q, %v", b, err)
	}
}

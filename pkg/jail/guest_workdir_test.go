package jail_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/internal/testreq"
)

// workdirJobs is what a CI script does in its project directory: SQLite in WAL mode
// with a second reader, a shared writable mmap, a venv with a package installed from a
// local source tree, and git. Each step prints one line the test checks. Last, guest
// root tries to open every share port: the two the kernel's mounts hold (/etc and the
// workdir) refuse a second opener, so no guest program can speak into a share's stream.
const workdirJobs = `set -e
python3 - <<'EOF'
import mmap, os, sqlite3
c = sqlite3.connect("t.db")
print("journal", c.execute("pragma journal_mode=wal").fetchone()[0])
c.execute("create table t(x)")
c.executemany("insert into t values (?)", [(i,) for i in range(100)])
c.commit()
r = sqlite3.connect("t.db")
print("rows", r.execute("select count(*) from t").fetchone()[0])
with open("m.bin", "wb") as f:
    f.write(b"\0" * 8192)
with open("m.bin", "r+b") as f:
    m = mmap.mmap(f.fileno(), 8192, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    m[4096:4101] = b"hello"
    m.flush()
print("mmap", open("m.bin", "rb").read()[4096:4101].decode())
EOF
python3 -m venv venv
venv/bin/pip install -q --no-cache-dir --no-index --no-build-isolation ./hello
venv/bin/python -c 'import hello; print("venv", hello.GREETING)'
git init -q repo && cd repo && cp ../hello/*.py . && git add -A && git -c user.email=t@t -c user.name=t commit -qm one
git status --porcelain | wc -l | sed 's/^ */git-clean /'
busy=0 free=0
for n in /sys/class/virtio-ports/*/name; do
  case $(cat "$n") in sh*) ;; *) continue ;; esac
  if (exec 3<>"/dev/$(basename "$(dirname "$n")")") 2>/dev/null; then free=$((free+1)); else busy=$((busy+1)); fi
done
echo "share ports busy=$busy free=$free"
`

// jobsWorkdir makes a workdir holding the local package workdirJobs installs.
func jobsWorkdir(t *testing.T) string {
	t.Helper()
	testreq.File(t, "/usr/bin/python3", "apt-get install python3 python3-venv (make test installs them)")
	testreq.File(t, "/usr/bin/git", "apt-get install git (make test installs it)")
	wd := t.TempDir()
	os.Chmod(filepath.Dir(wd), 0o755)
	pkg := filepath.Join(wd, "hello")
	os.MkdirAll(pkg, 0o755)
	os.WriteFile(filepath.Join(pkg, "hello.py"), []byte("GREETING = 'hi from the workdir'\n"), 0o644)
	os.WriteFile(filepath.Join(pkg, "setup.py"), []byte("from setuptools import setup\nsetup(name='hello', version='1.0', py_modules=['hello'])\n"), 0o644)
	return wd
}

// TestWorkdirRealJobs runs the jobs above in a read-write workdir in one guest, then
// checks their results from the host.
func TestWorkdirRealJobs(t *testing.T) {
	jailtest.Require(t)
	wd := jobsWorkdir(t)
	s := jailtest.Spec(t, "sh", "-c", workdirJobs)
	s.Workdir, s.Root = wd, true // guest root makes the port attack
	s.Timeout = 8 * time.Minute
	var out, errb bytes.Buffer
	s.Stdout, s.Stderr = &out, &errb
	res, err := jailtest.Run(t, s)
	if err != nil || res.Exit != 0 {
		t.Fatalf("exit %d err %v\nstdout %s\nstderr %s", res.Exit, err, out.String(), errb.String())
	}
	want := "journal wal\nrows 100\nmmap hello\nvenv hi from the workdir\ngit-clean 0\nshare ports busy=2 free=4\n"
	if out.String() != want {
		t.Fatalf("stdout %q, want %q\nstderr %s", out.String(), want, errb.String())
	}
	b, err := os.ReadFile(filepath.Join(wd, "m.bin"))
	if err != nil || len(b) != 8192 || string(b[4096:4101]) != "hello" {
		t.Errorf("the mmap write did not reach the host file: len %d err %v", len(b), err)
	}
	for _, f := range []string{"t.db", "venv/pyvenv.cfg", "repo/.git/HEAD"} {
		if _, err := os.Stat(filepath.Join(wd, f)); err != nil {
			t.Errorf("%s not on the host: %v", f, err)
		}
	}
}

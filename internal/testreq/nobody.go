package testreq

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// nobody is the unprivileged uid and gid a root test run drops to.
const nobody = 65534

// AsNobody lets a test about unprivileged behaviour run on a root CI machine instead of
// skipping there. Unprivileged it returns false and the test carries on. As root it runs
// only this test again, in a world-readable copy of the test binary, as uid and gid 65534;
// t fails unless that run passes, and AsNobody returns true so the caller returns.
func AsNobody(t *testing.T) (done bool) {
	t.Helper()
	if os.Geteuid() != 0 {
		return false
	}
	dir, err := os.MkdirTemp("", "testreq-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "test.bin")
	if err := copyExecutable(bin); err != nil {
		t.Fatalf("copy the test binary for uid %d: %v", nobody, err)
	}
	run := "^" + regexp.QuoteMeta(t.Name()) + "$"
	cmd := exec.Command(bin, "-test.run="+run, "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "TMPDIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	// A skip in the child is no pass: require the PASS line itself.
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()+" ") {
		t.Fatalf("%s as uid %d: %v\n%s", t.Name(), nobody, err, out)
	}
	t.Logf("passed as uid %d", nobody)
	return true
}

func copyExecutable(dst string) error {
	src, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

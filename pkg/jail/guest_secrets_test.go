package jail_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/pkg/jail"
)

// credentialPaths is what the threat model promises a guest never sees. It is kept apart
// from jail's own mask list on purpose: a mask dropped there leaves its path here, and
// the guest then sees the canary.
var credentialPaths = []string{
	"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-",
	"/etc/ssh/ssh_host_*_key", "/etc/ssl/private",
	"/etc/sudoers", "/etc/sudoers.d", "/etc/security/opasswd",
	"/etc/machine-id", "/etc/credstore", "/etc/credstore.encrypted",
	"/etc/NetworkManager/system-connections", "/etc/wireguard", "/etc/libvirt/secrets",
	"/etc/krb5.keytab", "/etc/ipsec.secrets", "/etc/ppp/chap-secrets", "/etc/ppp/pap-secrets",
	"/etc/letsencrypt", "/etc/crackbox", "/etc/arizuko",
}

// secretsViewEnv carries the scratch overlay's upper and work dirs to the child run of
// TestHostSecretsInvisible.
const secretsViewEnv = "CRACKBOX_SECRETS_VIEW"

func TestEveryMaskHasACase(t *testing.T) {
	for _, p := range jail.SecretPaths {
		if !slices.Contains(credentialPaths, p) {
			t.Errorf("mask %s has no case in credentialPaths", p)
		}
	}
}

// TestHostSecretsInvisible boots one guest as root, on a host view of /etc where every
// credential path exists with readable canary content (an overlay in a private mount
// namespace creates the ones this host lacks; the host's /etc is untouched), and checks
// each one is masked, /root and /home are empty and no host environment leaks in.
func TestHostSecretsInvisible(t *testing.T) {
	if v := os.Getenv(secretsViewEnv); v != "" {
		upper, work, _ := strings.Cut(v, ":")
		checkSecretsInGuest(t, upper, work)
		return
	}
	jailtest.Require(t)
	dir := t.TempDir()
	upper, work := filepath.Join(dir, "upper"), filepath.Join(dir, "work")
	for _, d := range []string{upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHostSecretsInvisible$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), secretsViewEnv+"="+upper+":"+work)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS} // Go makes / private
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestHostSecretsInvisible ")) {
		t.Fatalf("guest run in the scratch host view: %v\n%s", err, out)
	}
}

// scratchSecrets mounts an overlay on /etc (this process has a private mount namespace)
// and gives every credential path readable canary content; it returns the paths to check.
func scratchSecrets(t *testing.T, upper, work string) []string {
	opts := "lowerdir=/etc,upperdir=" + upper + ",workdir=" + work
	if err := syscall.Mount("overlay", "/etc", "overlay", 0, opts); err != nil {
		t.Fatalf("overlay on /etc: %v", err)
	}
	canary := []byte("crackbox-canary-secret\n")
	var out []string
	for _, p := range credentialPaths {
		if strings.Contains(p, "*") {
			p = strings.Replace(p, "*", "canary", 1)
		}
		st, err := os.Stat(p)
		switch {
		case err == nil && st.IsDir():
			err = os.WriteFile(filepath.Join(p, "crackbox-canary"), canary, 0o644)
		case err == nil && st.Size() > 0:
			err = os.Chmod(p, st.Mode()|0o044) // readable, so only the mask can hide it
		default:
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				err = os.WriteFile(p, canary, 0o644)
			}
		}
		if err != nil {
			t.Fatalf("canary %s: %v", p, err)
		}
	}
	for _, p := range credentialPaths {
		m, _ := filepath.Glob(p)
		out = append(out, m...)
	}
	return out
}

func checkSecretsInGuest(t *testing.T, upper, work string) {
	paths := scratchSecrets(t, upper, work)
	t.Setenv("CRACKBOX_TEST_CANARY", "canary-value-7f3a")
	var script strings.Builder
	for _, p := range paths {
		// stat reports the host file's size even where QEMU (nobody) could not read it,
		// so only a real mask shows size 0 (a file) or an empty tmpfs (a directory).
		fmt.Fprintf(&script, `if [ -d %[1]s ]; then echo "%[1]s fs=$(stat -f -c %%T %[1]s) entries=$(ls -A %[1]s | wc -l)"; `+
			`else echo "%[1]s size=$(stat -c %%s %[1]s) bytes=$(cat %[1]s 2>/dev/null | wc -c)"; fi`+"\n", p)
	}
	script.WriteString(`echo "root-entries=$(ls -A /root 2>/dev/null | wc -l)"
echo "home-entries=$(ls -A /home 2>/dev/null | wc -l)"
env
`)
	s := jailtest.Spec(t, "sh", "-c", script.String())
	s.Root = true
	s.Env = []string{"PASSED_ON_PURPOSE=yes"}
	var out bytes.Buffer
	s.Stdout = &out
	res, err := jailtest.Run(t, s)
	if err != nil || res.Exit != 0 {
		t.Fatalf("exit %d err %v stdout %q", res.Exit, err, out.String())
	}
	got, env := parseSecretsReport(&out)
	for _, p := range paths {
		// Empty (a guest mask) or absent (left out of the share by the host).
		if v := got[p]; v != "size=0 bytes=0" && v != "fs=tmpfs entries=0" && v != "size= bytes=0" {
			t.Errorf("%s visible in the guest: %q", p, v)
		}
	}
	for _, k := range []string{"root-entries", "home-entries"} {
		if got[k] != "0" {
			t.Errorf("%s = %q, want 0", k, got[k])
		}
	}
	joined := strings.Join(env, "\n")
	if strings.Contains(joined, "canary-value-7f3a") || strings.Contains(joined, "CRACKBOX_TEST_CANARY") {
		t.Errorf("host env leaked into the guest:\n%s", joined)
	}
	if !strings.Contains(joined, "PASSED_ON_PURPOSE=yes") {
		t.Errorf("-e variable missing from the guest env:\n%s", joined)
	}
	if !strings.Contains(joined, "HOME=/root") || !strings.Contains(joined, "PATH="+jail.DefaultPath) {
		t.Errorf("HOME or PATH wrong:\n%s", joined)
	}
}

// parseSecretsReport splits the guest's report into path and count lines and the env.
func parseSecretsReport(out *bytes.Buffer) (map[string]string, []string) {
	got := map[string]string{}
	var env []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if k, v, ok := strings.Cut(line, " "); ok && strings.HasPrefix(k, "/") {
			got[k] = v
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok && strings.HasSuffix(k, "-entries") {
			got[k] = v
			continue
		}
		env = append(env, line)
	}
	return got, env
}

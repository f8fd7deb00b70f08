package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/jailtest"
)

// The programs a CI script or an agent runs, each doing something that needs a real
// kernel feature (JIT memory, threads, inotify, fork, TLS through the proxy), in two
// default guests: one for the JavaScript world, one for the rest.

// nodeScript runs in the first guest; $1 is the CA file.
const nodeScript = `CA=$1
node --allow-natives-syntax -e '
function add(a, b) { return a + b }
%PrepareFunctionForOptimization(add); add(1, 2); add(3, 4);
%OptimizeFunctionOnNextCall(add); add(5, 6);
console.log("CHECK node_jit " + ((%GetOptimizationStatus(add) & 16) ? "optimized" : "interpreted"))'
node -e '
const { Worker } = require("worker_threads");
const w = new Worker("let s = 0; for (let i = 1; i <= 1e6; i++) s += i; require(\"worker_threads\").parentPort.postMessage(s)", { eval: true });
w.on("message", (s) => console.log("CHECK node_worker " + s));
w.on("error", (e) => console.log("CHECK node_worker " + e));'
mkdir -p /tmp/watched
node -e '
const fs = require("fs");
const t = setTimeout(() => { console.log("CHECK node_watch timeout"); process.exit(0) }, 60000);
const w = fs.watch("/tmp/watched", (ev, name) => { console.log("CHECK node_watch " + name); clearTimeout(t); w.close() });
setTimeout(() => fs.writeFileSync("/tmp/watched/made.txt", "x"), 200);'
node tls.js "$CA"
mkdir -p /tmp/app && cd /tmp/app && export npm_config_cache=/tmp/npm-cache npm_config_update_notifier=false
npm init -y >/dev/null 2>&1
npm install --offline --no-audit --no-fund "$OLDPWD/tinypkg-1.0.0.tgz" >npm.log 2>&1 || tail -5 npm.log
node -e 'console.log("CHECK npm " + require("tinypkg").hello())'
echo "CHECK claude $(claude --version 2>&1 | head -1)"
`

// tlsJS fetches https://good.test/ through the proxy in $HTTPS_PROXY with a CONNECT,
// the way proxy-aware Node clients do.
const tlsJS = `const http = require("http"), tls = require("tls"), fs = require("fs");
const proxy = new URL(process.env.HTTPS_PROXY);
const req = http.request({ host: proxy.hostname, port: proxy.port, method: "CONNECT", path: "good.test:443" });
req.on("connect", (res, sock) => {
  if (res.statusCode !== 200) { console.log("CHECK node_tls connect " + res.statusCode); return }
  const s = tls.connect({ socket: sock, servername: "good.test", ca: fs.readFileSync(process.argv[2]) }, () => {
    s.write("GET / HTTP/1.1\r\nHost: good.test\r\nConnection: close\r\n\r\n");
  });
  let body = "";
  s.on("data", (d) => body += d);
  s.on("end", () => console.log("CHECK node_tls " + body.split("\r\n\r\n")[1]));
  s.on("error", (e) => console.log("CHECK node_tls " + e.message));
});
req.on("error", (e) => console.log("CHECK node_tls " + e.message));
req.end();
`

// toolsScript runs in the second guest; $1 is the CA file, $2 GOROOT.
const toolsScript = `CA=$1 GOROOT=$2 WD=$PWD
python3 py.py "$CA"
cd /tmp && cp -r "$WD/gohello" . && cd gohello && sed -i 's/on the host/in the guest/' main.go
GOCACHE=$WD/gocache GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod HOME=/tmp "$GOROOT/bin/go" build -o hello . 2>&1 | tail -5
echo "CHECK go $(./hello)"
printf '#include <stdio.h>\nint main(void) { long s = 0; for (int i = 1; i <= 100; i++) s += i; printf("%%ld\\n", s); return 0; }\n' > /tmp/sum.c
gcc -O2 -o /tmp/sum /tmp/sum.c && echo "CHECK gcc $(/tmp/sum)"
GIT_SSL_CAINFO=$CA git clone -q https://git.test/repo.git /tmp/repo 2>&1 | tail -3
echo "CHECK git $(cat /tmp/repo/README 2>/dev/null)"
echo "CHECK openssl_dgst $(printf abc | openssl dgst -sha256 | cut -d' ' -f2)"
echo "CHECK openssl_tls $(openssl s_client -proxy "${HTTPS_PROXY#http://}" -connect good.test:443 -servername good.test -CAfile "$CA" </dev/null 2>/dev/null | grep -o 'Verify return code: .*')"
if [ -f "$WD/Hello.class" ]; then echo "CHECK java $(java -cp "$WD" Hello 2>&1 | tail -1)"; fi
`

const pyScript = `import asyncio, multiprocessing, ssl, sys, urllib.request

def sq(x):
    return x * x

async def gathered():
    async def one(i):
        await asyncio.sleep(0.01)
        return i
    return sum(await asyncio.gather(*(one(i) for i in range(10))))

if __name__ == "__main__":
    with multiprocessing.Pool(2) as p:
        print("CHECK py_mp", sum(p.map(sq, range(10))), flush=True)
    print("CHECK py_asyncio", asyncio.run(gathered()), flush=True)
    ctx = ssl.create_default_context(cafile=sys.argv[1])
    try:
        print("CHECK py_ssl", urllib.request.urlopen("https://good.test/", context=ctx, timeout=60).read().decode(), flush=True)
    except Exception as e:
        print("CHECK py_ssl", repr(e), flush=True)
`

const javaSrc = `public class Hello {
    public static void main(String[] a) throws Exception {
        long[] s = new long[1];
        Thread t = new Thread(() -> { for (int i = 1; i <= 1000; i++) s[0] += i; });
        t.start(); t.join();
        System.out.println("jvm " + s[0]);
    }
}
`

// npmTarball is an npm package tarball (package/ prefix, like npm pack) with one
// function.
func npmTarball(t *testing.T, path string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range map[string]string{
		"package/package.json": `{"name": "tinypkg", "version": "1.0.0", "main": "index.js"}`,
		"package/index.js":     `exports.hello = () => "tinypkg-ok";`,
	} {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), ModTime: time.Now()}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	gz.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// goHello writes a module that prints where it was built, and builds it once on the
// host into gocache, so the guest compiles only its main package and links.
func goHello(t *testing.T, wd string) (goroot string) {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	goroot = strings.TrimSpace(string(out))
	dir := filepath.Join(wd, "gohello")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hello\n\ngo 1.21\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"built on the host\") }\n"), 0o644)
	cmd := exec.Command(filepath.Join(goroot, "bin", "go"), "build", "-o", os.DevNull, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOCACHE="+filepath.Join(wd, "gocache"), "GOTOOLCHAIN=local", "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build on the host: %v\n%s", err, b)
	}
	return goroot
}

// TestGuestPrograms: Node.js (JIT, worker_threads, fs.watch, TLS through the proxy),
// npm, Claude Code, python3 (multiprocessing, asyncio, ssl), go build, gcc, git over
// https, openssl and Java run in default guests and give the right answers.
func TestGuestPrograms(t *testing.T) {
	if testing.Short() {
		t.Skip("boots guests; skipped in -short")
	}
	u := startUpstreams(t)
	cfg := writeRunConfig(t, u)
	for _, tool := range []string{"node", "npm", "claude", "python3", "gcc", "git", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed on the host: run scripts/deps.sh (make deps)", tool)
		}
	}
	claudeVer, err := exec.Command("claude", "--version").Output()
	if err != nil {
		t.Fatalf("claude --version on the host: %v", err)
	}

	nodeWD, toolsWD := t.TempDir(), t.TempDir()
	for name, body := range map[string]string{"node.sh": nodeScript, "tls.js": tlsJS} {
		os.WriteFile(filepath.Join(nodeWD, name), []byte(body), 0o644)
	}
	npmTarball(t, filepath.Join(nodeWD, "tinypkg-1.0.0.tgz"))
	for name, body := range map[string]string{"tools.sh": toolsScript, "py.py": pyScript, "Hello.java": javaSrc} {
		os.WriteFile(filepath.Join(toolsWD, name), []byte(body), 0o644)
	}
	goroot := goHello(t, toolsWD)
	withJava := false
	if javac, err := exec.LookPath("javac"); err == nil {
		if b, err := exec.Command(javac, "-d", toolsWD, filepath.Join(toolsWD, "Hello.java")).CombinedOutput(); err != nil {
			t.Fatalf("javac: %v\n%s", err, b)
		}
		withJava = true
	}

	common := []string{"--config", cfg, "--root", "--net", "proxy-only", "--timeout", "20m",
		"-v", u.caDir + ":/cbxca:ro", "--allow", "good.test,git.test"}
	var extra []string
	if !strings.HasPrefix(goroot, "/usr/") && !strings.HasPrefix(goroot, "/opt/") {
		extra = []string{"-v", goroot + ":" + goroot + ":ro"}
	}
	// Each guest takes its own slot when one is free; neither holds one while it waits
	// for another. Under TCG on a loaded 2-core machine Claude Code alone takes minutes.
	guest := func(wd string, args []string, stdout, stderr *bytes.Buffer, code *int, done chan<- struct{}) {
		defer close(done)
		release, err := jailtest.Acquire(context.Background())
		if err != nil {
			*code = -1
			return
		}
		defer release()
		ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
		defer cancel()
		cmd := netRun(t, ctx, wd, t.TempDir(), append(common, args...)...)
		cmd.Stdout, cmd.Stderr = stdout, stderr
		*code = exitCode(cmd.Run())
	}
	var nOut, nErr, tOut, tErr bytes.Buffer
	var nCode, tCode int
	nDone, tDone := make(chan struct{}), make(chan struct{})
	go guest(nodeWD, []string{"--", "sh", "node.sh", "/cbxca/ca.pem"}, &nOut, &nErr, &nCode, nDone)
	go guest(toolsWD, append(extra, "--", "sh", "tools.sh", "/cbxca/ca.pem", goroot), &tOut, &tErr, &tCode, tDone)
	<-nDone
	<-tDone
	t.Logf("node guest exit %d\nstdout:\n%s\nstderr:\n%s", nCode, nOut.String(), nErr.String())
	t.Logf("tools guest exit %d\nstdout:\n%s\nstderr:\n%s", tCode, tOut.String(), tErr.String())
	if nCode != 0 || tCode != 0 {
		t.Errorf("exit node=%d tools=%d, want 0", nCode, tCode)
	}

	hello := "hello good.test"
	want := map[string]string{
		"node_jit": "optimized", "node_worker": "500000500000", "node_watch": "made.txt",
		"node_tls": hello, "npm": "tinypkg-ok", "claude": strings.TrimSpace(string(claudeVer)),
	}
	checkAll(t, "node guest", nOut.String(), want)
	want = map[string]string{
		"py_mp": "285", "py_asyncio": "45", "py_ssl": hello,
		"go": "built in the guest", "gcc": "5050", "git": gitMarker,
		"openssl_dgst": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
		"openssl_tls":  "Verify return code: 0 (ok)",
	}
	if withJava {
		want["java"] = "jvm 500500"
	}
	checkAll(t, "tools guest", tOut.String(), want)
}

func checkAll(t *testing.T, who, out string, want map[string]string) {
	t.Helper()
	got := parseChecks(out)
	for name, w := range want {
		if g, ok := got[name]; !ok {
			t.Errorf("%s: no CHECK %s", who, name)
		} else if g != w {
			t.Errorf("%s: %s = %q, want %q", who, name, g, w)
		}
	}
}

package netjail

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// childEnv makes the test binary act as a crackbox run that sets up its
// network, reports it on stdout and waits to be killed.
const childEnv = "CBX_NETJAIL_TEST_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		n, err := Setup(context.Background(), Config{Pool: testPool, RunID: fmt.Sprintf("crash-%d", os.Getpid()), RunsDir: dir, UID: -1, GID: -1})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		json.NewEncoder(os.Stdout).Encode(map[string]string{"tap": n.Tap, "table": n.Table})
		time.Sleep(time.Minute) // the scenario: the test kills this child while it holds the network
		os.Exit(4)
	}
	os.Exit(m.Run())
}

// TestGCAfterSIGKILL kills a process holding a jail network with SIGKILL and
// checks that GC removes its tap, table and claim, while the live run of a
// second such process survives the same GC.
func TestGCAfterSIGKILL(t *testing.T) {
	requireNetAdmin(t)
	runsDir := t.TempDir()
	start := func() (*exec.Cmd, map[string]string) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+runsDir)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var got map[string]string
		if err := json.NewDecoder(bufio.NewReader(out)).Decode(&got); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child setup: %v", err)
		}
		t.Cleanup(func() { removeObjects(got["tap"], got["table"]) })
		return cmd, got
	}
	victim, gone := start()
	survivor, live := start()
	t.Cleanup(func() { survivor.Process.Kill(); survivor.Wait() })

	victim.Process.Kill()
	victim.Wait()
	// The killed run's objects are all still there: nothing cleaned up after it.
	if _, err := netlink.LinkByName(gone["tap"]); err != nil {
		t.Fatalf("victim's tap vanished before GC: %v", err)
	}
	removed, err := GC(runsDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("gc removed %v", removed)
	if _, err := netlink.LinkByName(gone["tap"]); err == nil {
		t.Error("killed run's tap survived GC")
	}
	if tableExists(t, gone["table"]) {
		t.Error("killed run's table survived GC")
	}
	if _, err := netlink.LinkByName(live["tap"]); err != nil {
		t.Errorf("live run's tap removed: %v", err)
	}
	if !tableExists(t, live["table"]) {
		t.Error("live run's table removed")
	}
	claims, _ := filepath.Glob(filepath.Join(runsDir, claimDirName, "*.claim"))
	if len(claims) != 1 {
		t.Errorf("claims after GC %v, want only the live run's", claims)
	}
	// Once the survivor dies too, the next GC cleans it up as well.
	survivor.Process.Kill()
	survivor.Wait()
	if _, err := GC(runsDir); err != nil {
		t.Fatal(err)
	}
	if _, err := netlink.LinkByName(live["tap"]); !errors.As(err, new(netlink.LinkNotFoundError)) {
		t.Errorf("second run's tap after its death and GC: %v", err)
	}
}

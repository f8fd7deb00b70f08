package jail_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/internal/jailtest"
)

// TestHostViewListsAndReadsWhole: the host view's /usr lists and reads exactly what the
// host holds, for a directory whose listing spans several 9p readdir requests (the guest
// kernel lists through a buffer of at most 64 KiB) and a file read in many requests, cold and again from the guest's caches; and a read-only volume lists from
// the guest's memory what it listed before (roListings).
func TestHostViewListsAndReadsWhole(t *testing.T) {
	jailtest.Require(t)
	dir := widestDir(t, "/usr/share/man/man3", "/usr/lib/x86_64-linux-gnu", "/usr/bin", "/usr/include/linux")
	const tree = "/usr/include"
	big := "/usr/bin/qemu-system-x86_64" // present wherever guests boot
	wantDir := hostNames(t, dir)
	wantTree := hostTree(t, tree)
	wantSum := fileSum(t, big)
	ro := readOnlyListings(t)

	script := "set -e\n" + roScript + `ls -1a "$1" | LC_ALL=C sort; echo ==
find "$2" | LC_ALL=C sort; echo ==
find "$2" | LC_ALL=C sort; echo ==
sha256sum "$3" | cut -d' ' -f1; echo 3 > /proc/sys/vm/drop_caches; sha256sum "$3" | cut -d' ' -f1`
	s := jailtest.Spec(t, "sh", "-c", script, "sh", dir, tree, big)
	s.Root = true
	var errb bytes.Buffer
	out := newLineWriter()
	s.Stdout, s.Stderr = out, &errb
	ro.attach(t, &s, out)
	res, err := jailtest.Run(t, s)
	ro.wait()
	if err != nil || res.Exit != 0 {
		t.Fatalf("exit %d err %v stderr %q", res.Exit, err, errb.String())
	}
	parts := strings.Split(out.all.String(), "==\n")
	if len(parts) != 5 {
		t.Fatalf("output has %d parts, want 5: %q", len(parts), out.all.String())
	}
	ro.check(t, parts[0])
	parts = parts[1:]
	if got := lines(parts[0]); !slices.Equal(got, wantDir) {
		t.Errorf("guest lists %d names in %s, the host %d (first differences: %v)", len(got), dir, len(wantDir), firstDiff(got, wantDir))
	}
	for i, p := range parts[1:3] {
		if got := lines(p); !slices.Equal(got, wantTree) {
			t.Errorf("pass %d: guest finds %d paths under %s, the host %d (first differences: %v)", i+1, len(got), tree, len(wantTree), firstDiff(got, wantTree))
		}
	}
	if got := lines(parts[3]); !slices.Equal(got, []string{wantSum, wantSum}) {
		t.Errorf("sha256 of %s in the guest %v, on the host %s", big, got, wantSum)
	}
}

// widestDir returns the candidate whose 9p listing is longest (about 24 bytes of qid,
// offset and type per entry plus its name).
func widestDir(t *testing.T, cands ...string) string {
	best, most := "", 0
	for _, d := range cands {
		es, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		n := 0
		for _, e := range es {
			n += 24 + len(e.Name())
		}
		if n > most {
			best, most = d, n
		}
	}
	if best == "" {
		t.Fatalf("none of %v exists on the host", cands)
	}
	t.Logf("%s: %d bytes of listing", best, most)
	return best
}

func hostNames(t *testing.T, dir string) []string {
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{".", ".."}
	for _, e := range es {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

func hostTree(t *testing.T, root string) []string {
	var paths []string
	err := filepath.WalkDir(root, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(paths)
	return paths
}

func fileSum(t *testing.T, p string) string {
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func lines(s string) []string {
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// firstDiff names up to three entries only one side has.
func firstDiff(got, want []string) []string {
	var d []string
	for _, g := range got {
		if _, ok := slices.BinarySearch(want, g); !ok && len(d) < 3 {
			d = append(d, "+"+g)
		}
	}
	for _, w := range want {
		if _, ok := slices.BinarySearch(got, w); !ok && len(d) < 6 {
			d = append(d, "-"+w)
		}
	}
	return d
}

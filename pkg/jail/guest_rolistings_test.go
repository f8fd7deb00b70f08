package jail_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/pkg/jail"
)

// roListings is the read-only volume's part of TestHostViewListsAndReadsWhole. The guest
// kernel keeps every listing of a read-only cache=loose share that it read to the end
// (such a mount already trusts the share not to change under the run), so listing the
// directory again asks the server nothing. That shows as a name the host adds once the
// guest has listed: absent when the guest lists that directory again, present in a
// directory the guest first lists afterwards and in one whose listing is too large to
// keep. seekdir back into a listing returns the same entries, kept or not.
type roListings struct {
	vol   string
	stdin *io.PipeWriter
	stop  chan struct{}
	done  chan struct{}
	// sums are the hashes of each directory's sorted listing, before and after the
	// host adds a name.
	before, after map[string]string
}

// roScript lists kept and big, says "listed", waits for a line on stdin (the host has
// added a name to every directory by then), and lists all three again.
const roScript = `cd /ro
sum() { ls -1A "$1" | LC_ALL=C sort | sha256sum | cut -d' ' -f1; }
seek() { perl -e 'opendir(my $d, $ARGV[0]) or die "$ARGV[0]: $!";
my @all = readdir $d; rewinddir $d; my $n = int(@all / 2);
for (1 .. $n) { my $x = readdir $d }
my $p = telldir $d; my @a = readdir $d; seekdir $d, $p; my @b = readdir $d;
print((@a && "@a" eq "@b" && @a + $n == @all) ? "seek ok\n" : "seek differs in $ARGV[0]\n")' "$1"; }
sum kept; sum big; seek kept; echo listed
read go
sum kept; sum big; sum fresh; seek kept; seek big; echo ==
`

func readOnlyListings(t *testing.T) *roListings {
	r := &roListings{vol: t.TempDir(), stop: make(chan struct{}), done: make(chan struct{})}
	// kept: about 130 KiB of listing, more than one 64 KiB readdir request, so the kept
	// listing is put together from several replies. big: over 1 MiB, more than the guest
	// keeps for one directory.
	r.fill(t, "kept", 1500, 64)
	r.fill(t, "big", 4800, 220)
	r.fill(t, "fresh", 3, 8)
	r.before = map[string]string{"kept": r.sum(t, "kept"), "big": r.sum(t, "big")}
	r.after = map[string]string{}
	return r
}

func (r *roListings) fill(t *testing.T, dir string, n, nameLen int) {
	d := filepath.Join(r.vol, dir)
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		name := fmt.Sprintf("%06d", i) + strings.Repeat("x", nameLen-6)
		if err := os.WriteFile(filepath.Join(d, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// sum hashes dir's names as `ls -1A | LC_ALL=C sort` prints them.
func (r *roListings) sum(t *testing.T, dir string) string {
	names := hostNames(t, filepath.Join(r.vol, dir))[2:] // no "." and ".."
	h := sha256.Sum256([]byte(strings.Join(names, "\n") + "\n"))
	return hex.EncodeToString(h[:])
}

// attach shares the volume read-only at /ro and, once the guest says "listed", adds a
// name to each directory and lets the guest go on. roScript's output must come first in
// out: lineWriter drops lines nobody reads.
func (r *roListings) attach(t *testing.T, s *jail.Spec, out *lineWriter) {
	s.Volumes = append(s.Volumes, jail.Volume{Host: r.vol, Guest: "/ro", ReadOnly: true})
	pr, pw := io.Pipe()
	s.Stdin, r.stdin = pr, pw
	go func() {
		defer close(r.done)
		defer pw.Close()
		timeout := time.After(10 * time.Minute)
		for {
			select {
			case l := <-out.lines:
				if l != "listed" {
					continue
				}
				for _, d := range []string{"kept", "big", "fresh"} {
					if err := os.WriteFile(filepath.Join(r.vol, d, "added"), nil, 0o644); err != nil {
						t.Error(err)
						return
					}
					r.after[d] = r.sum(t, d)
				}
				pw.Write([]byte("go\n"))
				return
			case <-r.stop:
				return
			case <-timeout:
				t.Error("the guest never said it had listed /ro")
				return
			}
		}
	}()
}

func (r *roListings) wait() {
	close(r.stop)
	<-r.done
}

func (r *roListings) check(t *testing.T, part string) {
	got := lines(part)
	want := []string{r.before["kept"], r.before["big"], "seek ok", "listed",
		r.before["kept"], r.after["big"], r.after["fresh"], "seek ok", "seek ok"}
	if len(got) != len(want) {
		t.Fatalf("read-only volume: guest printed %q, want %d lines", got, len(want))
	}
	what := []string{"kept, first listing", "big, first listing", "seekdir in kept", "",
		"kept, listed again after the host added a name (the guest keeps the listing it read)",
		"big, listed again (too large to keep: the new name shows)",
		"fresh, first listed after the host added a name",
		"seekdir in kept, kept listing", "seekdir in big"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("read-only volume, %s: guest %q, want %q", what[i], got[i], want[i])
		}
	}
	if slices.Equal(got, want) {
		t.Logf("read-only volume: kept listing served again from the guest; big and fresh read from the host")
	}
}

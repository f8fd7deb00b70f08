// Package mailtest runs a real, throwaway mail system for tests: Debian's postfix
// (SMTP on a loopback high port, delivering into Maildirs) and dovecot (IMAP on
// another loopback port, serving those Maildirs), each with its own config under
// one temp dir, both direct children of the test process, stopped and removed
// when the test ends.
//
// The receiving postfix stamps each mail it accepts with an Authentication-Results
// header above its own Received header, where a receiving server's milters
// (opendkim, opendmarc) put theirs. The verdicts come from a per-sender table
// (PREPEND in a check_sender_access map): this machine has no DNS for real SPF and
// DKIM checks, and the code under test trusts the receiving server's stamp, not
// how the server reached it.
package mailtest

import (
	"bytes"
	"fmt"
	"net"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/proc"
	"github.com/crackbox/crackbox/internal/testreq"
)

// AuthservID is the receiving server's name in its Authentication-Results headers.
const AuthservID = "mx.test"

// Password is every mailbox's IMAP password.
const Password = "secret"

// mailUID owns the Maildirs: postfix's virtual agent delivers as it and
// dovecot reads as it.
const mailUID = 5000

// Options shape the mail system.
type Options struct {
	// Users are the addresses with a mailbox; their domains are the ones
	// postfix accepts mail for.
	Users []string
	// Verdicts maps an envelope sender (address or domain) to the result
	// list postfix stamps on its mail, e.g. "spf=pass smtp.mailfrom=a.test".
	// A sender without a row gets no stamp.
	Verdicts map[string]string
	// NoIdle has dovecot leave IDLE out of its capabilities, as a server
	// without it would.
	NoIdle bool
}

// Server is one running postfix and dovecot.
type Server struct {
	SMTP string // host:port, plain SMTP without authentication, as a receiving server
	// Submission is host:port of plain SMTP that takes mail only after AUTH
	// PLAIN as a user with Password, and only from that user's address.
	Submission string
	IMAP       string // host:port, plain IMAP, any user with Password

	dir      string
	mu       sync.Mutex
	postfix  *child
	dovecot  *child
	imapPort int
}

// Start runs the mail system until t ends. It needs root (postfix's master
// and dovecot drop to their own users) and Debian's postfix and dovecot-imapd.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	testreq.Root(t, "postfix and dovecot start as root and drop to their own users")
	for _, b := range []struct{ path, pkg string }{{"/usr/lib/postfix/sbin/master", "postfix"}, {"/usr/sbin/dovecot", "dovecot-imapd"}} {
		if _, err := os.Stat(b.path); err != nil {
			testreq.Missing(t, b.path, "apt-get install "+b.pkg+" (make test-deps installs it)")
		}
	}
	dir, err := os.MkdirTemp("", "mailtest-")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{dir: dir}
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.postfix.stop()
		s.dovecot.stop()
		os.RemoveAll(dir)
	})
	// postfix and dovecot run as their own users and must reach their dirs.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	smtpPort, subPort, imapPort := freePort(t), freePort(t), freePort(t)
	s.SMTP, s.IMAP, s.imapPort = fmt.Sprintf("127.0.0.1:%d", smtpPort), fmt.Sprintf("127.0.0.1:%d", imapPort), imapPort
	s.Submission = fmt.Sprintf("127.0.0.1:%d", subPort)
	if err := s.writePostfix(o, smtpPort, subPort); err != nil {
		t.Fatal(err)
	}
	if err := s.writeDovecot(o); err != nil {
		t.Fatal(err)
	}
	if s.postfix, err = startChild(filepath.Join(dir, "postfix.log"), "/usr/lib/postfix/sbin/master", "-c", s.path("postfix"), "-d"); err != nil {
		t.Fatal(err)
	}
	if err := waitListen(s.SMTP, s.postfix); err != nil {
		t.Fatalf("postfix: %v\n%s", err, s.Log())
	}
	s.StartIMAP(t)
	return s
}

func (s *Server) path(p ...string) string { return filepath.Join(append([]string{s.dir}, p...)...) }

// StopIMAP stops dovecot; connected clients lose their connections.
func (s *Server) StopIMAP(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dovecot.stop()
	s.dovecot = nil
}

// StartIMAP starts dovecot (again) on the same port.
func (s *Server) StartIMAP(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	if s.dovecot, err = startChild(s.path("dovecot.out"), "/usr/sbin/dovecot", "-F", "-c", s.path("dovecot", "dovecot.conf")); err != nil {
		t.Fatal(err)
	}
	if err := waitListen(s.IMAP, s.dovecot); err != nil {
		t.Fatalf("dovecot: %v\n%s", err, s.Log())
	}
}

// Send submits one message over SMTP with the given envelope.
func (s *Server) Send(t testing.TB, from string, to []string, msg []byte) {
	t.Helper()
	if err := smtp.SendMail(s.SMTP, nil, from, to, msg); err != nil {
		t.Fatalf("send mail from %q: %v\n%s", from, err, s.Log())
	}
}

// Mailbox returns the raw messages in user's INBOX, oldest first.
func (s *Server) Mailbox(t testing.TB, user string) [][]byte {
	t.Helper()
	local, domain, _ := strings.Cut(user, "@")
	var files []string
	for _, sub := range []string{"new", "cur"} {
		m, _ := filepath.Glob(s.path("mail", domain, local, "Maildir", sub, "*"))
		files = append(files, m...)
	}
	// postfix names a Maildir file <seconds>.V<dev>I<inode>M<microseconds>.<host>.
	sort.Slice(files, func(i, j int) bool { return deliveredAt(files[i]) < deliveredAt(files[j]) })
	var out [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// deliveredAt is a Maildir file's delivery time in microseconds, from its name.
func deliveredAt(path string) int64 {
	name := filepath.Base(path)
	sec, rest, _ := strings.Cut(name, ".")
	_, usec, _ := strings.Cut(rest, "M")
	usec, _, _ = strings.Cut(usec, ".")
	s, _ := strconv.ParseInt(sec, 10, 64)
	u, _ := strconv.ParseInt(usec, 10, 64)
	return s*1_000_000 + u
}

// WaitMailbox waits until user's INBOX holds at least n messages and returns them.
func (s *Server) WaitMailbox(t testing.TB, user string, n int, d time.Duration) [][]byte {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		m := s.Mailbox(t, user)
		if len(m) >= n {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d messages after %s, want %d\n%s", user, len(m), d, n, s.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Log is postfix's and dovecot's logs.
func (s *Server) Log() string {
	var b bytes.Buffer
	for _, f := range []string{"postfix.log", "dovecot.out", "dovecot.log"} {
		out, _ := os.ReadFile(s.path(f))
		fmt.Fprintf(&b, "--- %s\n%s", f, out)
	}
	return b.String()
}

// child is one server process, killed with the test binary if it dies.
type child struct {
	cmd  *exec.Cmd
	done <-chan struct{} // closed once the server has been waited for
}

func startChild(logPath, name string, args ...string) (*child, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	c := &child{cmd: exec.Command(name, args...)}
	c.cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C.UTF-8"}
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	// Its own process group, so stop can end the children a server leaves.
	proc.Tie(c.cmd, syscall.SIGTERM)
	if c.done, err = proc.Spawn(c.cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return c, nil
}

// stop asks the server to end, waits for it, and kills what is left of
// its process group: dovecot's master exits at once while a client's imap
// process lingers for seconds, and a stopped server must drop its clients.
func (c *child) stop() {
	if c == nil {
		return
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	proc.Stop(c.cmd, c.done, 15*time.Second)
	proc.KillGroup(c.cmd)
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitListen waits until addr accepts connections; generous, for a loaded machine.
func waitListen(addr string, c *child) error {
	deadline := time.Now().Add(time.Minute)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		if c.exited() {
			return fmt.Errorf("exited before listening on %s", addr)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on %s: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

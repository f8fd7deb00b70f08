package control

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Message types on the ctl stream.
const (
	// host -> guest
	MsgRun      = "run"      // Run is set; sent once, first
	MsgSignal   = "signal"   // Signal is set
	MsgResize   = "resize"   // Rows, Cols are set
	MsgPoweroff = "poweroff" // stop the command and power off
	// guest -> host
	MsgStarted = "started" // the command is running; Pid is set
	MsgExit    = "exit"    // Exit is set; the guest powers off after sending it
	MsgLog     = "log"     // Text is a line for the host's debug log
)

// Message is one JSON line on the ctl stream.
type Message struct {
	Type   string   `json:"type"`
	Run    *RunSpec `json:"run,omitempty"`
	Signal int      `json:"signal,omitempty"`
	Rows   uint16   `json:"rows,omitempty"`
	Cols   uint16   `json:"cols,omitempty"`
	Pid    int      `json:"pid,omitempty"`
	Exit   *Exit    `json:"exit,omitempty"`
	Text   string   `json:"text,omitempty"`
}

// Exit is how the command ended.
type Exit struct {
	Code   int    `json:"code"`             // exit status when it exited normally
	Signal int    `json:"signal,omitempty"` // signal number when it was killed
	Error  string `json:"error,omitempty"`  // ExecNotFound, ExecNotExecutable, or a setup failure
}

// Exit.Error values the host maps to exit codes 127 and 126.
const (
	ExecNotFound      = "not-found"
	ExecNotExecutable = "not-executable"
)

// RunSpec is everything guest-init needs to set up the guest and run one command.
type RunSpec struct {
	Argv     []string `json:"argv"`
	Env      []string `json:"env"` // the complete environment; guest-init adds nothing but proxy vars
	Dir      string   `json:"dir"`
	UID      int      `json:"uid"`
	GID      int      `json:"gid"`
	Groups   []int    `json:"groups,omitempty"`
	TTY      bool     `json:"tty"`
	Rows     uint16   `json:"rows,omitempty"`
	Cols     uint16   `json:"cols,omitempty"`
	Hostname string   `json:"hostname,omitempty"`

	// PathFrom is the caller's PATH, split: guest-init sets PATH to those of its entries
	// that exist in the guest (in order; a relative one against Dir), and keeps Env's
	// PATH when none does. Empty when Env's PATH is the caller's own choice.
	PathFrom []string `json:"path_from,omitempty"`

	Root   Root    `json:"root"`
	Mounts []Mount `json:"mounts,omitempty"`
	Net    Net     `json:"net"`

	// MCPSocket, when set, is a path in the guest where guest-init listens on a unix
	// socket and carries each connection to the host as an mcp stream.
	MCPSocket string `json:"mcp_socket,omitempty"`

	// Seed is host randomness guest-init mixes into the kernel's pool, and TimeUnixNano
	// the host's wall clock it sets, before anything else runs: a guest restored from a
	// snapshot would otherwise share its CRNG state and stale clock with every other.
	Seed         []byte `json:"seed,omitempty"`
	TimeUnixNano int64  `json:"time_unix_nano,omitempty"`

	// Swap is how many bytes of the swap disk (the virtio-blk device whose serial is
	// SwapSerial) the host formatted as swap for guest-init to turn on, so the upper
	// layers of shares synced at exit can outgrow the guest's memory; 0 = none. The
	// device may look larger (a snapshot guest saw the largest); the host refuses
	// writes past Swap.
	Swap int64 `json:"swap,omitempty"`
}

// SwapSerial is the serial number of the guest's swap disk.
const SwapSerial = "crackbox-swap"

// Root describes the guest's root filesystem. Every Lower share is mounted read-only at
// its Target and covered by a tmpfs overlay, so the command can write anywhere and all of
// it is gone at power-off. In "hostview" mode the lowers are the host's /usr, /etc and
// /opt; in "rootfs" mode a single lower with Target "/" is a whole directory tree.
type Root struct {
	Mode  string  `json:"mode"` // "hostview" or "rootfs"
	Lower []Mount `json:"lower"`
	// Symlinks are created in the root after the lowers, e.g. the merged-/usr links
	// bin -> usr/bin, mirroring the host.
	Symlinks map[string]string `json:"symlinks,omitempty"`
	// Mask lists guest paths hidden from the command (an empty read-only tmpfs over a
	// directory, an empty file over a file), applied after the root is built.
	Mask []string `json:"mask,omitempty"`
}

// Mount is a host directory shared into the guest.
type Mount struct {
	Tag      string `json:"tag"`
	Target   string `json:"target"`
	FSType   string `json:"fstype"` // "9p" or "virtiofs"
	ReadOnly bool   `json:"readonly"`
	// Port names the virtio-serial port that carries a stream share's 9p on its own,
	// when the host gave it one; without, the share is a stream of the control session.
	Port string `json:"port,omitempty"`
	// Sync is SyncExit for a read-write share the guest keeps its writes for in a
	// layer of its own and hands back as one changes stream when the command ends;
	// "" writes through to the host as the command writes.
	Sync string `json:"sync,omitempty"`
	// SyncLimit bounds that layer, in bytes (the disk quota); 0 = no bound but memory.
	SyncLimit int64 `json:"sync_limit,omitempty"`
}

// SyncExit is Mount.Sync for a share whose changes reach the host when the run ends.
const SyncExit = "exit"

// A share synced at exit hands its changes back as a tar stream on a KindSync stream,
// each directory before what it holds; two PAX records say what a plain entry cannot.
const (
	// SyncRemove marks an entry that removes whatever the share holds at its path.
	SyncRemove = "CRACKBOX.remove"
	// SyncOpaque marks a directory that replaces the share's: its entries go first.
	SyncOpaque = "CRACKBOX.opaque"
)

// Guest network modes (Net.Mode); pkg/jail's Net* constants are these.
const (
	NetNone      = "none"
	NetTap       = "tap"
	NetProxyOnly = "proxy-only"
)

// Net configures the guest network.
type Net struct {
	// Mode is "none" (loopback only), "tap" (eth0 with Addr/Gateway, resolver DNS) or
	// "proxy-only" (no NIC; guest-init listens on ProxyListen and carries each
	// connection to the host as a proxy stream).
	Mode        string `json:"mode"`
	Addr        string `json:"addr,omitempty"`    // CIDR, e.g. 10.77.0.2/30
	Gateway     string `json:"gateway,omitempty"` // host side of the tap
	DNS         string `json:"dns,omitempty"`
	ProxyURL    string `json:"proxy_url,omitempty"`    // exported as HTTP(S)_PROXY etc.
	ProxyListen string `json:"proxy_listen,omitempty"` // proxy-only mode, e.g. 127.0.0.1:3128
	// TrustCA is a PEM CA certificate the command must trust on top of the
	// system bundle: the run's injection CA. guest-init writes the combined
	// bundle to guest.TrustBundle.
	TrustCA string `json:"trust_ca,omitempty"`
}

// MaxMessage bounds one ctl message, so a hostile peer cannot make the reader buffer
// without end. A RunSpec is a few KiB.
const MaxMessage = 1 << 20

// ErrMessageTooLarge is returned by Recv for a line longer than MaxMessage.
var ErrMessageTooLarge = errors.New("control: message too large")

// Conn reads and writes Messages on a ctl stream, one JSON object per line. Send is safe
// for concurrent use.
type Conn struct {
	mu sync.Mutex
	w  io.Writer
	r  *bufio.Reader
}

// NewConn wraps a ctl stream.
func NewConn(rw io.ReadWriter) *Conn {
	return &Conn{w: rw, r: bufio.NewReader(rw)}
}

// Send writes one message.
func (c *Conn) Send(m Message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("control: marshal %s: %w", m.Type, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("control: send %s: %w", m.Type, err)
	}
	return nil
}

// Recv reads the next message.
func (c *Conn) Recv() (Message, error) {
	var line []byte
	for {
		chunk, err := c.r.ReadSlice('\n')
		if len(line)+len(chunk) > MaxMessage {
			return Message{}, fmt.Errorf("%w: over %d bytes", ErrMessageTooLarge, MaxMessage)
		}
		line = append(line, chunk...)
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return Message{}, fmt.Errorf("control: recv: %w", err)
	}
	var m Message
	if err := json.Unmarshal(line, &m); err != nil {
		return Message{}, fmt.Errorf("control: recv: %w", err)
	}
	return m, nil
}

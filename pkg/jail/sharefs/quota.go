package sharefs

import (
	"sync"

	"github.com/hugelgupf/p9/p9"
	"golang.org/x/sys/unix"
)

// quota bounds how much a share may grow during one run: bytes written past a file's
// end, counted by size (a sparse hole counts in full), plus entryCost for every file,
// directory, symlink or hard link the guest makes, minus what the guest truncates or
// removes. A nil quota or a zero limit bounds nothing.
type quota struct {
	mu     sync.Mutex
	limit  int64
	used   int64
	onFull func()

	// change orders what the guest does to sizes and links: a write that may grow a
	// file, an open or a create holds it shared; whatever frees room (a remove, a
	// rename over an entry, a truncation, a last close) or adds a link holds it alone.
	// So the stat that decides what a removal frees still holds when it frees, and a
	// write never re-grows a file behind a truncation's back.
	change sync.RWMutex
	// opens counts the guest's open fids per host file (under mu). A file removed
	// while open keeps its data on the host until its last close, which frees it.
	opens map[inode]int
}

// inode names a file on the host.
type inode struct{ dev, ino uint64 }

func inodeOf(st *unix.Stat_t) inode { return inode{dev: st.Dev, ino: st.Ino} }

// shared and alone take the change lock; both return its release. On a share
// without a quota nothing needs ordering.
func (q *quota) shared() func() {
	if q == nil {
		return func() {}
	}
	q.change.RLock()
	return q.change.RUnlock
}

func (q *quota) alone() func() {
	if q == nil {
		return func() {}
	}
	q.change.Lock()
	return q.change.Unlock
}

// opened counts one more open fid of k. Its caller holds the change lock.
func (q *quota) opened(k inode) {
	if q == nil {
		return
	}
	q.mu.Lock()
	if q.opens == nil {
		q.opens = map[inode]int{}
	}
	q.opens[k]++
	q.mu.Unlock()
}

// closing counts one open fid of k less, before fd (that fid's descriptor) is closed,
// with the change lock held alone. At the last close of a file no entry names any
// more, its data leaves the host, and its room comes back.
func (q *quota) closing(k inode, fd int) {
	if q == nil {
		return
	}
	q.mu.Lock()
	q.opens[k]--
	last := q.opens[k] <= 0
	if last {
		delete(q.opens, k)
	}
	q.mu.Unlock()
	var st unix.Stat_t
	if last && unix.Fstat(fd, &st) == nil && st.Nlink == 0 && st.Mode&unix.S_IFMT == unix.S_IFREG {
		q.release(st.Size)
	}
}

// removing is what removing the entry st frees, with the change lock held alone: its
// entry, and a file's data when this is its last link and no fid holds it open (else
// the last close frees the data).
func (q *quota) removing(st *unix.Stat_t) int64 {
	if q == nil {
		return 0
	}
	free := int64(entryCost)
	if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink == 1 {
		q.mu.Lock()
		open := q.opens[inodeOf(st)] > 0
		q.mu.Unlock()
		if !open {
			free += st.Size
		}
	}
	return free
}

// entryCost is what one directory entry counts against the quota: a block, about what
// an empty file or directory costs the host's filesystem, so a guest cannot spend the
// host's inodes for free.
const entryCost = 4096

// reserve takes n bytes of the quota, or reports that they do not fit.
func (q *quota) reserve(n int64) bool {
	if q == nil || q.limit <= 0 || n <= 0 {
		return true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.used+n > q.limit {
		if q.onFull != nil {
			q.onFull()
		}
		return false
	}
	q.used += n
	return true
}

// release gives n bytes back. Removing data the share held before the run frees room
// too, so used may go below zero.
func (q *quota) release(n int64) {
	if q == nil || q.limit <= 0 || n <= 0 {
		return
	}
	q.mu.Lock()
	q.used -= n
	q.mu.Unlock()
}

// statfs shows the quota as the filesystem's size when it is the smaller bound, so df
// in the guest tells the truth about the room left.
func (q *quota) statfs(s *p9.FSStat) {
	if q == nil || q.limit <= 0 || s.BlockSize == 0 {
		return
	}
	q.mu.Lock()
	left := max(0, q.limit-q.used)
	q.mu.Unlock()
	bs := uint64(s.BlockSize)
	free := uint64(left) / bs
	if free < s.BlocksAvailable {
		s.BlocksAvailable = free
		s.BlocksFree = free
		s.Blocks = uint64(q.limit) / bs
	}
}

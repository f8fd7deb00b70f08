package sharefs

import (
	"sync"

	"github.com/hugelgupf/p9/p9"
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

package sharefs

import (
	"strings"

	"golang.org/x/sys/unix"
)

// dirCache keeps the O_PATH fds of the directories an apply walked to, by their path
// relative to the share's root, so the entries of one directory do not each walk from
// the root again. Each fd was opened from its cached parent one component at a time
// with O_DIRECTORY|O_NOFOLLOW, as walkDir does, so it is a directory that was inside
// the share when opened. A stream cannot rename: a directory leaves its path only by
// being removed, and the apply forgets a path and everything under it before every
// removal, so a later entry walks again and meets whatever took its place (a symlink
// is refused there as anywhere).
type dirCache struct {
	fds map[string]int
	// naive never forgets: tests only, to show what forgetting prevents.
	naive bool
}

// maxDirs bounds the fds one apply keeps open; past it the cache starts over.
const maxDirs = 64

func newDirCache() *dirCache { return &dirCache{fds: map[string]int{}} }

// walk returns a new O_PATH fd of the directory rel; the caller closes it.
func (c *dirCache) walk(root int, rel string) (int, error) {
	fd, err := c.dir(root, rel)
	if err != nil {
		return -1, err
	}
	return unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
}

// dir is the cached fd of rel, opened (with the directories above it that are not
// cached) if it is not cached yet. One component at a time, without recursion: the
// stream names the path.
func (c *dirCache) dir(root int, rel string) (int, error) {
	if rel == "." || rel == "" {
		return root, nil
	}
	if fd, ok := c.fds[rel]; ok {
		return fd, nil
	}
	fd, from := root, 0
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		if pfd, ok := c.fds[rel[:i]]; ok {
			fd, from = pfd, i+1
		}
	}
	for from < len(rel) {
		end := len(rel)
		if i := strings.IndexByte(rel[from:], '/'); i >= 0 {
			end = from + i
		}
		if cached, ok := c.fds[rel[:end]]; ok {
			fd, from = cached, end+1
			continue
		}
		nfd, err := unix.Openat(fd, rel[from:end], unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		if len(c.fds) >= maxDirs {
			c.close() // fd's job is done: nfd is open
		}
		c.fds[rel[:end]] = nfd
		fd, from = nfd, end+1
	}
	return fd, nil
}

// forget drops rel and every directory under it.
func (c *dirCache) forget(rel string) {
	if c.naive {
		return
	}
	if rel == "." {
		c.close()
		return
	}
	for k, fd := range c.fds {
		if k == rel || strings.HasPrefix(k, rel+"/") {
			unix.Close(fd)
			delete(c.fds, k)
		}
	}
}

// close closes every cached fd.
func (c *dirCache) close() {
	for k, fd := range c.fds {
		unix.Close(fd)
		delete(c.fds, k)
	}
}

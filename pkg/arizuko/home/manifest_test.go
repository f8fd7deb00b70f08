package home

import (
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"
)

var (
	hA = Sum([]byte("a"))
	hB = Sum([]byte("b"))
)

func file(p string, size int64, chunks ...string) Entry {
	return Entry{Path: p, Mode: 0o644, Size: size, Chunks: chunks}
}

func dir(p string) Entry { return Entry{Path: p, Mode: uint32(fs.ModeDir) | 0o755} }

func link(p, to string) Entry { return Entry{Path: p, Mode: uint32(fs.ModeSymlink) | 0o777, Link: to} }

func TestDiff(t *testing.T) {
	for _, c := range []struct {
		name string
		a, b []Entry
		want []Change
	}{
		{"both empty", nil, nil, nil},
		{"all added", nil, []Entry{dir("d"), file("d/x", 1, hA)}, []Change{{"d", "added"}, {"d/x", "added"}}},
		{"all removed", []Entry{file("x", 1, hA)}, nil, []Change{{"x", "removed"}}},
		{"unchanged", []Entry{file("x", 1, hA)}, []Entry{file("x", 1, hA)}, nil},
		{"content", []Entry{file("x", 1, hA)}, []Entry{file("x", 1, hB)}, []Change{{"x", "changed"}}},
		{"mode", []Entry{file("x", 1, hA)}, []Entry{{Path: "x", Mode: 0o755, Size: 1, Chunks: []string{hA}}}, []Change{{"x", "changed"}}},
		{"file to symlink", []Entry{file("x", 1, hA)}, []Entry{link("x", "y")}, []Change{{"x", "changed"}}},
		{"link target", []Entry{link("x", "y")}, []Entry{link("x", "z")}, []Change{{"x", "changed"}}},
		{"interleaved", []Entry{file("a", 1, hA), file("c", 1, hA)}, []Entry{file("b", 1, hA), file("c", 1, hB)},
			[]Change{{"a", "removed"}, {"b", "added"}, {"c", "changed"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Diff(Manifest{c.a}, Manifest{c.b}); !slices.Equal(got, c.want) {
				t.Errorf("Diff = %v, want %v", got, c.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	big := make([]string, 2)
	big[0], big[1] = hA, hB
	for _, c := range []struct {
		name    string
		entries []Entry
		bad     string // "" valid, else a word of the error
	}{
		{"empty", nil, ""},
		{"file dir link", []Entry{dir("d"), file("d/x", 1, hA), link("l", "/etc/passwd")}, ""},
		{"two chunks", []Entry{file("x", ChunkSize+1, big...)}, ""},
		{"empty file", []Entry{file("x", 0)}, ""},
		{"absolute", []Entry{file("/etc/passwd", 1, hA)}, "path"},
		{"dotdot", []Entry{file("../x", 1, hA)}, "not clean"},
		{"inner dotdot", []Entry{file("a/../../x", 1, hA)}, "not clean"},
		{"empty segment", []Entry{file("a//x", 1, hA)}, "not clean"},
		{"unsorted", []Entry{file("b", 1, hA), file("a", 1, hA)}, "sorted"},
		{"duplicate", []Entry{file("a", 1, hA), file("a", 1, hA)}, "sorted"},
		{"bad hash", []Entry{file("a", 1, "../../etc")}, "not a sha256"},
		{"size and chunks disagree", []Entry{file("a", ChunkSize+1, hA)}, "chunks"},
		{"dir with content", []Entry{{Path: "d", Mode: uint32(fs.ModeDir), Size: 1, Chunks: []string{hA}}}, "content"},
		{"symlink without target", []Entry{{Path: "l", Mode: uint32(fs.ModeSymlink)}}, "target"},
		{"device", []Entry{{Path: "dev", Mode: uint32(fs.ModeDevice)}}, "only files"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := Manifest{c.entries}
			_, err := Decode(m.Encode())
			switch {
			case c.bad == "" && err != nil:
				t.Errorf("valid manifest refused: %v", err)
			case c.bad != "" && (!errors.Is(err, ErrBadManifest) || !strings.Contains(err.Error(), c.bad)):
				t.Errorf("err = %v, want ErrBadManifest naming %q", err, c.bad)
			}
		})
	}
}

func TestLimits(t *testing.T) {
	m := Manifest{[]Entry{file("a", 10, hA), file("b", 10, hB)}}
	for _, c := range []struct {
		lim  Limits
		want string
	}{
		{Limits{}, ""},
		{Limits{MaxBytes: 20, MaxFiles: 2}, ""},
		{Limits{MaxBytes: 19}, "fleet.home.max_bytes"},
		{Limits{MaxFiles: 1}, "fleet.home.max_files"},
	} {
		err := c.lim.Check(m)
		if c.want == "" && err != nil || c.want != "" && (!errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: err = %v, want %q", c.lim, err, c.want)
		}
	}
}

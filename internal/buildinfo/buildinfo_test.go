package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	vcs := func(rev, mod string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: mod}}
	}
	main := func(v string) debug.Module { return debug.Module{Path: "github.com/crackbox/crackbox", Version: v} }
	for _, tc := range []struct {
		name       string
		bi         *debug.BuildInfo
		ldV, ldRev string
		want       string
	}{
		{"stamped by go", &debug.BuildInfo{GoVersion: "go1.26.0", Main: main("v0.3.0"), Settings: vcs("abc123", "false")}, "", "",
			"github.com/crackbox/crackbox v0.3.0 (revision abc123, go1.26.0)"},
		{"dirty tree", &debug.BuildInfo{GoVersion: "go1.26.0", Main: main("(devel)"), Settings: vcs("abc123", "true")}, "", "",
			"github.com/crackbox/crackbox devel (revision abc123, modified, go1.26.0)"},
		{"worktree: ldflags fill in", &debug.BuildInfo{GoVersion: "go1.26.0", Main: main("(devel)")}, "v0.3.0-4-gabc123", "abc123-dirty",
			"github.com/crackbox/crackbox v0.3.0-4-gabc123 (revision abc123, modified, go1.26.0)"},
		{"go's stamp wins over ldflags", &debug.BuildInfo{GoVersion: "go1.26.0", Main: main("v1.0.0"), Settings: vcs("def456", "false")}, "v0.1.0", "abc123",
			"github.com/crackbox/crackbox v1.0.0 (revision def456, go1.26.0)"},
		{"nothing known", nil, "", "", "github.com/crackbox/crackbox devel (revision unknown)"},
	} {
		if got := fromBuildInfo(tc.bi, tc.ldV, tc.ldRev).String(); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

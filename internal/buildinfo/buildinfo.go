// Package buildinfo says which build of crackbox is running: the module
// version and VCS revision Go stamped into the binary, or the values the
// Makefile passes with -ldflags -X when Go could not stamp them (a git
// worktree, a build from a release tarball).
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Set with -ldflags "-X github.com/crackbox/crackbox/internal/buildinfo.version=… -X ….revision=…".
var (
	version  string
	revision string
)

// Info describes one build.
type Info struct {
	Module   string `json:"module"`
	Version  string `json:"version"`            // module version, or "devel"
	Revision string `json:"revision,omitempty"` // VCS commit
	Modified bool   `json:"modified,omitempty"` // built from a tree with uncommitted changes
	Go       string `json:"go"`
}

// Get returns this binary's build information.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuildInfo(bi, version, revision)
}

func fromBuildInfo(bi *debug.BuildInfo, ldVersion, ldRevision string) Info {
	in := Info{Module: "github.com/crackbox/crackbox", Version: "devel"}
	if bi != nil {
		in.Go = bi.GoVersion
		if bi.Main.Path != "" {
			in.Module = bi.Main.Path
		}
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			in.Version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Revision = s.Value
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
	}
	if in.Version == "devel" && ldVersion != "" {
		in.Version = ldVersion
	}
	if in.Revision == "" && ldRevision != "" {
		in.Revision, in.Modified = strings.CutSuffix(ldRevision, "-dirty")
	}
	return in
}

// String is the one-line form --version prints, e.g.
// "github.com/crackbox/crackbox v0.3.0 (revision 1468aa7c0d1e, modified, go1.26.0)".
func (in Info) String() string {
	var extra []string
	if in.Revision != "" {
		extra = append(extra, "revision "+in.Revision)
	} else {
		extra = append(extra, "revision unknown")
	}
	if in.Modified {
		extra = append(extra, "modified")
	}
	if in.Go != "" {
		extra = append(extra, in.Go)
	}
	return in.Module + " " + in.Version + " (" + strings.Join(extra, ", ") + ")"
}

// Fields is the build as flat strings for health documents: version,
// revision and the --version line.
func (in Info) Fields() map[string]string {
	return map[string]string{"version": in.Version, "revision": in.Revision, "build": in.String()}
}

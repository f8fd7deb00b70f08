package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/crackbox/crackbox/pkg/jail"
)

// parseVolume parses a -v flag, HOST:GUEST[:ro|:rw]; a relative HOST is taken from cwd.
func parseVolume(s, cwd string) (jail.Volume, error) {
	parts := strings.Split(s, ":")
	v := jail.Volume{}
	switch len(parts) {
	case 2:
	case 3:
		switch parts[2] {
		case "ro":
			v.ReadOnly = true
		case "rw":
		default:
			return v, fmt.Errorf("%w: volume %q: mode %q must be ro or rw", jail.ErrBadSpec, s, parts[2])
		}
	default:
		return v, fmt.Errorf("%w: volume %q: write it as HOST:GUEST or HOST:GUEST:ro", jail.ErrBadSpec, s)
	}
	if parts[0] == "" || parts[1] == "" {
		return v, fmt.Errorf("%w: volume %q: both HOST and GUEST paths are needed", jail.ErrBadSpec, s)
	}
	v.Host = parts[0]
	if !filepath.IsAbs(v.Host) {
		v.Host = filepath.Join(cwd, v.Host)
	}
	v.Guest = parts[1]
	return v, nil
}

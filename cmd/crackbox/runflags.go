package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/crackbox/crackbox/pkg/jail"
)

// checkWorkdirFlags refuses workdir flags that contradict each other: --no-workdir shares
// nothing, so a -w or --ro beside it would be dropped without a word.
func checkWorkdirFlags(rf runFlags) error {
	if !rf.noWorkdir {
		return nil
	}
	switch {
	case rf.workdir != "":
		return errors.New("-w shares a directory and --no-workdir shares none; drop one of them")
	case rf.ro:
		return errors.New("--ro makes the work directory read-only and --no-workdir shares none; drop one of them")
	}
	return nil
}

// checkWorkdirNotVolume refuses -w naming a volume's guest path, as docker's -v HOST:/src
// -w /src would: -w here is a host directory shared at its own path, so /src would be
// looked up on the host.
func checkWorkdirNotVolume(workdir string, vols []jail.Volume) error {
	if workdir == "" {
		return nil
	}
	abs, err := filepath.Abs(workdir)
	if err != nil {
		return err
	}
	for _, v := range vols {
		if filepath.Clean(v.Guest) == abs && filepath.Clean(v.Host) != abs {
			return fmt.Errorf("-w %s is the guest path of volume %s:%s, but -w names a host directory, shared at the same path, where the command starts; use -w %s instead of the volume", workdir, v.Host, v.Guest, v.Host)
		}
	}
	return nil
}

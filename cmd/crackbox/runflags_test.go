package main

import (
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/jail"
)

// TestWorkdirFlagsRefused: workdir flags that cannot take effect are refused with the fix.
func TestWorkdirFlagsRefused(t *testing.T) {
	tests := []struct {
		name string
		rf   runFlags
		vols []jail.Volume
		want string
	}{
		{"-w with --no-workdir", runFlags{noWorkdir: true, workdir: "/src"}, nil, "drop one of them"},
		{"--ro with --no-workdir", runFlags{noWorkdir: true, ro: true}, nil, "drop one of them"},
		{"-w onto a volume's guest path", runFlags{workdir: "/src"}, []jail.Volume{{Host: "/home/u/proj", Guest: "/src"}}, "use -w /home/u/proj"},
		{"-w alone", runFlags{workdir: "/home/u/proj"}, []jail.Volume{{Host: "/data", Guest: "/data"}}, ""},
	}
	for _, tc := range tests {
		err := checkWorkdirFlags(tc.rf)
		if err == nil {
			err = checkWorkdirNotVolume(tc.rf.workdir, tc.vols)
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}

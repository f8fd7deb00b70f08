package proc

import (
	"errors"
	"os"
	"os/exec"
	"testing"
)

func TestStartTellsProcessesApart(t *testing.T) {
	self, err := Start(os.Getpid())
	if err != nil || self == 0 {
		t.Fatalf("Start(self) = %d, %v", self, err)
	}
	again, _ := Start(os.Getpid())
	if again != self {
		t.Fatalf("start time changed: %d then %d", self, again)
	}
	cmd := exec.Command("sleep", "0.01")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(cmd.Process.Pid); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Start(reaped child) = %v, want os.ErrNotExist", err)
	}
}

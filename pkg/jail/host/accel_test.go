package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestChooseAccel(t *testing.T) {
	pvm := Facts{KVMOpens: true} // this CI machine: /dev/kvm from kvm_pvm
	intel := Facts{KVMOpens: true, KVMModule: "kvm_intel"}
	flagsOnly := Facts{KVMOpens: true, CPUVirtExt: true}
	noKVM := Facts{KVMErr: "no such file or directory", CPUVirtExt: true}
	cases := []struct {
		name  string
		want  string
		probe Facts
		got   string
		err   bool
	}{
		{"auto on kvm_pvm picks tcg", "auto", pvm, AccelTCG, false},
		{"empty means auto", "", pvm, AccelTCG, false},
		{"auto with kvm_intel picks kvm", "auto", intel, AccelKVM, false},
		{"auto with vmx flag picks kvm", "auto", flagsOnly, AccelKVM, false},
		{"auto without /dev/kvm picks tcg", "auto", noKVM, AccelTCG, false},
		{"tcg forced on a kvm host", "tcg", intel, AccelTCG, false},
		{"kvm forced without /dev/kvm fails", "kvm", noKVM, "", true},
		{"kvm forced on kvm_pvm is honoured", "kvm", pvm, AccelKVM, false},
		{"unknown accelerator", "hvf", intel, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, why, err := ChooseAccel(c.want, c.probe)
			if (err != nil) != c.err {
				t.Fatalf("err = %v, want error %v", err, c.err)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "accel") || !strings.Contains(err.Error(), "use ") {
					t.Fatalf("err %v: want one naming the accel and the fix", err)
				}
				return
			}
			if got != c.got {
				t.Fatalf("accel = %q (%s), want %q", got, why, c.got)
			}
			if why == "" {
				t.Fatal("empty reason")
			}
		})
	}
}

func TestCPUHasVirt(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct {
		text string
		want bool
	}{
		"vmx":                  {"processor\t: 0\nflags\t\t: fpu vme vmx sse\n", true},
		"svm":                  {"flags\t\t: fpu svm\n", true},
		"none":                 {"flags\t\t: fpu vme sse hypervisor\n", false},
		"vmx in another field": {"model name\t: vmx\nflags\t\t: fpu\n", false},
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := cpuHasVirt(p); got != c.want {
			t.Errorf("%s: cpuHasVirt = %v, want %v", name, got, c.want)
		}
	}
}

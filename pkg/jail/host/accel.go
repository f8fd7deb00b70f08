// Package host probes this machine for what a run needs from it: whether QEMU's user may
// open /dev/kvm and the CPU has hardware virtualisation, and so which accelerator a run
// gets. Run decides with it and `crackbox doctor` shows the same facts and fixes.
package host

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// Accelerators.
const (
	AccelAuto = "auto"
	AccelKVM  = "kvm"
	AccelTCG  = "tcg"
)

// Facts is what the accelerator decision looks at; Probe fills it from the machine.
type Facts struct {
	KVMOpens   bool   // QEMU's user may open /dev/kvm read-write (CheckKVM)
	KVMErr     string // why it may not
	KVMFix     string // what the user can do about it
	KVMModule  string // "kvm_intel", "kvm_amd" or "" (another module, e.g. kvm_pvm, may serve /dev/kvm)
	CPUVirtExt bool   // vmx or svm in /proc/cpuinfo
}

// Probe inspects /dev/kvm (for the user QEMU will run as), /sys/module and
// /proc/cpuinfo.
func Probe() Facts {
	var p Facts
	v := probeKVMAccess()
	p.KVMOpens, p.KVMErr, p.KVMFix = v.OK, v.Why, v.Fix
	for _, m := range []string{"kvm_intel", "kvm_amd"} {
		if _, err := os.Stat("/sys/module/" + m); err == nil {
			p.KVMModule = m
		}
	}
	p.CPUVirtExt = cpuHasVirt("/proc/cpuinfo")
	return p
}

func cpuHasVirt(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "flags") {
			continue
		}
		for _, fl := range strings.Fields(line) {
			if fl == "vmx" || fl == "svm" {
				return true
			}
		}
		return false
	}
	return false
}

// ChooseAccel decides between KVM and TCG. KVM is used only when /dev/kvm opens and the
// host has real hardware virtualisation (kvm_intel/kvm_amd loaded or vmx/svm present):
// some hosts serve /dev/kvm from an emulating module (kvm_pvm) on which guests hang.
// It returns the accelerator, a one-line reason, and an error when want cannot be met
// (pkg/jail reports it as a bad spec).
func ChooseAccel(want string, p Facts) (string, string, error) {
	hw := p.KVMModule != "" || p.CPUVirtExt
	why := ""
	switch {
	case !p.KVMOpens:
		why = "/dev/kvm is not usable"
		if p.KVMErr != "" {
			why += ": " + p.KVMErr
		}
	case !hw:
		why = "/dev/kvm opens but neither kvm_intel nor kvm_amd is loaded and the CPU shows no vmx/svm"
	}
	switch want {
	case "", AccelAuto:
		if why == "" {
			return AccelKVM, "kvm: /dev/kvm usable with hardware virtualisation", nil
		}
		return AccelTCG, "tcg: " + why, nil
	case AccelTCG:
		return AccelTCG, "tcg: requested", nil
	case AccelKVM:
		if !p.KVMOpens {
			return "", "", fmt.Errorf("accel kvm requested but %s; use --accel tcg or auto", why)
		}
		if why != "" {
			return AccelKVM, "kvm: requested although " + why, nil
		}
		return AccelKVM, "kvm: requested", nil
	}
	return "", "", fmt.Errorf("accel %q: use auto, kvm or tcg", want)
}

package jail_test

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkBootKernels boots the floor (BenchmarkRunVsFloor's QEMU command line, whose
// guest-init powers off at once) with each kernel of $CRACKBOX_BENCH_KERNELS
// ("label=path label=path ...", default: the test kernel alone) and each guest CPU
// (QEMU's default TCG model and -cpu max), interleaved so background load falls on all
// alike. It reports boot to guest-init per kernel and CPU, by guest uptime and by host
// time from QEMU start, and logs each kernel's size.
func BenchmarkBootKernels(b *testing.B) {
	c := newCLIBench(b)
	type kernel struct{ label, path string }
	kernels := []kernel{{"test", c.kernel}}
	if v := os.Getenv("CRACKBOX_BENCH_KERNELS"); v != "" {
		kernels = nil
		for _, f := range strings.Fields(v) {
			label, path, ok := strings.Cut(f, "=")
			if !ok {
				b.Fatalf("CRACKBOX_BENCH_KERNELS entry %q: want label=path", f)
			}
			kernels = append(kernels, kernel{label, path})
		}
	}
	for _, k := range kernels {
		st, err := os.Stat(k.path)
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("kernel %s: %s, %.1f MiB", k.label, k.path, float64(st.Size())/(1<<20))
	}
	idle := c.startIdle(b, nil)
	argv := idle.qemuArgv
	idle.stop(b)
	base := c.floorArgv(b, argv)
	i := slices.Index(base, "-cpu")
	if i < 0 || base[i+1] != "max" {
		b.Skipf("the run's QEMU has no -cpu max (KVM?): %q", base)
	}
	cpus := map[string][]string{"max": base, "default": slices.Delete(slices.Clone(base), i, i+2)}
	guest := map[string][]time.Duration{}
	host := map[string][]time.Duration{}
	for b.Loop() {
		for _, k := range kernels {
			for _, cpu := range []string{"default", "max"} {
				a := slices.Clone(cpus[cpu])
				for j := range a {
					if a[j] == c.kernel {
						a[j] = k.path
					}
				}
				_, ug, uh := c.runFloor(b, a)
				name := k.label + "/" + cpu
				guest[name], host[name] = append(guest[name], ug), append(host[name], uh)
				b.Logf("%s: guest-init at uptime %s, host %s", name, ms(ug), ms(uh))
			}
		}
	}
	for _, k := range kernels {
		for _, cpu := range []string{"default", "max"} {
			name := k.label + "/" + cpu
			report(b, name+"-init-uptime", guest[name])
			report(b, name+"-init-host", host[name])
		}
	}
}

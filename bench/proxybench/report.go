package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// Targets from the issue, for the subject proxy.
const (
	wantThroughputRatio = 0.9 // of direct
	wantRateRatio       = 1.5 // of the best other proxy
	wantAddedP99        = time.Millisecond
	wantIdleRSSMiB      = 250.0
)

type runInfo struct {
	Date     string   `json:"date"`
	Machine  string   `json:"machine"`
	Command  string   `json:"command"`
	Notes    []string `json:"notes,omitempty"`
	Subject  string   `json:"subject"`
	Repeat   int      `json:"repeat"`
	Bytes    int64    `json:"bytes"`
	Tunnels  int      `json:"tunnels"`
	Conc     int      `json:"concurrency"`
	SeqN     int      `json:"latency_tunnels"`
	Idle     int      `json:"idle"`
	IdleGoal int      `json:"idle_goal"`
	Duration string   `json:"duration"`
}

type verdict struct {
	Name     string  `json:"name"`
	Value    float64 `json:"value"` // in Unit
	Unit     string  `json:"unit"`  // "×", "ms" or "MiB"
	Measured string  `json:"measured"`
	Target   string  `json:"target"`
	Met      bool    `json:"met"`
	Margin   string  `json:"margin"`
}

func (v verdict) format(x float64) string {
	switch v.Unit {
	case "×":
		return fmt.Sprintf("%.2f×", x)
	case "ms":
		return fmt.Sprintf("%.2f ms", x)
	}
	return fmt.Sprintf("%.0f %s", x, v.Unit)
}

func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	kernel := "?"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	mem := ""
	if kb, err := memTotalKB(); err == nil {
		mem = fmt.Sprintf(", %.0f GiB RAM", float64(kb)/(1<<20))
	}
	return fmt.Sprintf("%d × %s%s, Linux %s, %s", runtime.NumCPU(), model, mem, kernel, runtime.Version())
}

func memTotalKB() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	var kb int64
	_, err = fmt.Sscanf(string(b), "MemTotal: %d kB", &kb)
	return kb, err
}

func find(rs []*result, name string) *result {
	for _, r := range rs {
		if r.Target.Name == name {
			return r
		}
	}
	return nil
}

// verdicts checks the subject against the targets.
func verdicts(rs []*result, subject string, idleGoal int) []verdict {
	s, d := find(rs, subject), find(rs, "direct")
	if s == nil {
		return nil
	}
	var out []verdict
	if d != nil && d.ThroughputMiBs > 0 && s.ThroughputMiBs > 0 {
		ratio := s.ThroughputMiBs / d.ThroughputMiBs
		measured := fmt.Sprintf("%.2f× (%.0f vs %.0f MiB/s)", ratio, s.ThroughputMiBs, d.ThroughputMiBs)
		for _, r := range rs {
			if r != s && r != d && r.ThroughputMiBs > 0 {
				measured += fmt.Sprintf("; %s %.2f×", r.Target.Name, r.ThroughputMiBs/d.ThroughputMiBs)
			}
		}
		out = append(out, verdict{Name: "CONNECT throughput vs direct", Value: ratio, Unit: "×",
			Measured: measured, Target: fmt.Sprintf("≥ %.1f×", wantThroughputRatio),
			Met: ratio >= wantThroughputRatio, Margin: fmt.Sprintf("%+.0f%%", (ratio/wantThroughputRatio-1)*100)})
	}
	var best *result
	for _, r := range rs {
		if r != s && !r.Target.direct() && !r.Target.Baseline && (best == nil || r.RatePerSec > best.RatePerSec) {
			best = r
		}
	}
	if best != nil && best.RatePerSec > 0 && s.RatePerSec > 0 {
		ratio := s.RatePerSec / best.RatePerSec
		measured := fmt.Sprintf("%.2f× (%.0f vs %s %.0f /s)", ratio, s.RatePerSec, best.Target.Name, best.RatePerSec)
		if s.RateCPU > 0 && best.RateCPU > 0 {
			measured += fmt.Sprintf("; proxy CPU per tunnel %.2f× %s's",
				(s.RateCPU/float64(s.RateTunnels))/(best.RateCPU/float64(best.RateTunnels)), best.Target.Name)
		}
		for _, r := range rs {
			if r.Target.Baseline && r.RatePerSec > 0 {
				measured += fmt.Sprintf("; %s %.2f×", r.Target.Name, r.RatePerSec/best.RatePerSec)
			}
		}
		out = append(out, verdict{Name: "tunnel rate vs best other proxy", Value: ratio, Unit: "×",
			Measured: measured, Target: fmt.Sprintf("≥ %.1f×", wantRateRatio),
			Met: ratio >= wantRateRatio, Margin: fmt.Sprintf("%+.0f%%", (ratio/wantRateRatio-1)*100)})
	}
	if d != nil && s.SeqP99 > 0 && d.SeqP99 > 0 {
		added := s.SeqP99 - d.SeqP99
		out = append(out, verdict{Name: "added p99 latency per tunnel", Value: float64(added) / 1e6, Unit: "ms",
			Measured: ms(added) + " ms", Target: fmt.Sprintf("≤ %s ms", ms(wantAddedP99)),
			Met: added <= wantAddedP99, Margin: fmt.Sprintf("%+.2f ms", float64(wantAddedP99-added)/1e6)})
	}
	if s.RSSIdleMiB > 0 && s.IdleOpened > 0 {
		rss, how := s.RSSIdleMiB, fmt.Sprintf("%d open", s.IdleOpened)
		if s.IdleOpened != idleGoal {
			rss = s.extrapolate(idleGoal)
			how = fmt.Sprintf("extrapolated from %.0f MiB at %d open", s.RSSIdleMiB, s.IdleOpened)
		}
		out = append(out, verdict{Name: fmt.Sprintf("RSS with %d idle tunnels", idleGoal), Value: rss, Unit: "MiB",
			Measured: fmt.Sprintf("%.0f MiB (%s)", rss, how), Target: fmt.Sprintf("≤ %.0f MiB", wantIdleRSSMiB),
			Met: rss <= wantIdleRSSMiB, Margin: fmt.Sprintf("%+.0f MiB", wantIdleRSSMiB-rss)})
	}
	return out
}

// extrapolate scales the RSS growth of the idle phase linearly to n tunnels.
func (r *result) extrapolate(n int) float64 {
	return r.RSSBaseMiB + (r.RSSIdleMiB-r.RSSBaseMiB)*float64(n)/float64(r.IdleOpened)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/1e6) }

func writeMarkdown(w io.Writer, info runInfo, rs []*result, vs []verdict) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("- Date: %s\n- Machine: %s\n- Command: `%s`\n- Wall time: %s\n", info.Date, info.Machine, info.Command, info.Duration)
	if info.Repeat > 1 {
		p("- Throughput, rate and latency: median of %d full runs; CPU per GiB and per tunnel: totals over all runs\n", info.Repeat)
	}
	for _, n := range info.Notes {
		p("- %s\n", n)
	}
	var checked []string
	for _, r := range rs {
		if r.DenyChecked {
			checked = append(checked, r.Target.Name)
		}
	}
	if len(checked) > 0 {
		p("- Allowlist check: %s refused CONNECT not-allowed.test before the run\n", strings.Join(checked, ", "))
	}
	p("\n|  |")
	for _, r := range rs {
		p(" %s |", r.Target.Name)
	}
	p("\n|---|")
	for range rs {
		p("---:|")
	}
	p("\n")
	d := find(rs, "direct")
	row := func(label string, f func(r *result) string) {
		p("| %s |", label)
		for _, r := range rs {
			p(" %s |", f(r))
		}
		p("\n")
	}
	na := "–"
	row(fmt.Sprintf("CONNECT throughput, %s download (MiB/s)", size(info.Bytes)), func(r *result) string {
		if r.ThroughputMiBs == 0 {
			return na
		}
		if d != nil && d.ThroughputMiBs > 0 && r != d {
			return fmt.Sprintf("%.0f (%.2f×)", r.ThroughputMiBs, r.ThroughputMiBs/d.ThroughputMiBs)
		}
		return fmt.Sprintf("%.0f", r.ThroughputMiBs)
	})
	row("proxy CPU per GiB (s)", func(r *result) string {
		if r.Target.direct() || r.ThroughputBytes == 0 {
			return na
		}
		return fmt.Sprintf("%.2f", r.ThroughputCPU/(float64(r.ThroughputBytes)/(1<<30)))
	})
	row("bench client+upstream CPU per GiB (s)", func(r *result) string {
		if r.ThroughputBytes == 0 || r.ThroughputSelf == 0 {
			return na
		}
		return fmt.Sprintf("%.2f", r.ThroughputSelf/(float64(r.ThroughputBytes)/(1<<30)))
	})
	row(fmt.Sprintf("new tunnels/s, %d clients, %d tunnels a run", info.Conc, info.Tunnels), func(r *result) string {
		if r.RatePerSec == 0 {
			return na
		}
		s := fmt.Sprintf("%.0f", r.RatePerSec)
		if r.RateErrors > 0 {
			s += fmt.Sprintf(" (%d failed)", r.RateErrors)
		}
		return s
	})
	row("proxy CPU per 1,000 tunnels (s)", func(r *result) string {
		if r.Target.direct() || r.RateTunnels == 0 {
			return na
		}
		return fmt.Sprintf("%.2f", r.RateCPU/float64(r.RateTunnels)*1000)
	})
	row("bench client+upstream CPU per 1,000 tunnels (s)", func(r *result) string {
		if r.RateTunnels == 0 {
			return na
		}
		return fmt.Sprintf("%.2f", r.RateSelfCPU/float64(r.RateTunnels)*1000)
	})
	row(fmt.Sprintf("tunnel p50 / p99 at %d clients (ms)", info.Conc), func(r *result) string {
		if r.LoadP50 == 0 {
			return na
		}
		return ms(r.LoadP50) + " / " + ms(r.LoadP99)
	})
	row(fmt.Sprintf("tunnel p50 / p99, one at a time, %d tunnels a run (ms)", info.SeqN), func(r *result) string {
		if r.SeqP50 == 0 {
			return na
		}
		return ms(r.SeqP50) + " / " + ms(r.SeqP99)
	})
	row("added p50 / p99 vs direct, one at a time (ms)", func(r *result) string {
		if d == nil || r == d || r.SeqP50 == 0 {
			return na
		}
		return ms(r.SeqP50-d.SeqP50) + " / " + ms(r.SeqP99-d.SeqP99)
	})
	row("RSS before idle phase (MiB)", func(r *result) string {
		if r.RSSBaseMiB == 0 {
			return na
		}
		return fmt.Sprintf("%.1f", r.RSSBaseMiB)
	})
	row(fmt.Sprintf("RSS with %d idle tunnels (MiB)", info.Idle), func(r *result) string {
		if r.RSSIdleMiB == 0 {
			return na
		}
		s := fmt.Sprintf("%.1f", r.RSSIdleMiB)
		if r.IdleOpened != r.IdleWanted {
			s += fmt.Sprintf(" (only %d opened)", r.IdleOpened)
		}
		return s
	})
	if info.IdleGoal != info.Idle {
		row(fmt.Sprintf("RSS extrapolated to %d idle tunnels (MiB)", info.IdleGoal), func(r *result) string {
			if r.RSSIdleMiB == 0 || r.IdleOpened == 0 {
				return na
			}
			return fmt.Sprintf("%.1f", r.extrapolate(info.IdleGoal))
		})
	}
	row("RSS growth per idle tunnel (KiB)", func(r *result) string {
		if r.RSSIdleMiB == 0 || r.IdleOpened == 0 {
			return na
		}
		return fmt.Sprintf("%.1f", (r.RSSIdleMiB-r.RSSBaseMiB)*1024/float64(r.IdleOpened))
	})
	row("open descriptors per idle tunnel", func(r *result) string {
		if r.IdleFDs == 0 || r.IdleOpened == 0 {
			return na
		}
		return fmt.Sprintf("%.1f", float64(r.IdleFDs)/float64(r.IdleOpened))
	})
	if len(vs) > 0 {
		p("\nTargets for %s:\n\n| target | measured | goal | met | margin |\n|---|---|---|---|---|\n", info.Subject)
		for _, v := range vs {
			met := "**missed**"
			if v.Met {
				met = "met"
			}
			p("| %s | %s | %s | %s | %s |\n", v.Name, v.Measured, v.Target, met, v.Margin)
		}
	}
	var errs []string
	for _, r := range rs {
		for _, e := range r.Errors {
			errs = append(errs, r.Target.Name+": "+e)
		}
	}
	if len(errs) > 0 {
		p("\nErrors:\n\n")
		for _, e := range errs {
			p("- %s\n", e)
		}
	}
}

func size(n int64) string {
	if n%(1<<30) == 0 {
		return fmt.Sprintf("%d GiB", n>>30)
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

package main

import (
	"fmt"
	"slices"
	"time"
)

// aggregate folds several runs into one result per target: the median of
// each rate and latency figure, and CPU costs summed over all runs so the
// per-GiB and per-tunnel figures use every sample.
func aggregate(reps [][]*result) []*result {
	out := make([]*result, len(reps[0]))
	for j := range out {
		r := &result{Target: reps[0][j].Target, DenyChecked: reps[0][j].DenyChecked}
		var tput, rate []float64
		var lp50, lp99, sp50, sp99 []time.Duration
		for _, rep := range reps {
			x := rep[j]
			r.Errors = append(r.Errors, x.Errors...)
			if x.ThroughputMiBs > 0 {
				tput = append(tput, x.ThroughputMiBs)
				r.ThroughputBytes += x.ThroughputBytes
				r.ThroughputCPU += x.ThroughputCPU
				r.ThroughputSelf += x.ThroughputSelf
			}
			r.RateTunnels += x.RateTunnels
			r.RateErrors += x.RateErrors
			r.RateCPU += x.RateCPU
			r.RateSelfCPU += x.RateSelfCPU
			if x.RatePerSec > 0 {
				rate = append(rate, x.RatePerSec)
				lp50, lp99 = append(lp50, x.LoadP50), append(lp99, x.LoadP99)
			}
			if x.SeqP50 > 0 {
				sp50, sp99 = append(sp50, x.SeqP50), append(sp99, x.SeqP99)
			}
		}
		r.ThroughputMiBs, r.RatePerSec = median(tput), median(rate)
		r.LoadP50, r.LoadP99 = median(lp50), median(lp99)
		r.SeqP50, r.SeqP99 = median(sp50), median(sp99)
		out[j] = r
	}
	return out
}

func median[T float64 | time.Duration](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// addRanges appends to each verdict the spread of its figure over the runs,
// which is what tells a real difference from this machine's noise.
func addRanges(vs []verdict, reps [][]*result, subject string, idleGoal int) {
	if len(reps) < 2 {
		return
	}
	for i := range vs {
		var vals []float64
		for _, rep := range reps {
			for _, v := range verdicts(rep, subject, idleGoal) {
				if v.Name == vs[i].Name {
					vals = append(vals, v.Value)
				}
			}
		}
		if len(vals) < 2 {
			continue
		}
		lo, hi := slices.Min(vals), slices.Max(vals)
		vs[i].Measured += fmt.Sprintf("; per run %s–%s", vs[i].format(lo), vs[i].format(hi))
	}
}

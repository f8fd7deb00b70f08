package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"
)

func run(o opts) error {
	if o.idleGoal <= 0 {
		o.idleGoal = o.idleN
	}
	if len(o.targets) == 0 {
		return errors.New("no -target given: pass at least -target direct")
	}
	if o.bytes <= 0 || o.tunnels <= 0 || o.conc <= 0 || o.rateRounds <= 0 || o.tputRounds <= 0 || o.repeat <= 0 {
		return errors.New("-bytes, -tunnels, -concurrency, -repeat, -rate-rounds and -throughput-rounds must be positive")
	}
	up, err := startUpstream(o.upstream)
	if err != nil {
		return fmt.Errorf("upstream: %w", err)
	}
	defer up.close()
	b := &bench{upstream: o.upstream, up: up, opTimeout: o.opTimeout, concurrency: o.conc}
	start := time.Now()

	reps := make([][]*result, o.repeat)
	for k := range reps {
		slog.Info("run", "n", k+1, "of", o.repeat, "elapsed", time.Since(start).Round(time.Second))
		reps[k] = measureRun(b, o, k == 0)
	}
	rs := aggregate(reps)
	if o.idleN > 0 {
		slog.Info("phase", "name", "idle tunnels", "elapsed", time.Since(start).Round(time.Second))
		for _, r := range rs {
			if r.Target.direct() {
				continue
			}
			b.idle(r, o.idleN, o.settle)
			slog.Info("idle", "target", r.Target.Name, "opened", r.IdleOpened, "rss_mib", fmt.Sprintf("%.1f", r.RSSIdleMiB))
			time.Sleep(time.Second) // let the proxy finish closing before the next one starts
		}
	}

	info := runInfo{
		Date: start.UTC().Format("2006-01-02 15:04 UTC"), Machine: machine(),
		Command: o.command, Notes: o.notes, Subject: o.subject, Repeat: o.repeat,
		Bytes: o.bytes, Tunnels: o.tunnels, Conc: o.conc, SeqN: o.seqN, Idle: o.idleN, IdleGoal: o.idleGoal,
		Duration: time.Since(start).Round(time.Second).String(),
	}
	vs := verdicts(rs, o.subject, o.idleGoal)
	addRanges(vs, reps, o.subject, o.idleGoal)
	report := func(w io.Writer) { writeMarkdown(w, info, rs, vs) }
	report(os.Stdout)
	if o.mdPath != "" {
		f, err := os.Create(o.mdPath)
		if err != nil {
			return err
		}
		report(f)
		if err := f.Close(); err != nil {
			return err
		}
	}
	if o.jsonPath != "" {
		out, _ := json.MarshalIndent(struct {
			Info     runInfo     `json:"info"`
			Results  []*result   `json:"results"`
			Verdicts []verdict   `json:"verdicts"`
			Runs     [][]*result `json:"runs"`
		}{info, rs, vs, reps}, "", "  ")
		if err := os.WriteFile(o.jsonPath, append(out, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// measureRun is one pass of the throughput, rate and latency phases over
// every target, each phase rotating through the targets so that background
// load varies alike for all of them.
func measureRun(b *bench, o opts, first bool) []*result {
	rs := make([]*result, len(o.targets))
	for i, t := range o.targets {
		rs[i] = &result{Target: t}
	}
	for _, r := range rs {
		if first {
			b.checkDeny(r, "not-allowed.test")
		}
		b.warm(r, 100)
	}
	for round := 0; round < o.tputRounds; round++ {
		for _, r := range rs {
			b.throughput(r, o.bytes)
		}
	}
	accs := make([]rateAcc, len(rs))
	for round := 0; round < o.rateRounds; round++ {
		n := o.tunnels / o.rateRounds
		if round == o.rateRounds-1 {
			n = o.tunnels - n*(o.rateRounds-1)
		}
		for i, r := range rs {
			b.rate(r, n, &accs[i])
		}
	}
	for i, r := range rs {
		r.setRate(&accs[i])
	}
	if o.seqN > 0 {
		b.sequential(rs, o.seqN)
	}
	for _, r := range rs {
		slog.Info("measured", "target", r.Target.Name, "mib_s", fmt.Sprintf("%.0f", r.ThroughputMiBs),
			"tunnels_s", fmt.Sprintf("%.0f", r.RatePerSec), "p99_ms", ms(r.SeqP99), "errors", len(r.Errors))
	}
	return rs
}

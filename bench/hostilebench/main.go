// Command hostilebench measures how much memory `crackbox proxy serve` gives
// to hostile clients: connections that send one request whose headers never
// end, from a registered and from an unregistered source address. It starts
// each crackbox binary it is given in turn, in one run, and prints the idle
// and peak RSS of each as a markdown table.
//
//	go build -o bin/hostilebench ./bench/hostilebench
//	bin/hostilebench -bin new=bin/crackbox -bin old=/tmp/crackbox-before
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type binFlag []string

func (b *binFlag) String() string     { return strings.Join(*b, ",") }
func (b *binFlag) Set(s string) error { *b = append(*b, s); return nil }

type config struct {
	conns   int
	perConn int64
	limit   time.Duration
	port    int
}

type result struct {
	label, scenario  string
	idle, peak       int64 // bytes
	sent             int64
	answered, closed int
}

func main() {
	var bins binFlag
	var cfg config
	flag.Var(&bins, "bin", "label=path of a crackbox binary (repeatable); measured in the order given")
	flag.IntVar(&cfg.conns, "conns", 100, "parallel hostile connections")
	flag.Int64Var(&cfg.perConn, "bytes", 4<<20, "header bytes each connection tries to send")
	flag.DurationVar(&cfg.limit, "time", 20*time.Second, "longest a scenario runs")
	flag.IntVar(&cfg.port, "port", 18190, "loopback port the proxy under test listens on")
	flag.Parse()
	if len(bins) == 0 {
		fmt.Fprintln(os.Stderr, "hostilebench: give at least one -bin label=path")
		os.Exit(2)
	}
	var results []result
	for _, b := range bins {
		label, path, ok := strings.Cut(b, "=")
		if !ok {
			label, path = filepath.Base(b), b
		}
		rs, err := measure(label, path, cfg)
		if err != nil {
			fmt.Fprintf(os.Stderr, "hostilebench: %s: %v\n", label, err)
			os.Exit(1)
		}
		results = append(results, rs...)
	}
	fmt.Printf("%d parallel connections, each sending up to %d MiB of one header line\n\n", cfg.conns, cfg.perConn>>20)
	fmt.Println("| binary | client | idle RSS | peak RSS | peak − idle | bytes out (incl. socket buffers) | answered | cut off early |")
	fmt.Println("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range results {
		fmt.Printf("| %s | %s | %.1f MiB | %.1f MiB | %.1f MiB | %.1f MiB | %d | %d |\n", r.label, r.scenario,
			mib(r.idle), mib(r.peak), mib(r.peak-r.idle), mib(r.sent), r.answered, r.closed)
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// measure runs both scenarios against one binary, a fresh process for each
// so the second starts from a true idle.
func measure(label, path string, cfg config) ([]result, error) {
	var out []result
	for _, sc := range []struct{ name, src string }{{"registered", "127.0.0.1"}, {"unregistered", "127.0.0.2"}} {
		r, err := scenario(path, sc.src, cfg)
		if err != nil {
			return nil, err
		}
		r.label, r.scenario = label, sc.name
		out = append(out, r)
		slog.Info("scenario done", "binary", label, "client", sc.name, "peak_mib", mib(r.peak))
	}
	return out, nil
}

// scenario starts the binary and floods it from src.
func scenario(path, src string, cfg config) (result, error) {
	dir, err := os.MkdirTemp("", "hostilebench")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	conf := filepath.Join(dir, "crackbox.toml")
	if err := os.WriteFile(conf, nil, 0o644); err != nil {
		return result{}, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(cfg.port)
	cmd := exec.Command(path, "proxy", "serve", "--config", conf, "--listen", addr,
		"--transparent", "", "--admin", "", "--client", "127.0.0.1", "--allow", "bench.upstream.test")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	if err := waitPort(addr); err != nil {
		return result{}, err
	}
	time.Sleep(time.Second) // let the runtime settle before reading idle
	idle, err := rss(cmd.Process.Pid)
	if err != nil {
		return result{}, err
	}
	r := flood(cmd.Process.Pid, addr, src, cfg)
	r.idle = idle
	return r, nil
}

func waitPort(addr string) error {
	for range 100 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("nothing listens on %s", addr)
}

// flood opens cfg.conns connections from src, each sending a request whose
// one header grows until the proxy answers or closes, the byte budget is
// spent or the time is up, and samples the proxy's RSS all along.
func flood(pid int, addr, src string, cfg config) result {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.limit)
	defer cancel()
	var peak, sent atomic.Int64
	var answered, closed atomic.Int32
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if n, err := rss(pid); err == nil && n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	var wg sync.WaitGroup
	chunk := []byte(strings.Repeat("a", 32<<10))
	for range cfg.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return
			}
			defer c.Close()
			go func() { <-ctx.Done(); c.Close() }()
			got := make(chan bool, 1)
			go func() {
				_, err := http.ReadResponse(bufio.NewReader(c), nil)
				got <- err == nil
			}()
			n, _ := io.WriteString(c, "GET http://bench.upstream.test/ HTTP/1.1\r\nHost: bench.upstream.test\r\nX-Endless: ")
			total := int64(n)
			for total < cfg.perConn {
				n, err := c.Write(chunk)
				total += int64(n)
				if err != nil {
					break
				}
			}
			sent.Add(total)
			if total < cfg.perConn {
				closed.Add(1)
			}
			// Hold the connection until the proxy answers or the time is up,
			// so whatever it buffered for us is still held while sampled.
			select {
			case ok := <-got:
				if ok {
					answered.Add(1)
				}
			case <-ctx.Done():
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	return result{peak: peak.Load(), sent: sent.Load(), answered: int(answered.Load()), closed: int(closed.Load())}
}

// rss returns the resident set size of pid from /proc/pid/status.
func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS")
}

package main

import (
	"bufio"
	"fmt"
	"strings"

	"github.com/crackbox/crackbox/internal/hostfile"
	"github.com/crackbox/crackbox/pkg/jail"
)

// resolveEnv turns -e flags and --env-file files into KEY=VALUE entries. "-e KEY" without
// a value takes the host's value on purpose (and is dropped when the host has none, like
// Docker). Files hold KEY=VALUE or KEY lines; blank lines and # comments are skipped.
// Files come first, so -e wins.
func resolveEnv(flags, files []string, lookup func(string) (string, bool)) ([]string, error) {
	var out []string
	add := func(entry, origin string) error {
		k, v, hasVal := strings.Cut(entry, "=")
		if err := checkEnvKey(k); err != nil {
			return fmt.Errorf("%w: %s: %v", jail.ErrBadSpec, origin, err)
		}
		if !hasVal {
			hv, ok := lookup(k)
			if !ok {
				return nil
			}
			v = hv
		}
		out = append(out, k+"="+v)
		return nil
	}
	for _, f := range files {
		fh, err := hostfile.Open(f)
		if err != nil {
			return nil, fmt.Errorf("%w: env file %s: %v", jail.ErrBadSpec, f, err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		n := 0
		for sc.Scan() {
			n++
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if err := add(line, fmt.Sprintf("env file %s line %d", f, n)); err != nil {
				fh.Close()
				return nil, err
			}
		}
		err = sc.Err()
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("%w: env file %s: %v", jail.ErrBadSpec, f, err)
		}
	}
	for _, e := range flags {
		if err := add(e, fmt.Sprintf("-e %q", e)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkEnvKey refuses a name no guest program could read back; jail.Run checks the
// entries it is given the same way, this names the flag or file line they came from.
func checkEnvKey(k string) error {
	if k == "" {
		return fmt.Errorf("empty variable name; write KEY=VALUE")
	}
	if strings.ContainsAny(k, " \t\x00") {
		return fmt.Errorf("variable name %q contains a space or NUL", k)
	}
	return nil
}

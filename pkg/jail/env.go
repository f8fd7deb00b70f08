package jail

import (
	"bufio"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/crackbox/crackbox/internal/hostfile"
)

// ResolveEnv turns -e flags and --env-file files into KEY=VALUE entries. "-e KEY" without
// a value takes the host's value on purpose (and is dropped when the host has none, like
// Docker). Files hold KEY=VALUE or KEY lines; blank lines and # comments are skipped.
// Files come first, so -e wins.
func ResolveEnv(flags, files []string, lookup func(string) (string, bool)) ([]string, error) {
	var out []string
	add := func(entry, origin string) error {
		k, v, hasVal := strings.Cut(entry, "=")
		if err := checkEnvKey(k); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrBadSpec, origin, err)
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
			return nil, fmt.Errorf("%w: env file %s: %v", ErrBadSpec, f, err)
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
			return nil, fmt.Errorf("%w: env file %s: %v", ErrBadSpec, f, err)
		}
	}
	for _, e := range flags {
		if err := add(e, fmt.Sprintf("-e %q", e)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func checkEnvKey(k string) error {
	if k == "" {
		return fmt.Errorf("empty variable name; write KEY=VALUE")
	}
	if strings.ContainsAny(k, " \t\x00") {
		return fmt.Errorf("variable name %q contains a space or NUL", k)
	}
	return nil
}

// guestEnv builds the command's complete environment: PATH, HOME, TERM, LANG defaults
// (TERM and LANG from the host values the caller passes), then explicit entries, later
// entries replacing earlier ones with the same key.
func guestEnv(explicit []string, home, term, lang string, tty bool) ([]string, error) {
	if term == "" && tty {
		term = "xterm"
	}
	base := []string{"PATH=" + DefaultPath, "HOME=" + home}
	if term != "" {
		base = append(base, "TERM="+term)
	}
	if lang != "" {
		base = append(base, "LANG="+lang)
	}
	idx := map[string]int{}
	var out []string
	for _, e := range append(base, explicit...) {
		k, _, ok := strings.Cut(e, "=")
		if !ok {
			return nil, fmt.Errorf("%w: env entry %q: write KEY=VALUE", ErrBadSpec, e)
		}
		if err := checkEnvKey(k); err != nil {
			return nil, fmt.Errorf("%w: env entry %q: %v", ErrBadSpec, e, err)
		}
		if i, seen := idx[k]; seen {
			out[i] = e
			continue
		}
		idx[k] = len(out)
		out = append(out, e)
	}
	return out, nil
}

// pathFrom is the caller's PATH as candidates for the guest's, or nil when the caller
// set PATH in env: that choice wins as given. Empty entries (the current directory, by
// an old convention) are dropped.
func pathFrom(path string, env []string) []string {
	for _, e := range env {
		if strings.HasPrefix(e, "PATH=") {
			return nil
		}
	}
	var out []string
	for _, d := range filepath.SplitList(path) {
		if d != "" {
			out = append(out, d)
		}
	}
	return out
}
